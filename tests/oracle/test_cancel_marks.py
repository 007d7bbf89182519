"""Cancel marks (oracle.storage.cancel_marks): an oracle marks an escrow cancelled only while its own
store holds no attestation for the escrow or its job, and the store then reports the mark to
the verification pipeline (which rejects every attestation for it)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from oracle_fixtures import make_world

from oracle.models import escrow_ref
from oracle.storage import cancel_marks
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> AttestationStore:
    s = AttestationStore(make_engine(f"sqlite:///{tmp_path / 'oracle.db'}"))
    s.create_schema()
    return s


def test_an_untouched_escrow_is_marked_once_and_the_store_reports_it(
    store: AttestationStore,
) -> None:
    world = make_world()
    ref = escrow_ref(world.escrow.tx_id, world.escrow.index)
    assert store.cancelled_escrow(ref) is None
    first = cancel_marks.mark(
        store.engine, escrow=ref, job_id=world.job_id, cancel_tx_id="c1" * 32, now=NOW
    )
    again = cancel_marks.mark(
        store.engine, escrow=ref, job_id=world.job_id, cancel_tx_id="c2" * 32, now=NOW
    )
    assert first == again and first.cancel_tx_id == "c1" * 32
    why = store.cancelled_escrow(ref)
    assert why is not None and "c1" * 32 in why and "UTC" in why
    snapshot = store.snapshot([world.attestation])
    assert snapshot.cancelled_escrow(ref) == why


def test_an_escrow_with_an_attestation_in_this_oracles_store_is_not_marked(
    store: AttestationStore,
) -> None:
    world = make_world()
    store.receive(world.attestation, world.sign())
    ref = escrow_ref(world.escrow.tx_id, world.escrow.index)
    with pytest.raises(cancel_marks.WorkSeen, match="received an attestation .* work was done"):
        cancel_marks.mark(
            store.engine, escrow=ref, job_id=world.job_id, cancel_tx_id="c1" * 32, now=NOW
        )
    # Another escrow of the same job is refused too: the job saw work.
    with pytest.raises(cancel_marks.WorkSeen):
        cancel_marks.mark(
            store.engine,
            escrow="ab" * 32 + "#0",
            job_id=world.job_id,
            cancel_tx_id="c" * 64,
            now=NOW,
        )
    assert cancel_marks.find(store.engine, [ref]) == {}
