"""A resumed job's attempts wait for each other in the settlement queue: the lost attempt's
claim and the completing attempt's attestation are payable under their own keys
(`<escrow>@<attempt>`), never batched one by one (the escrow is spent once), and the escrow
is ready only when the job is over and every attempt that proved segments is decided here
(or the grace period has passed: a lost provider that left no claim is not paid). Played
as the attacker: a second attestation of one attempt is refused as already claimed."""

from __future__ import annotations

from datetime import UTC, datetime
from types import MappingProxyType

from nacl.signing import SigningKey
from oracle_fixtures import make_world
from sqlmodel import Session

from oracle.inputs.feed import AttemptInfo
from oracle.models import VERIFIED, AttestationRecord, escrow_ref, payable_key
from oracle.settlement.ports import ChainUnavailable, OutRef, UnitEscrow
from oracle.settlement.queue import AttestationQueue
from oracle.settlement.readiness import JobEndReadiness, ReadinessPolicy
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from proofnet.messages.attestation import sign_attestation


class NoChain:
    """A chain that cannot tell an escrow's deadline (so it is never near)."""

    def output_cbor(self, _ref: OutRef) -> bytes | None:
        raise ChainUnavailable("no chain in this test")


def _attempt(number: int, worker: str, outcome: str, first: int, last: int | None) -> AttemptInfo:
    return AttemptInfo(
        attempt=number,
        worker_key=worker,
        payout_address="addr_test1",
        nonce="ab" * 16,
        outcome=outcome,
        started_ms=0,
        ended_ms=1,
        resumed_from=None if number == 1 else number - 1,
        resumed_at=None if number == 1 else first - 1,
        first_segment=first,
        last_segment=last,
        results=MappingProxyType({}),
    )


def _store_verified(engine, att, key) -> int:  # type: ignore[no-untyped-def]
    signed = sign_attestation(att, key)
    ref = att.domain.escrow
    escrow = escrow_ref(ref.tx_id, ref.index)
    attempt = None if att.segments is None else att.segments.attempt
    row = AttestationRecord(
        job_id=att.job_id,
        escrow_tx_id=ref.tx_id,
        escrow_index=ref.index,
        escrow_ref=escrow,
        payable_escrow=payable_key(escrow, None, attempt),
        attempt=attempt,
        worker_key=att.worker_key,
        payout_address=att.payout_address,
        amount=att.amount,
        cose=signed.cose,
        leaf_hash=att.leaf_hash().hex(),
        status=VERIFIED,
        received_at=datetime.now(UTC),
        updated_at=datetime.now(UTC),
    )
    with Session(engine) as session:
        session.add(row)
        session.commit()
        assert row.id is not None
        return row.id


def test_attempts_wait_for_each_other_and_are_settled_together(tmp_path) -> None:  # type: ignore[no-untyped-def]
    db = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
    AttestationStore(db).create_schema()
    world = make_world()
    lost_key = SigningKey(b"\x09" * 32)
    lost_worker = lost_key.verify_key.encode().hex()
    world.set_job(
        attempts=(
            _attempt(1, lost_worker, "released", 1, 2),
            _attempt(2, world.attestation.worker_key, "completed", 3, None),
        )
    )
    world.set_lease(attempt=2)
    completing = world.variant(segments={"attempt": 2, "first": 3, "last": 6})
    lost = world.variant(
        worker_key=lost_worker, segments={"attempt": 1, "first": 1, "last": 2}, amount=1
    )
    queue = AttestationQueue()
    ref = OutRef(world.escrow.tx_id, world.escrow.index)
    clock = [1_000.0]
    readiness = JobEndReadiness(
        world.feed, NoChain(), db, ReadinessPolicy(grace_s=600, recheck_s=0), lambda: clock[0]
    )
    group = UnitEscrow(ref, world.job_id, 1, 0.0)

    _store_verified(db, completing, world.worker)
    with Session(db) as session:
        assert queue.payable(session, 10) == []  # never alone: the escrow is spent once
        assert [g.escrow for g in queue.unit_escrows(session)] == [ref]
    # The job is over, but attempt 1 proved segments 1..2 and its claim is not decided.
    assert readiness.undecided_attempts(str(ref), world.feed.jobs[world.job_id]) == [1]
    assert not readiness.ready(group)
    assert "attempt(s) [1]" in (readiness.refusal(ref, world.job_id, (), {2}) or "")

    _store_verified(db, lost, lost_key)
    assert readiness.ready(group)
    assert readiness.refusal(ref, world.job_id, (), {1, 2}) is None
    with Session(db) as session:
        claims = queue.unit_claims(session, [ref])
    assert [(c.attempt, c.worker_key) for c in claims] == [
        (1, lost_worker),
        (2, world.attestation.worker_key),
    ]
    assert {c.escrow for c in claims} == {ref}


