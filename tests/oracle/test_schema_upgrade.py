"""The store's unit columns on SQLite and PostgreSQL: a database created before unit
attestations existed is upgraded in place when the oracle starts (rows kept, columns added,
the longest payable key fits), and unit rows are read and moved alike on both."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from postgres_db import fresh_database
from sqlalchemy import inspect, text
from unit_fixtures import make_unit_world

from oracle.models import payable_key
from oracle.storage.db import make_engine
from oracle.storage.schema import create_tables
from oracle.storage.store import AttestationStore
from oracle.verification.verify import VerificationResult
from proofnet.messages.attestation import EscrowRef, UnitWork


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh database, dropped afterwards; fails (never skips) without PostgreSQL."""
    with fresh_database("proofnet_oracle") as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'oracle.db'}"
    return str(request.getfixturevalue("postgres_url"))


def _downgrade(store: AttestationStore) -> None:
    """Make the table what the previous release created."""
    with store.engine.begin() as conn:
        conn.execute(text("ALTER TABLE oracle_attestations DROP COLUMN unit_index"))
        conn.execute(text("ALTER TABLE oracle_attestations DROP COLUMN unit_output"))
        if store.engine.dialect.name == "postgresql":
            conn.execute(
                text("ALTER TABLE oracle_attestations ALTER COLUMN payable_escrow TYPE VARCHAR(80)")
            )


def test_old_database_is_upgraded_in_place(database_url: str) -> None:
    engine = make_engine(database_url)
    store = AttestationStore(engine)
    store.create_schema()
    world = make_unit_world(store)
    world.complete(0)
    old, _ = store.receive(world.attestation(0), world.sign(0))
    assert old.id is not None
    _downgrade(store)
    columns = {c["name"] for c in inspect(engine).get_columns("oracle_attestations")}
    assert "unit_index" not in columns

    ran = create_tables(engine)
    assert any("unit_index" in s for s in ran) and any("unit_output" in s for s in ran)
    assert create_tables(engine) == []  # nothing twice
    kept = store.get(old.id)
    assert kept is not None and kept.leaf_hash == old.leaf_hash
    assert kept.unit_index is None and kept.unit_output is None  # as every old row

    # A ten-digit output index (`escrow_index` is a 32-bit signed column, as before) and the
    # largest unit index an attestation can name make the longest payable key: 81
    # characters. (Planned units stay below 2000, so only the store's key is stretched here.)
    far = make_unit_world(store)
    far.escrow = EscrowRef(tx_id=secrets.token_hex(32), index=2**31 - 1)
    far.complete(0)
    att = far.attestation(0, unit=UnitWork(index=65_535, kind="stage", output="1" * 64))
    row, _ = store.receive(att, far.sign(0, att))
    assert row.id is not None
    key = payable_key(f"{far.escrow.tx_id}#{2**31 - 1}", 65_535)
    assert len(key) == 81
    applied = store.apply(row.id, VerificationResult("verified", None, "", (), att))
    assert applied.status == "verified"
    assert store.payable_for_escrow(key) == (row.id, "verified")
    engine.dispose()


def test_unit_rows_are_read_and_moved_alike_on_both_databases(database_url: str) -> None:
    """The unit queries (payable units, waiting units, unit escrows and their claims) and
    the settlement's moves, on SQLite and PostgreSQL."""
    from sqlmodel import Session

    import oracle.settlement.models  # noqa: F401  (registers the settlement tables)
    from oracle.settlement.queue import AttestationQueue
    from oracle.verification.verify import verify

    engine = make_engine(database_url)
    store = AttestationStore(engine)
    store.create_schema()
    world = make_unit_world(store)
    ref = f"{world.escrow.tx_id}#{world.escrow.index}"
    for index in (0, 1):
        world.complete(index)
    ids = store.receive_many([(world.attestation(i), world.sign(i)) for i in (1, 0)])
    assert store.waiting_in_escrow(ref) == [ids[1], ids[0]]  # unit order
    for ident, index in ((ids[1], 0), (ids[0], 1)):
        result = verify(world.sign(index), world.context(), own_id=ident)
        assert store.apply(ident, result).status == "verified"
    payable = store.payable_units(ref)
    assert {i: (p.attestation_id, p.output, p.nonce) for i, p in payable.items()} == {
        0: (ids[1], world.outputs[0], world.nonces[0]),
        1: (ids[0], world.outputs[1], world.nonces[1]),
    }
    snapshot = store.snapshot([world.attestation(1)])
    assert snapshot.payable_units(ref) == payable
    queue = AttestationQueue()
    with Session(engine) as session:
        (group,) = queue.unit_escrows(session)
        assert (str(group.escrow), group.job_id, group.claims) == (ref, world.job_id, 2)
        assert group.oldest > 0
        claims = queue.unit_claims(session, [group.escrow])
        assert [(c.unit, c.amount) for c in claims] == [(0, 1000), (1, 1000)]
        assert queue.payable(session, 10) == []  # single-unit claims only
        queue.mark(session, [c.attestation_id for c in claims], "batched")
        queue.mark(session, [c.attestation_id for c in claims], "verified")
        session.commit()
    assert store.payable_for_escrow(payable_key(ref, 1)) == (ids[0], "verified")
    engine.dispose()


def test_storage_tables_of_an_older_release_gain_strikes_and_evidence_columns(
    database_url: str,
) -> None:
    engine = make_engine(database_url)
    create_tables(engine)
    dropped = {
        "oracle_storage_accruals": ("chunk_size", "strikes", "struck_at", "ends_at"),
        "oracle_storage_challenges": ("beacon", "leaf_hash", "proof"),
    }
    with engine.begin() as conn:
        for table, names in dropped.items():
            for name in names:
                conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {name}"))
    ran = create_tables(engine)
    assert len(ran) == 7
    for table, names in dropped.items():
        have = {c["name"] for c in inspect(engine).get_columns(table)}
        assert set(names) <= have, table
    assert create_tables(engine) == []  # nothing twice
    engine.dispose()
