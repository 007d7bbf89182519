"""proof key requests: oracle-signed requests for the content keys of a sealed job's proof
files, and the providers' grants (keys wrapped for the drawn verifier), relayed unopened

Revision ID: 0010
Revises: 0009
Create Date: 2025-01-10
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "proof_key_requests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("lease_id", sa.Integer(), nullable=False),
        sa.Column("provider_id", sa.Integer(), nullable=False),
        sa.Column("recipient_key", sa.String(length=64), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("grants", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_proof_key_requests_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["lease_id"],
            ["leases.id"],
            name=op.f("fk_proof_key_requests_lease_id_leases"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["provider_id"],
            ["providers.id"],
            name=op.f("fk_proof_key_requests_provider_id_providers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_proof_key_requests")),
        sa.UniqueConstraint("digest", name=op.f("uq_proof_key_requests_digest")),
    )
    with op.batch_alter_table("proof_key_requests", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_proof_key_requests_job_id"), ["job_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_proof_key_requests_lease_id"), ["lease_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_proof_key_requests_provider_id"), ["provider_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_proof_key_requests_recipient_key"), ["recipient_key"], unique=False
        )


def downgrade() -> None:
    op.drop_table("proof_key_requests")
