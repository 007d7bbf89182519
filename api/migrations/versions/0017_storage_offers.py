"""storage offers and placements: storage providers' signed offers (capacity, price per
GB-month, S3 endpoint) and the copies of jobs' content placed with them

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "storage_offers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("provider_key", sa.String(length=64), nullable=False),
        sa.Column("payout_address", sa.String(length=200), nullable=False),
        sa.Column("endpoint", sa.String(length=512), nullable=False),
        sa.Column("bucket", sa.String(length=63), nullable=False),
        sa.Column("capacity_bytes", sa.BigInteger(), nullable=False),
        sa.Column("ntx_per_gb_month", sa.BigInteger(), nullable=False),
        sa.Column("offer", sa.JSON(), nullable=False),
        sa.Column("offered_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("provider_key"),
    )
    op.create_table(
        "storage_placements",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("object_key", sa.String(length=512), nullable=False),
        sa.Column("provider_key", sa.String(length=64), nullable=False),
        sa.Column("content_root", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("chunk_size", sa.Integer(), nullable=False),
        sa.Column("ntx_per_gb_month", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=2000), nullable=False),
        sa.Column("replaces_id", sa.Integer(), nullable=True),
        sa.Column("placed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("accrued_ntx", sa.BigInteger(), nullable=False),
        sa.Column("paid_through", sa.DateTime(timezone=True), nullable=True),
        sa.Column("challenges_passed", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["replaces_id"], ["storage_placements.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id", "object_key", "provider_key"),
    )
    with op.batch_alter_table("storage_placements", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_storage_placements_job_id"), ["job_id"])
        batch_op.create_index(batch_op.f("ix_storage_placements_provider_key"), ["provider_key"])


def downgrade() -> None:
    with op.batch_alter_table("storage_placements", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_storage_placements_provider_key"))
        batch_op.drop_index(batch_op.f("ix_storage_placements_job_id"))
    op.drop_table("storage_placements")
    op.drop_table("storage_offers")
