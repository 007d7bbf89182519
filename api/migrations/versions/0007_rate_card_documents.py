"""rate card documents: published (content-addressed), each provider's current one, and the
one each rate-card job names

Revision ID: 0007
Revises: 0006
Create Date: 2025-01-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_card_documents",
        sa.Column("digest", sa.String(length=71), nullable=False),
        sa.Column("provider_key", sa.String(length=64), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_rate_card_documents")),
    )
    with op.batch_alter_table("rate_card_documents", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_rate_card_documents_provider_key"), ["provider_key"], unique=False
        )

    op.create_table(
        "provider_rate_cards",
        sa.Column("provider_id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=71), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["digest"],
            ["rate_card_documents.digest"],
            name=op.f("fk_provider_rate_cards_digest_rate_card_documents"),
        ),
        sa.ForeignKeyConstraint(
            ["provider_id"],
            ["providers.id"],
            name=op.f("fk_provider_rate_cards_provider_id_providers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("provider_id", name=op.f("pk_provider_rate_cards")),
    )

    op.create_table(
        "job_rate_cards",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=71), nullable=False),
        sa.ForeignKeyConstraint(
            ["digest"],
            ["rate_card_documents.digest"],
            name=op.f("fk_job_rate_cards_digest_rate_card_documents"),
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_job_rate_cards_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_job_rate_cards")),
    )
    with op.batch_alter_table("job_rate_cards", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_rate_cards_digest"), ["digest"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("job_rate_cards", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_rate_cards_digest"))
    op.drop_table("job_rate_cards")
    op.drop_table("provider_rate_cards")
    with op.batch_alter_table("rate_card_documents", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_rate_card_documents_provider_key"))
    op.drop_table("rate_card_documents")
