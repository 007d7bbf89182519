"""job units: the separately leased units of a job with a topology (relay stages,
evaluations, aggregations, multi-node ranks), and the unit a lease is for

Revision ID: 0006
Revises: 0005
Create Date: 2025-01-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_units",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("current_lease_id", sa.Integer(), nullable=True),
        sa.Column("completed_lease_id", sa.Integer(), nullable=True),
        sa.Column("inputs", sa.JSON(), nullable=True),
        sa.Column("output", sa.String(length=64), nullable=True),
        sa.Column("output_size", sa.BigInteger(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=True),
        sa.Column("endpoint", sa.String(length=300), nullable=True),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_units_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_units")),
        sa.UniqueConstraint("job_id", "index", name=op.f("uq_job_units_job_id")),
    )
    with op.batch_alter_table("job_units", schema=None) as batch_op:
        batch_op.create_index("ix_job_units_status_job", ["status", "job_id"], unique=False)

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        # Every job before this revision is a single-unit job.
        batch_op.add_column(
            sa.Column("unit_count", sa.Integer(), nullable=False, server_default="0")
        )

    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.add_column(sa.Column("unit_id", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_leases_unit_id"), ["unit_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_leases_unit_id_job_units"),
            "job_units",
            ["unit_id"],
            ["id"],
            ondelete="CASCADE",
        )


def downgrade() -> None:
    with op.batch_alter_table("leases", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_leases_unit_id_job_units"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_leases_unit_id"))
        batch_op.drop_column("unit_id")

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("unit_count")

    with op.batch_alter_table("job_units", schema=None) as batch_op:
        batch_op.drop_index("ix_job_units_status_job")

    op.drop_table("job_units")
