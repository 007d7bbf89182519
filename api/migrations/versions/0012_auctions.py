"""auctions: sealed-bid reverse auctions of auction-priced jobs (windows, outcome) and bids

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "auction_bids",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("provider_id", sa.Integer(), nullable=False),
        sa.Column("worker_key", sa.String(length=64), nullable=False),
        sa.Column("commitment", sa.String(length=64), nullable=False),
        sa.Column("committed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revealed", sa.JSON(), nullable=True),
        sa.Column("revealed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_auction_bids_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["provider_id"],
            ["providers.id"],
            name=op.f("fk_auction_bids_provider_id_providers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auction_bids")),
        sa.UniqueConstraint("job_id", "provider_id", name=op.f("uq_auction_bids_job_id")),
    )
    with op.batch_alter_table("auction_bids", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_auction_bids_job_id"), ["job_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_auction_bids_provider_id"), ["provider_id"], unique=False
        )

    op.create_table(
        "auctions",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("reserve", sa.BigInteger(), nullable=False),
        sa.Column("bids_close_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reveals_close_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cleared_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("winner_provider_id", sa.Integer(), nullable=True),
        sa.Column("winner_key", sa.String(length=64), nullable=True),
        sa.Column("price", sa.BigInteger(), nullable=True),
        sa.Column("reason", sa.String(length=500), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_auctions_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["winner_provider_id"],
            ["providers.id"],
            name=op.f("fk_auctions_winner_provider_id_providers"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_auctions")),
    )
    with op.batch_alter_table("auctions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_auctions_bids_close_at"), ["bids_close_at"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_auctions_reveals_close_at"), ["reveals_close_at"], unique=False
        )


def downgrade() -> None:
    op.drop_table("auctions")
    op.drop_table("auction_bids")
