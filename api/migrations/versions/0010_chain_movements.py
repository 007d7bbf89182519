"""earnings from the chain: the movements this deployment's scripts made (payouts, refunds,
cancels, slashes) as the chain watcher read them, its cursor and lease per deployment, and
its recent points; the callback-fed `payouts` table goes (nothing but tests wrote it: the
watcher rebuilds the record from the chain)

Revision ID: 0010
Revises: 0009
Create Date: 2025-01-10
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# On PostgreSQL a recorded or removed movement is announced like a payout was (migration
# 0008's function: "p:<address>"), so every API process drops its cached balances.
_TRIGGER = (
    "CREATE TRIGGER {table}_notify_reads AFTER INSERT OR UPDATE OR DELETE ON {table} "
    "FOR EACH ROW EXECUTE FUNCTION proofnet_notify_movement()"
)
_FUNCTION = """
    CREATE FUNCTION proofnet_notify_movement() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            PERFORM pg_notify('proofnet_reads', 'p:' || OLD.address);
        ELSE
            PERFORM pg_notify('proofnet_reads', 'p:' || NEW.address);
        END IF;
        RETURN NULL;
    END $$
"""


def _postgres() -> bool:
    return bool(op.get_bind().dialect.name == "postgresql")


def _when(name: str, *, nullable: bool = False) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "chain_movements",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("deployment", sa.String(length=56), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("escrow_tx_id", sa.String(length=64), nullable=False),
        sa.Column("escrow_index", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("tx_hash", sa.String(length=64), nullable=False),
        sa.Column("tx_index", sa.Integer(), nullable=False),
        sa.Column("output_index", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(length=200), nullable=False),
        sa.Column("lovelace", sa.BigInteger(), nullable=False),
        sa.Column("ntx", sa.BigInteger(), nullable=False),
        sa.Column("block_height", sa.BigInteger(), nullable=False),
        sa.Column("block_hash", sa.String(length=64), nullable=False),
        sa.Column("slot", sa.BigInteger(), nullable=False),
        _when("block_time"),
        _when("recorded_at"),
        _when("notified_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chain_movements")),
        sa.UniqueConstraint("tx_hash", "output_index", name=op.f("uq_chain_movements_tx_hash")),
    )
    with op.batch_alter_table("chain_movements", schema=None) as batch_op:
        batch_op.create_index("ix_chain_movements_escrow", ["escrow_tx_id", "escrow_index"])
        batch_op.create_index("ix_chain_movements_block", ["deployment", "block_height"])
        batch_op.create_index(batch_op.f("ix_chain_movements_address"), ["address"])
        batch_op.create_index(batch_op.f("ix_chain_movements_job_id"), ["job_id"])

    op.create_table(
        "chain_watch_cursors",
        sa.Column("deployment", sa.String(length=56), nullable=False),
        sa.Column("height", sa.BigInteger(), nullable=True),
        sa.Column("block_hash", sa.String(length=64), nullable=True),
        sa.Column("slot", sa.BigInteger(), nullable=True),
        sa.Column("tip_height", sa.BigInteger(), nullable=True),
        sa.Column("holder", sa.String(length=200), nullable=False),
        _when("lease_expires_at", nullable=True),
        _when("updated_at"),
        sa.PrimaryKeyConstraint("deployment", name=op.f("pk_chain_watch_cursors")),
    )
    op.create_table(
        "chain_watch_points",
        sa.Column("deployment", sa.String(length=56), nullable=False),
        sa.Column("height", sa.BigInteger(), nullable=False),
        sa.Column("block_hash", sa.String(length=64), nullable=False),
        sa.Column("slot", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("deployment", "height", name=op.f("pk_chain_watch_points")),
    )

    if _postgres():
        op.execute("DROP TRIGGER IF EXISTS payouts_notify_reads ON payouts")
        op.execute(_FUNCTION)
        op.execute(_TRIGGER.format(table="chain_movements"))
    with op.batch_alter_table("payouts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_payouts_payout_address"))
        batch_op.drop_index(batch_op.f("ix_payouts_job_id"))
    op.drop_table("payouts")


def downgrade() -> None:
    op.create_table(
        "payouts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("payout_address", sa.String(length=200), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("tx_hash", sa.String(length=64), nullable=False),
        _when("confirmed_at"),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_payouts_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_payouts")),
        sa.UniqueConstraint("tx_hash", "job_id", name=op.f("uq_payouts_tx_hash")),
    )
    with op.batch_alter_table("payouts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_payouts_job_id"), ["job_id"])
        batch_op.create_index(batch_op.f("ix_payouts_payout_address"), ["payout_address"])
    if _postgres():
        op.execute("DROP TRIGGER IF EXISTS chain_movements_notify_reads ON chain_movements")
        op.execute("DROP FUNCTION IF EXISTS proofnet_notify_movement()")
        op.execute(
            "CREATE TRIGGER payouts_notify_reads AFTER INSERT OR UPDATE OR DELETE ON payouts "
            "FOR EACH ROW EXECUTE FUNCTION proofnet_notify_payout()"
        )
    op.drop_table("chain_watch_points")
    op.drop_table("chain_watch_cursors")
    with op.batch_alter_table("chain_movements", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_chain_movements_job_id"))
        batch_op.drop_index(batch_op.f("ix_chain_movements_address"))
        batch_op.drop_index("ix_chain_movements_block")
        batch_op.drop_index("ix_chain_movements_escrow")
    op.drop_table("chain_movements")
