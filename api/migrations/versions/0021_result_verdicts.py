"""result verdicts: each trusted oracle's verdict on a lease's attestation (result release)

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "result_verdicts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("lease_id", sa.Integer(), nullable=False),
        sa.Column("oracle_key", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("fault", sa.String(length=16), nullable=True),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.Column("message", sa.String(length=2000), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_result_verdicts_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["lease_id"],
            ["leases.id"],
            name=op.f("fk_result_verdicts_lease_id_leases"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_result_verdicts")),
        sa.UniqueConstraint("lease_id", "oracle_key", name=op.f("uq_result_verdicts_lease_id")),
    )
    with op.batch_alter_table("result_verdicts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_result_verdicts_job_id"), ["job_id"], unique=False)


def downgrade() -> None:
    op.drop_table("result_verdicts")
