"""dispute units: oracle-signed disputes of a provider's segment and the provider's signed
commitment and reveal of its sandbox replay

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dispute_units",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("lease_id", sa.Integer(), nullable=False),
        sa.Column("provider_id", sa.Integer(), nullable=False),
        sa.Column("oracle_key", sa.String(length=64), nullable=False),
        sa.Column("task", sa.JSON(), nullable=False),
        sa.Column("commitment", sa.JSON(), nullable=True),
        sa.Column("reveal", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("committed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revealed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_dispute_units_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["lease_id"],
            ["leases.id"],
            name=op.f("fk_dispute_units_lease_id_leases"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["provider_id"],
            ["providers.id"],
            name=op.f("fk_dispute_units_provider_id_providers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dispute_units")),
        sa.UniqueConstraint("digest", name=op.f("uq_dispute_units_digest")),
    )
    with op.batch_alter_table("dispute_units", schema=None) as batch_op:
        for column in ("job_id", "lease_id", "provider_id"):
            batch_op.create_index(batch_op.f(f"ix_dispute_units_{column}"), [column], unique=False)


def downgrade() -> None:
    op.drop_table("dispute_units")