def test_a_lost_provider_that_left_no_claim_holds_the_escrow_only_for_the_grace_period(
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    db = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
    AttestationStore(db).create_schema()
    world = make_world()
    world.set_job(
        attempts=(
            _attempt(1, "cd" * 32, "expired", 1, 2),
            _attempt(2, world.attestation.worker_key, "completed", 3, None),
        )
    )
    world.set_lease(attempt=2)
    _store_verified(db, world.variant(segments={"attempt": 2, "first": 3, "last": 6}), world.worker)
    clock = [1_000.0]
    readiness = JobEndReadiness(
        world.feed, NoChain(), db, ReadinessPolicy(grace_s=600, recheck_s=0), lambda: clock[0]
    )
    group = UnitEscrow(OutRef(world.escrow.tx_id, world.escrow.index), world.job_id, 1, 0.0)
    assert not readiness.ready(group)
    clock[0] += 601
    assert readiness.ready(group)


def test_one_attempt_is_payable_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from oracle.verification.verify import Reason, verify

    world = make_world()
    store = AttestationStore(make_engine(f"sqlite:///{tmp_path / 'oracle.db'}"))
    store.create_schema()
    world.store = store
    world.set_lease(attempt=2)
    honest = world.variant(segments={"attempt": 2, "first": 1, "last": 6})
    _store_verified(store.engine, honest, world.worker)
    # The same attempt again (another amount: another leaf), the key `<escrow>@2` is taken.
    again = world.variant(
        segments={"attempt": 2, "first": 1, "last": 6}, amount=world.attestation.amount - 1
    )
    result = verify(world.sign(again), world.context())
    assert result.reason == Reason.ESCROW_ALREADY_CLAIMED, result
    assert "attempt 2 of escrow" in result.message


def test_an_attempt_that_resumed_nothing_cannot_be_paid_under_an_attempt_key() -> None:
    """A provider that ran the whole job is paid by its plain attestation; the same work
    named as an attempt's segments would be payable under a second key, so it is refused."""
    from oracle.verification.verify import Reason, verify

    world = make_world()
    assert verify(world.sign(), world.context()).ok
    named = world.variant(segments={"attempt": world.lease.attempt, "first": 1, "last": 6})
    result = verify(world.sign(named), world.context())
    assert result.reason == Reason.SEGMENTS_MISMATCH, result
    assert "resumed no other" in result.message


def test_the_sweep_takes_a_lost_attempts_claim_once_the_api_holds_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The claim was not on the API when the completing attempt was verified (its upload
    came late, or the API could not serve it): the intake's sweep asks again while the
    escrow waits, and stores it once, as its worker's own attestation."""
    from oracle_fixtures import NETWORK, signed_binding

    from oracle.inputs.feed import WorkerInfo
    from oracle.intake.accept import Intake
    from oracle.metrics import OracleMetrics
    from proofnet.messages.address import enterprise_address
    from proofnet.messages.result_paths import attempt_result_name

    world = make_world()
    store = AttestationStore(make_engine(f"sqlite:///{tmp_path / 'oracle.db'}"))
    store.create_schema()
    world.store = store
    lost_key = SigningKey(b"\x0a" * 32)
    lost_worker = lost_key.verify_key.encode().hex()
    payout = enterprise_address(bytes(lost_key.verify_key), NETWORK)
    world.feed.workers[lost_worker] = WorkerInfo(
        lost_worker, payout, signed_binding(lost_key, payout), NETWORK
    )
    world.set_job(
        attempts=(
            _attempt(1, lost_worker, "released", 1, 2),
            _attempt(2, world.attestation.worker_key, "completed", 3, None),
        )
    )
    world.set_lease(attempt=2)
    _store_verified(
        store.engine, world.variant(segments={"attempt": 2, "first": 3, "last": 6}), world.worker
    )
    intake = Intake(store, world.context(), OracleMetrics(), inline=True)
    intake.sweep()
    assert [r.attempt for r in store.for_job(world.job_id)] == [2]

    claim = world.variant(
        worker_key=lost_worker,
        payout_address=payout,
        segments={"attempt": 1, "first": 1, "last": 2},
        amount=1,
    )
    name = attempt_result_name(1, "pot/claim-2.cose")
    world.feed.artifacts[(world.job_id, name)] = sign_attestation(claim, lost_key).cose
    intake.sweep()
    intake.sweep()  # asked again: stored once
    rows = store.for_job(world.job_id)
    assert sorted(r.attempt or 0 for r in rows) == [1, 2]
    (taken,) = [r for r in rows if r.attempt == 1]
    assert taken.worker_key == lost_worker and taken.status != "received"
