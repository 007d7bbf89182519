"""read notifications: on PostgreSQL, every committed change a polled read depends on is
announced on the `proofnet_reads` channel, so each API process's read caches drop what
changed at once (api.reads._change_feed); nothing on SQLite

Revision ID: 0008
Revises: 0007
Create Date: 2025-01-08
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Payloads (api.reads._change_feed parses them): "j:<job id>" a job's status may have changed,
# "q:<job id>" and the queue's membership changed with it (every queued job's position may
# have), "e:<job id>" its escrow record changed, "t:<token hash>" a bearer token was revoked
# or deleted, "p:<payout address>" a payout was recorded. NOTIFY is delivered at commit,
# never for a rolled-back change, and once per distinct payload per transaction.
FUNCTIONS = (
    """
    CREATE FUNCTION proofnet_notify_job() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        row_job_id text;
        queue_changed boolean;
    BEGIN
        IF TG_OP = 'DELETE' THEN
            row_job_id := OLD.job_id;
            queue_changed := OLD.status = 'queued';
        ELSIF TG_OP = 'INSERT' THEN
            row_job_id := NEW.job_id;
            queue_changed := NEW.status = 'queued';
        ELSE
            row_job_id := NEW.job_id;
            queue_changed := (OLD.status = 'queued') <> (NEW.status = 'queued');
        END IF;
        PERFORM pg_notify(
            'proofnet_reads', (CASE WHEN queue_changed THEN 'q:' ELSE 'j:' END) || row_job_id
        );
        RETURN NULL;
    END $$
    """,
    """
    CREATE FUNCTION proofnet_notify_job_part() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        parent integer;
        parent_job_id text;
    BEGIN
        IF TG_OP = 'DELETE' THEN
            parent := OLD.job_id;
        ELSE
            parent := NEW.job_id;
        END IF;
        SELECT job_id INTO parent_job_id FROM jobs WHERE id = parent;
        IF parent_job_id IS NOT NULL THEN
            PERFORM pg_notify('proofnet_reads', TG_ARGV[0] || ':' || parent_job_id);
        END IF;
        RETURN NULL;
    END $$
    """,
    """
    CREATE FUNCTION proofnet_notify_token() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            PERFORM pg_notify('proofnet_reads', 't:' || OLD.token_hash);
        ELSIF NEW.revoked_at IS DISTINCT FROM OLD.revoked_at
            OR NEW.expires_at IS DISTINCT FROM OLD.expires_at
            OR NEW.user_id IS DISTINCT FROM OLD.user_id THEN
            PERFORM pg_notify('proofnet_reads', 't:' || OLD.token_hash);
        END IF;
        RETURN NULL;
    END $$
    """,
    """
    CREATE FUNCTION proofnet_notify_payout() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            PERFORM pg_notify('proofnet_reads', 'p:' || OLD.payout_address);
        ELSE
            PERFORM pg_notify('proofnet_reads', 'p:' || NEW.payout_address);
        END IF;
        RETURN NULL;
    END $$
    """,
)
TRIGGERS = (
    ("jobs", "INSERT OR UPDATE OR DELETE", "proofnet_notify_job()"),
    # A lease's heartbeat shows in its job's status; a job's units are its status.
    ("leases", "INSERT OR UPDATE OR DELETE", "proofnet_notify_job_part('j')"),
    ("job_units", "INSERT OR UPDATE OR DELETE", "proofnet_notify_job_part('j')"),
    ("job_escrows", "INSERT OR UPDATE OR DELETE", "proofnet_notify_job_part('e')"),
    ("api_tokens", "UPDATE OR DELETE", "proofnet_notify_token()"),
    ("payouts", "INSERT OR UPDATE OR DELETE", "proofnet_notify_payout()"),
)


def _postgres() -> bool:
    return bool(op.get_bind().dialect.name == "postgresql")


def upgrade() -> None:
    if not _postgres():
        return
    for function in FUNCTIONS:
        op.execute(function)
    for table, events, call in TRIGGERS:
        op.execute(
            f"CREATE TRIGGER {table}_notify_reads AFTER {events} ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {call}"
        )


def downgrade() -> None:
    if not _postgres():
        return
    for table, _events, _call in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {table}_notify_reads ON {table}")
    for name in (
        "proofnet_notify_job",
        "proofnet_notify_job_part",
        "proofnet_notify_token",
        "proofnet_notify_payout",
    ):
        op.execute(f"DROP FUNCTION IF EXISTS {name}()")
