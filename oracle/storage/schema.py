"""Creating the oracle's tables, and bringing an existing database up to date.

The oracle has no migration tool: its tables are created with `create_all`, which never
changes a table that already exists. Columns added later are therefore added here, in
place, when the oracle starts (`create_tables`): each step looks at the live table first, so
running it again, or from two processes at once, changes nothing twice.

Steps so far:
- `oracle_attestations.unit_index` and `unit_output` (units of topology jobs), NULL for the
  rows that exist already, which are all single-unit attestations;
- `oracle_attestations.fault` (whose fault a verdict is), NULL for the rows that exist;
- `oracle_attestations.attempt` (the attempt of a resumed job an attestation names), NULL
  for the rows that exist;
- `oracle_attestations.stop_evidence` (the evidence of a stopped lease's stop its
  settlement publishes), NULL for the rows that exist;
- `oracle_attestations.payable_escrow` widened from 80 to 96 characters, so the per-unit
  key `<out-ref>/<unit>` fits on PostgreSQL (SQLite does not enforce VARCHAR lengths);
- `oracle_storage_accruals.chunk_size`, `strikes`, `struck_at`, `ends_at` (strikes before a copy is lost,
  the term's end the escrow waits for) and `oracle_storage_challenges.beacon`, `leaf_hash`,
  `proof` (the evidence receipts carry); rows from before have none.
"""

from __future__ import annotations

import logging

from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import DBAPIError

from oracle.models import PAYABLE_KEY_LENGTH, metadata

log = logging.getLogger("oracle.schema")

ATTESTATIONS = "oracle_attestations"
_ADDED_COLUMNS = (
    ("unit_index", "INTEGER"),
    ("unit_output", "VARCHAR(64)"),
    ("fault", "VARCHAR(16)"),
    ("attempt", "INTEGER"),
    ("stop_evidence", "JSON"),
)


def create_tables(engine: Engine) -> list[str]:
    """Create missing tables (those of every imported oracle module), then upgrade existing
    ones; returns the upgrade statements that ran."""
    metadata.create_all(engine)
    return upgrade(engine)


def _storage_columns(engine: Engine) -> dict[str, tuple[tuple[str, str], ...]]:
    stamp = "TIMESTAMP WITH TIME ZONE" if engine.dialect.name == "postgresql" else "DATETIME"
    return {
        "oracle_storage_accruals": (
            ("chunk_size", "INTEGER"),
            ("strikes", "INTEGER NOT NULL DEFAULT 0"),
            ("struck_at", stamp),
            ("ends_at", stamp),
        ),
        "oracle_storage_challenges": (
            ("beacon", "VARCHAR(64)"),
            ("leaf_hash", "VARCHAR(64)"),
            ("proof", "JSON"),
        ),
    }


def _pending(engine: Engine) -> list[str]:
    columns = {c["name"]: c for c in inspect(engine).get_columns(ATTESTATIONS)}
    statements = [
        f"ALTER TABLE {ATTESTATIONS} ADD COLUMN {name} {kind}"
        for name, kind in _ADDED_COLUMNS
        if name not in columns
    ]
    for table, added in _storage_columns(engine).items():
        have = {c["name"] for c in inspect(engine).get_columns(table)}
        statements += [
            f"ALTER TABLE {table} ADD COLUMN {name} {kind}"
            for name, kind in added
            if name not in have
        ]
    if engine.dialect.name == "postgresql":
        length = getattr(columns["payable_escrow"]["type"], "length", None)
        if length is not None and length < PAYABLE_KEY_LENGTH:
            statements.append(
                f"ALTER TABLE {ATTESTATIONS} ALTER COLUMN payable_escrow "
                f"TYPE VARCHAR({PAYABLE_KEY_LENGTH})"
            )
    return statements


def upgrade(engine: Engine) -> list[str]:
    """Bring `oracle_attestations` up to the current columns (see the module doc)."""
    ran: list[str] = []
    for statement in _pending(engine):
        try:
            with engine.begin() as conn:
                conn.execute(text(statement))
        except DBAPIError:
            # Another oracle process sharing the database may have run it first.
            if statement in _pending(engine):
                raise
            continue
        log.info("oracle schema upgraded: %s", statement)
        ran.append(statement)
    return ran
