"""The store's batch paths answer what its one-at-a-time paths answer, and the benchmark
measures both the batch and the per-attestation pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from oracle_fixtures import make_world

from benchmarks.oracle import STAGES, run_oracle_verify_bench
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from oracle.verification.verify import authenticate, leaf_of, verify


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AttestationStore]:
    engine = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
    s = AttestationStore(engine)
    s.create_schema()
    yield s
    engine.dispose()


def test_receive_many_maps_every_attestation_to_its_own_row(store: AttestationStore) -> None:
    worlds = [make_world(store) for _ in range(12)]
    signed = [(w, w.sign()) for w in worlds]
    items = [(authenticate(c, w.context()), c) for w, c in signed]
    first = store.receive_many(items[:5])
    # Stored ones, a repeat inside the batch and new ones, in a shuffled order.
    batch = [items[7], items[2], items[7], *items[5:], items[0]]
    ids = store.receive_many(batch)
    assert ids[1] == first[2] and ids[-1] == first[0] and ids[0] == ids[2]
    assert len(set(ids)) == len({cose for _att, cose in batch}) == 9
    for (_att, cose), ident in zip(batch, ids, strict=True):
        row = store.get(ident)
        assert row is not None and row.cose == cose and row.leaf_hash == leaf_of(cose)


def test_replay_lookups_and_snapshot_agree(store: AttestationStore) -> None:
    worlds = [make_world(store) for _ in range(4)]
    coses = [w.sign() for w in worlds]
    atts = [authenticate(c, w.context()) for w, c in zip(worlds, coses, strict=True)]
    leaves = [leaf_of(c) for c in coses]
    refs = [f"{w.escrow.tx_id}#{w.escrow.index}" for w in worlds]
    assert store.holder_of_leaf(leaves[0]) is None
    assert store.payable_for_escrow(refs[0]) is None

    ids = store.receive_many(list(zip(atts[:3], coses[:3], strict=True)))
    verdicts = [
        (i, verify(c, w.context(), own_id=i), None, 0.0)
        for i, c, w in zip(ids[:2], coses[:2], worlds[:2], strict=True)
    ]
    assert [a.status for a in store.apply_many(verdicts)] == ["verified", "verified"]

    snap = store.snapshot(atts, leaves)
    assert snap == store.snapshot(atts)  # leaf hashes computed from the attestations
    for leaf, ref in zip(leaves, refs, strict=True):
        assert snap.holder_of_leaf(leaf) == store.holder_of_leaf(leaf)
        assert snap.payable_for_escrow(ref) == store.payable_for_escrow(ref)
    assert [store.holder_of_leaf(leaf) for leaf in leaves] == [*ids, None]
    assert store.payable_for_escrow(refs[0]) == (ids[0], "verified")
    assert store.payable_for_escrow(refs[2]) is None  # received, not payable yet
    store.transition([ids[1]], from_status="verified", to_status="batched")
    assert store.payable_for_escrow(refs[1]) == (ids[1], "batched")


def test_snapshot_verification_still_refuses_a_replay(store: AttestationStore) -> None:
    world = make_world(store)
    cose = world.sign()
    att = authenticate(cose, world.context())
    (ident,) = store.receive_many([(att, cose)])
    snap = store.snapshot([att], [leaf_of(cose)])
    assert verify(cose, world.context(store=snap), own_id=ident, authenticated=att).ok
    # The same bytes checked as if they were another row: already received.
    replay = verify(cose, world.context(store=snap), own_id=ident + 1, authenticated=att)
    assert replay.outcome == "rejected" and replay.reason == "replayed"


@pytest.mark.parametrize("batch_lookups", [True, False])
def test_bench_reports_every_stage(batch_lookups: bool) -> None:
    report = run_oracle_verify_bench(30, processes=1, batch=8, batch_lookups=batch_lookups)
    assert report["verified"] == 30
    assert set(report["stage_cpu_share"]) == set(STAGES)
    assert 0 < sum(report["stage_cpu_share"].values()) <= 1.0001
    assert report["cpu_us_per_attestation"] > 0 and report["gc_cpu_us_per_attestation"] >= 0
    assert (report["stage_cpu_us_per_attestation"]["store_lookups"] > 0) == batch_lookups
