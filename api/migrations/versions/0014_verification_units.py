"""verification units: oracle-signed replay tasks for drawn verifiers and their signed
reports, relayed unchanged; providers.verifies_at (workers that ask for tasks)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("providers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("verifies_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "verification_units",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("lease_id", sa.Integer(), nullable=False),
        sa.Column("provider_id", sa.Integer(), nullable=False),
        sa.Column("verifier_id", sa.Integer(), nullable=False),
        sa.Column("oracle_key", sa.String(length=64), nullable=False),
        sa.Column("task", sa.JSON(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_verification_units_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["lease_id"],
            ["leases.id"],
            name=op.f("fk_verification_units_lease_id_leases"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["provider_id"],
            ["providers.id"],
            name=op.f("fk_verification_units_provider_id_providers"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["verifier_id"],
            ["providers.id"],
            name=op.f("fk_verification_units_verifier_id_providers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_verification_units")),
        sa.UniqueConstraint("digest", name=op.f("uq_verification_units_digest")),
    )
    with op.batch_alter_table("verification_units", schema=None) as batch_op:
        for column in ("job_id", "lease_id", "provider_id", "verifier_id"):
            batch_op.create_index(
                batch_op.f(f"ix_verification_units_{column}"), [column], unique=False
            )


def downgrade() -> None:
    op.drop_table("verification_units")
    with op.batch_alter_table("providers", schema=None) as batch_op:
        batch_op.drop_column("verifies_at")
