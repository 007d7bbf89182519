"""payouts, measured runs, notification subscriptions and the notification outbox

Revision ID: 0004
Revises: 0003
Create Date: 2025-01-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _fk(table: str, column: str, target: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column],
        [f"{target}.id"],
        name=op.f(f"fk_{table}_{column}_{target}"),
        ondelete="CASCADE",
    )


def _when(name: str, *, nullable: bool = False) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "notification_subscriptions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("target", sa.String(length=2048), nullable=False),
        sa.Column("secret", sa.String(length=128), nullable=False),
        _when("created_at"),
        _when("updated_at"),
        _fk("notification_subscriptions", "user_id", "users"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notification_subscriptions")),
        sa.UniqueConstraint(
            "user_id", "channel", name=op.f("uq_notification_subscriptions_user_id")
        ),
    )

    op.create_table(
        "notification_outbox",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("subscription_id", sa.Integer(), nullable=False),
        sa.Column("event", sa.String(length=32), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        _when("next_attempt_at"),
        _when("locked_until", nullable=True),
        sa.Column("last_error", sa.String(length=2000), nullable=False),
        _when("created_at"),
        _when("delivered_at", nullable=True),
        _fk("notification_outbox", "user_id", "users"),
        _fk("notification_outbox", "subscription_id", "notification_subscriptions"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notification_outbox")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_notification_outbox_idempotency_key")),
    )
    with op.batch_alter_table("notification_outbox", schema=None) as batch_op:
        batch_op.create_index("ix_notification_outbox_due", ["status", "next_attempt_at"])
        batch_op.create_index(
            batch_op.f("ix_notification_outbox_subscription_id"), ["subscription_id"]
        )
        batch_op.create_index(batch_op.f("ix_notification_outbox_user_id"), ["user_id"])

    op.create_table(
        "payouts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("payout_address", sa.String(length=200), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("tx_hash", sa.String(length=64), nullable=False),
        _when("confirmed_at"),
        _fk("payouts", "job_id", "jobs"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_payouts")),
        sa.UniqueConstraint("tx_hash", "job_id", name=op.f("uq_payouts_tx_hash")),
    )
    with op.batch_alter_table("payouts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_payouts_job_id"), ["job_id"])
        batch_op.create_index(batch_op.f("ix_payouts_payout_address"), ["payout_address"])

    op.create_table(
        "measured_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("workload", sa.String(length=64), nullable=False),
        sa.Column("gpu_model", sa.String(length=128), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("elapsed_s", sa.Float(), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        _when("measured_at"),
        _fk("measured_runs", "job_id", "jobs"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_measured_runs")),
        sa.UniqueConstraint("job_id", "gpu_model", name=op.f("uq_measured_runs_job_id")),
    )
    with op.batch_alter_table("measured_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_measured_runs_workload"), ["workload"])


def downgrade() -> None:
    with op.batch_alter_table("measured_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_measured_runs_workload"))
    op.drop_table("measured_runs")
    with op.batch_alter_table("payouts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_payouts_payout_address"))
        batch_op.drop_index(batch_op.f("ix_payouts_job_id"))
    op.drop_table("payouts")
    with op.batch_alter_table("notification_outbox", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_notification_outbox_user_id"))
        batch_op.drop_index(batch_op.f("ix_notification_outbox_subscription_id"))
        batch_op.drop_index("ix_notification_outbox_due")
    op.drop_table("notification_outbox")
    op.drop_table("notification_subscriptions")
