"""job outputs: result files, log lines and metering reports from workers

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column],
        [f"{target}.id"],
        name=op.f(f"fk_{table}_{column}_{target}"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    op.create_table(
        "job_log_lines",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("lease_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stream", sa.String(length=16), nullable=False),
        sa.Column("text", sa.String(length=4096), nullable=False),
        _fk("job_log_lines", "job_id", "jobs"),
        _fk("job_log_lines", "lease_id", "leases"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_log_lines")),
    )
    with op.batch_alter_table("job_log_lines", schema=None) as batch_op:
        batch_op.create_index("ix_job_log_lines_job_seq", ["job_id", "id"], unique=False)

    op.create_table(
        "job_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("lease_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=512), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("uploaded_at", sa.DateTime(timezone=True), nullable=False),
        _fk("job_results", "job_id", "jobs"),
        _fk("job_results", "lease_id", "leases"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_results")),
        sa.UniqueConstraint("lease_id", "name", name=op.f("uq_job_results_lease_id")),
    )
    with op.batch_alter_table("job_results", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_results_job_id"), ["job_id"], unique=False)

    op.create_table(
        "lease_usage",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("lease_id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("usage", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        _fk("lease_usage", "job_id", "jobs"),
        _fk("lease_usage", "lease_id", "leases"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lease_usage")),
        sa.UniqueConstraint("lease_id", name=op.f("uq_lease_usage_lease_id")),
    )
    with op.batch_alter_table("lease_usage", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lease_usage_job_id"), ["job_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("lease_usage", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lease_usage_job_id"))
    op.drop_table("lease_usage")
    with op.batch_alter_table("job_results", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_results_job_id"))
    op.drop_table("job_results")
    with op.batch_alter_table("job_log_lines", schema=None) as batch_op:
        batch_op.drop_index("ix_job_log_lines_job_seq")
    op.drop_table("job_log_lines")
