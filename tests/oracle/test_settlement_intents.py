"""The intent state machine against an in-memory chain: settling, confirmation depth,
rollbacks, refunds racing a batch, and recovery from every state after a crash."""

from __future__ import annotations

from pathlib import Path

import pytest
from settlement_fixtures import (
    FakeBuilder,
    FakeChain,
    add_verified,
    decode,
    make_engine_for,
    oracle_engine,
    statuses,
)

from oracle.settlement.bundle import make_bundle, parse_bundle
from oracle.settlement.intents import IntentConflict
from oracle.settlement.models import IntentState
from oracle.settlement.ports import Claim, OutRef


@pytest.fixture
def db(tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = oracle_engine(tmp_path)
    yield engine
    engine.dispose()


def _run(engine, chain: FakeChain, blocks: int = 3) -> None:  # type: ignore[no-untyped-def]
    for _ in range(blocks):
        chain.produce_block()
        engine.tick()


def test_batch_settles_and_confirms_at_depth(db) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    refs = [chain.add_escrow() for _ in range(3)]
    ids = [add_verified(db, r, amount=10 + i) for i, r in enumerate(refs)]
    engine = make_engine_for(db, chain, depth=2, batch_size=3)

    batch = engine.tick()
    assert batch is not None
    intent = engine.intents.get(batch)
    assert intent is not None and intent.state == IntentState.SUBMITTED
    assert set(statuses(db).values()) == {"batched"}
    assert len(chain.mempool) == 1

    chain.produce_block()
    engine.tick()
    intent = engine.intents.get(batch)
    assert intent is not None and intent.state == IntentState.SUBMITTED
    assert intent.block_height == 1  # included, one block deep
    chain.produce_block()
    engine.tick()
    intent = engine.intents.get(batch)
    assert intent is not None and intent.state == IntentState.CONFIRMED
    assert statuses(db) == {i: "settled" for i in ids}
    paid = chain.paid()
    assert [paid[str(r)] for r in refs] == [
        [(f"provider-{str(r)[-8:]}", 10 + i)] for i, r in enumerate(refs)
    ]

    # The published bundle is what the tx's root commits to.
    bundle = engine.intents.bundle(intent.bundle_sha256)
    assert bundle is not None
    parsed = parse_bundle(bundle.body)
    assert parsed.merkle_root.hex() == intent.merkle_root


def test_batch_waits_until_full_or_max_wait(db) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    add_verified(db, chain.add_escrow())
    engine = make_engine_for(db, chain, batch_size=3, max_wait_s=60)
    assert engine.tick() is None  # one young claim: wait
    add_verified(db, chain.add_escrow(), age_s=120)
    assert engine.tick() is not None  # the oldest waited long enough


def test_builder_capacity_splits_batches(db) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    refs = [chain.add_escrow() for _ in range(5)]
    for r in refs:
        add_verified(db, r)
    engine = make_engine_for(db, chain, FakeBuilder(capacity=2), depth=1, batch_size=5)
    first = engine.tick()
    assert first is not None
    assert len(engine.intents.items(first)) == 2
    assert engine.tick() is None  # one batch in flight at a time
    _run(engine, chain, blocks=4)
    assert set(statuses(db).values()) == {"settled"}
    assert all(len(v) == 1 for v in chain.paid().values())


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_rollback_back_to_mempool_is_detected_and_settled_once(db, depth: int) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    refs = [chain.add_escrow() for _ in range(2)]
    for r in refs:
        add_verified(db, r)
    engine = make_engine_for(db, chain, depth=5, batch_size=2)
    batch = engine.tick()
    assert batch is not None
    for _ in range(depth):
        chain.produce_block()
        engine.tick()
    assert engine.intents.get(batch).block_height == 1  # type: ignore[union-attr]

    chain.rollback(depth, drop=False)
    engine.tick()
    kinds = [e.kind for e in engine.intents.events(batch)]
    assert "rolled_back" in kinds
    assert engine.intents.get(batch).block_height is None  # type: ignore[union-attr]
    _run(engine, chain, blocks=6)
    assert engine.intents.get(batch).state == IntentState.CONFIRMED  # type: ignore[union-attr]
    assert all(len(chain.paid()[str(r)]) == 1 for r in refs)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_rollback_dropping_the_tx_resubmits_the_same_bytes(db, depth: int) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    refs = [chain.add_escrow() for _ in range(2)]
    for r in refs:
        add_verified(db, r)
    engine = make_engine_for(db, chain, depth=5, batch_size=2)
    batch = engine.tick()
    assert batch is not None
    tx_id = engine.intents.get(batch).tx_id  # type: ignore[union-attr]
    for _ in range(depth):
        chain.produce_block()
        engine.tick()
    chain.rollback(depth, drop=True)
    assert tx_id not in chain.mempool
    engine.tick()
    kinds = [e.kind for e in engine.intents.events(batch)]
    assert kinds[-2:] == ["rolled_back", "resubmitted"]
    assert chain.submissions == [tx_id, tx_id]  # identical tx id: idempotent
    _run(engine, chain, blocks=6)
    assert engine.intents.get(batch).state == IntentState.CONFIRMED  # type: ignore[union-attr]
    assert all(len(chain.paid()[str(r)]) == 1 for r in refs)


def test_refund_racing_a_batch_supersedes_it_and_requeues_the_rest(db) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    refs = [chain.add_escrow() for _ in range(3)]
    ids = [add_verified(db, r) for r in refs]
    engine = make_engine_for(db, chain, depth=1, batch_size=3)
    batch = engine.tick()
    assert batch is not None
    refund_tx = chain.foreign_spend(refs[1])  # the refund wins: our tx leaves the mempool
    engine.tick()
    intent = engine.intents.get(batch)
    assert intent is not None and intent.state == IntentState.SUPERSEDED
    assert refund_tx in (intent.last_error or "")
    st = statuses(db)
    assert st[ids[1]] == "rejected"
    # The other two went back to the queue and a new batch pays them (tick proposed it).
    assert st[ids[0]] == st[ids[2]] == "batched"
    _run(engine, chain, blocks=2)
    st = statuses(db)
    assert (st[ids[0]], st[ids[1]], st[ids[2]]) == ("settled", "rejected", "settled")
    paid = chain.paid()
    assert paid[str(refs[1])] == []  # refunded, no payout
    assert len(paid[str(refs[0])]) == len(paid[str(refs[2])]) == 1


def test_refunded_escrow_is_never_batched(db) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    ref = chain.add_escrow()
    att = add_verified(db, ref)
    chain.foreign_spend(ref)
    engine = make_engine_for(db, chain, batch_size=1)
    assert engine.tick() is None
    assert statuses(db)[att] == "rejected"
    assert chain.submissions == []


def test_repeated_refusals_drop_the_intent_and_requeue(db) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain(refuse="OutsideValidityIntervalUTxO")
    ref = chain.add_escrow()
    att = add_verified(db, ref)
    engine = make_engine_for(db, chain, batch_size=1, attempts=2)
    batch = engine.tick()  # first refusal
    assert batch is not None
    engine.tick()  # second refusal -> dropped, and (chain still refusing) rebuilt
    first = engine.intents.get(batch)
    assert first is not None and first.state == IntentState.DROPPED
    chain.refuse = None
    for _ in range(4):
        engine.tick()
        chain.produce_block()
    assert statuses(db)[att] == "settled"
    assert len(chain.paid()[str(ref)]) == 1


def test_chain_outage_changes_nothing(db) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    ref = chain.add_escrow()
    add_verified(db, ref)
    engine = make_engine_for(db, chain, batch_size=1)
    batch = engine.tick()
    chain.down = True
    engine.tick()
    intent = engine.intents.get(batch)  # type: ignore[arg-type]
    assert intent is not None and intent.state == IntentState.SUBMITTED


def test_live_escrow_cannot_be_in_two_intents(db) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    ref = chain.add_escrow()
    add_verified(db, ref)
    engine = make_engine_for(db, chain, batch_size=1)
    claim = Claim(1, ref, b"\x01" * 32, b"c", 1, "x")
    bundle = make_bundle([claim])
    builder = FakeBuilder()
    first = builder.build([claim], batch_id=b"\x01" * 32, annotate=_note(bundle))
    second = builder.build([claim], batch_id=b"\x02" * 32, annotate=_note(bundle))
    engine.intents.record_planned(first, bundle, "a")
    with pytest.raises(IntentConflict):
        engine.intents.record_planned(second, bundle, "b")


def _note(bundle):  # type: ignore[no-untyped-def]
    from oracle.settlement.bundle import audit_metadata
    from oracle.settlement.ports import Annotation

    return lambda packed: Annotation(bundle.merkle_root, audit_metadata(b"\x00" * 32, bundle, 1))


# --- recovery after a crash in each state ----------------------------------------------------


def _crash_in(db, chain: FakeChain, state: str):  # type: ignore[no-untyped-def]
    """Drive one batch to `state` and stop there, as if the process died."""
    ref = chain.add_escrow()
    att = add_verified(db, ref)
    engine = make_engine_for(db, chain, batch_size=1, depth=2)
    claims = engine.intents.queue.payable
    with engine.intents.session() as session:
        (claim,) = claims(session, 10)
    unsigned = FakeBuilder().build(
        [claim], batch_id=b"\x07" * 32, annotate=lambda p: _annotation(p)
    )
    bundle = make_bundle(unsigned.claims)
    intent = engine.intents.record_planned(unsigned, bundle, "crashed")
    if state == "planned":
        return ref, att, intent.id
    signed = FakeBuilder().assemble(unsigned, [FakeBuilder().witness(unsigned.tx_id)])
    engine.intents.record_signed(intent.id, unsigned.tx_id, signed)
    if state == "signed":
        return ref, att, intent.id
    if state == "signed-and-sent":  # crashed right after "submitting", before the log
        chain.submit(signed)
        return ref, att, intent.id
    chain.submit(signed)
    engine.intents.record_submitted(intent.id, resubmission=False)
    if state == "submitted":
        return ref, att, intent.id
    chain.produce_block()
    engine.intents.record_included(intent.id, 1, "block-1")
    assert state == "included"
    return ref, att, intent.id


def _annotation(packed):  # type: ignore[no-untyped-def]
    from oracle.settlement.bundle import audit_metadata
    from oracle.settlement.ports import Annotation

    bundle = make_bundle(packed)
    return Annotation(bundle.merkle_root, audit_metadata(b"\x07" * 32, bundle, len(packed)))


@pytest.mark.parametrize(
    ("state", "outcome"),
    [
        ("planned", "dropped"),
        ("signed", "submitted"),
        ("signed-and-sent", "in-mempool"),
        ("submitted", "in-mempool"),
        ("included", "included"),
    ],
)
def test_recovery_from_each_state_pays_exactly_once(db, state: str, outcome: str) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    ref, att, intent_id = _crash_in(db, chain, state)
    restarted = make_engine_for(db, chain, batch_size=1, depth=2)
    report = restarted.recover()
    assert report.outcomes[intent_id] == outcome
    for _ in range(4):
        restarted.tick()
        chain.produce_block()
    restarted.tick()
    assert statuses(db)[att] == "settled"
    assert len(chain.paid()[str(ref)]) == 1
    if state != "planned":
        # The same signed bytes, never a second transaction.
        assert {decode_id for decode_id in chain.submissions} == {
            restarted.intents.get(intent_id).tx_id  # type: ignore[union-attr]
        }


def test_recovery_sees_superseded_by_a_refund(db) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    ref, att, intent_id = _crash_in(db, chain, "signed")
    chain.foreign_spend(ref)
    restarted = make_engine_for(db, chain, batch_size=1)
    assert restarted.recover().outcomes[intent_id] == "superseded"
    assert statuses(db)[att] == "rejected"
    assert chain.submissions == []


def test_dropped_intent_whose_tx_lands_later_is_revived(db) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    ref = chain.add_escrow()
    att = add_verified(db, ref)
    engine = make_engine_for(db, chain, batch_size=1, depth=1)
    first = engine.tick()
    assert first is not None
    first_tx = engine.intents.get(first).tx_id  # type: ignore[union-attr]
    signed = engine.intents.get(first).tx_cbor  # type: ignore[union-attr]
    engine.intents.drop(first, "test: pretend it was given up on")
    chain.mempool.clear()
    second = engine.tick()  # rebuilt as a new intent (a new tx id)
    assert second is not None and second != first
    # ... but the old tx was still out there and lands first.
    chain.mempool.clear()
    chain.submit(signed)  # type: ignore[arg-type]
    chain.produce_block()
    engine.tick()
    engine.tick()
    assert engine.intents.get(second).state == IntentState.SUPERSEDED  # type: ignore[union-attr]
    assert engine.intents.get(first).state == IntentState.CONFIRMED  # type: ignore[union-attr]
    assert statuses(db)[att] == "settled"
    assert decode(signed).tx_id == first_tx  # type: ignore[arg-type]
    assert len(chain.paid()[str(ref)]) == 1


def test_out_ref_parsing() -> None:
    ref = OutRef("ab" * 32, 3)
    assert OutRef.parse(str(ref)) == ref
    with pytest.raises(ValueError):
        OutRef.parse("nothex#1")
    with pytest.raises(ValueError):
        OutRef.parse("ab" * 32)


class RefusingQuorum:
    """A co-signer that rejects the attestation of one escrow (its own verifier caught a
    cheat this oracle's draw missed) and so refuses any batch paying it."""

    def __init__(self, builder: FakeBuilder, refused: OutRef) -> None:
        self.builder, self.refused = builder, refused
        self.asked: list[list[str]] = []

    def witnesses(self, unsigned, bundle_body: bytes) -> list[bytes]:  # type: ignore[no-untyped-def]
        from oracle.settlement.ports import QuorumNotReached

        escrows = [str(c.escrow) for c in unsigned.claims]
        self.asked.append(escrows)
        if str(self.refused) in escrows:
            raise QuorumNotReached(f"attestation for escrow {self.refused} rejected")
        return [self.builder.witness(unsigned.tx_id), b"co-signer"]


def test_a_cheat_the_quorum_refuses_does_not_hold_the_honest_claims_hostage(db) -> None:  # type: ignore[no-untyped-def]
    """Attack: a cheat that passed the proposer's own draw, batched with honest claims. The
    co-signer refuses the batch; were the same batch proposed again, no claim in it would
    ever be paid. Its escrows are batched alone from then on: the honest ones settle, the
    cheat alone keeps waiting (and is never paid)."""
    from oracle.settlement.engine import BatchPolicy, SettlementEngine
    from oracle.settlement.intents import IntentLog
    from oracle.settlement.queue import AttestationQueue
    from oracle.settlement.watcher import WatchConfig

    chain = FakeChain()
    refs = [chain.add_escrow() for _ in range(3)]
    atts = [add_verified(db, ref, age_s=10 - i) for i, ref in enumerate(refs)]
    builder = FakeBuilder()
    quorum = RefusingQuorum(builder, refs[1])
    engine = SettlementEngine(
        IntentLog(db, AttestationQueue()),
        chain,
        builder,
        signer=quorum,
        policy=BatchPolicy(batch_size=4, max_wait_s=0.0),
        watch=WatchConfig(confirmation_depth=1),
        proposer="test",
    )
    for _ in range(10):
        engine.tick()
        chain.produce_block()
    assert quorum.asked[0] == [str(r) for r in refs]  # one batch first, refused
    assert all(len(asked) == 1 for asked in quorum.asked[1:])  # then one escrow at a time
    final = statuses(db)
    assert final[atts[0]] == "settled" and final[atts[2]] == "settled", final
    assert final[atts[1]] != "settled"
    assert str(refs[1]) not in chain.paid()
    # A new honest claim is batched with the clear ones, never with the suspect.
    late = chain.add_escrow()
    add_verified(db, late)
    for _ in range(3):
        engine.tick()
        chain.produce_block()
    assert statuses(db)[max(statuses(db))] == "settled"


def test_an_honest_batch_is_proposed_whole(db) -> None:  # type: ignore[no-untyped-def]
    """The twin: with no refusal, nothing is isolated."""
    chain = FakeChain()
    refs = [chain.add_escrow() for _ in range(3)]
    for ref in refs:
        add_verified(db, ref)
    engine = make_engine_for(db, chain, depth=1)
    engine.tick()
    assert engine.suspects == {}
    (tx,) = chain.mempool.values()
    assert sorted(tx.inputs) == sorted(str(r) for r in refs)
