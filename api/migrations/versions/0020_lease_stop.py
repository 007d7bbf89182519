"""lease stop: a lease the oracle quorum stopped for the job's fault (an early replay of its
first segment), why, when and how many segments were committed then; and the oracles'
signed job-fault verdicts, one per oracle key and lease

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.add_column(sa.Column("stop_reason", sa.String(length=32), nullable=True))
        batch_op.add_column(
            sa.Column("stop_message", sa.String(length=2000), nullable=False, server_default="")
        )
        batch_op.add_column(sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("stop_segments", sa.Integer(), nullable=True))
    op.create_table(
        "job_fault_votes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("lease_id", sa.Integer(), nullable=False),
        sa.Column("oracle_key", sa.String(length=64), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("verdict", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["lease_id"], ["leases.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("lease_id", "oracle_key"),
    )
    with op.batch_alter_table("job_fault_votes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_fault_votes_lease_id"), ["lease_id"])


def downgrade() -> None:
    op.drop_table("job_fault_votes")
    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.drop_column("stop_segments")
        batch_op.drop_column("stopped_at")
        batch_op.drop_column("stop_message")
        batch_op.drop_column("stop_reason")
