"""gpu challenges: the API's own check of each registered GPU (seed, commitment, revealed
rows, verdict), each GPU's check status, and the checked GPU models each lease was made on

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.add_column(sa.Column("gpu_models", sa.JSON(), nullable=True))
    with op.batch_alter_table("provider_gpus", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "check_status", sa.String(length=16), nullable=False, server_default="unchecked"
            )
        )
        batch_op.add_column(
            sa.Column("check_reason", sa.String(length=2000), nullable=False, server_default="")
        )
        batch_op.add_column(sa.Column("verified_until", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "gpu_challenges",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("provider_id", sa.Integer(), nullable=False),
        sa.Column("gpu_uuid", sa.String(length=128), nullable=False),
        sa.Column("gpu_model", sa.String(length=128), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("dtype", sa.String(length=16), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=2000), nullable=False),
        sa.Column("issued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("signs_key", sa.String(length=64), nullable=True),
        sa.Column("committed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("commitment", sa.String(length=64), nullable=True),
        sa.Column("reveal", sa.JSON(), nullable=True),
        sa.Column("elapsed_s", sa.Float(), nullable=True),
        sa.Column("measured_tflops", sa.Float(), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["provider_id"],
            ["providers.id"],
            name=op.f("fk_gpu_challenges_provider_id_providers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpu_challenges")),
    )
    with op.batch_alter_table("gpu_challenges", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_gpu_challenges_provider_id"), ["provider_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.drop_column("gpu_models")
    op.drop_table("gpu_challenges")
    with op.batch_alter_table("provider_gpus", schema=None) as batch_op:
        batch_op.drop_column("verified_until")
        batch_op.drop_column("check_reason")
        batch_op.drop_column("check_status")
