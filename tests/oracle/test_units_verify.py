"""Attestations of units of topology jobs: each unit is checked against the plan, its own
completing lease and uploads, and chains to the outputs of the attestations this oracle
verified for its input units; each kind of lie has its own reason, and a unit whose input
unit is not verified yet is retried, never rejected."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oracle_fixtures import PRICE, make_world
from unit_fixtures import (
    EVAL_AMOUNT,
    STAGE_AMOUNT,
    UnitWorld,
    make_unit_world,
    node_topology,
    relay_topology,
)

from oracle.intake.accept import Intake
from oracle.metrics import OracleMetrics
from oracle.models import payable_key
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from oracle.verification.spotcheck import SpotCheckVerdict
from oracle.verification.verify import Reason, VerificationResult, verify
from proofnet.messages.attestation import UnitWork


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AttestationStore]:
    engine = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
    s = AttestationStore(engine)
    s.create_schema()
    yield s
    engine.dispose()


@pytest.fixture
def world(store: AttestationStore) -> UnitWorld:
    return make_unit_world(store)


def _verify(world: UnitWorld, index: int, cose: bytes | None = None) -> VerificationResult:
    return verify(cose or world.sign(index), world.context())


def _rejected(world: UnitWorld, index: int, cose: bytes | None = None) -> Reason | None:
    result = _verify(world, index, cose)
    assert result.outcome == "rejected", result
    return result.reason


def _store_verified(world: UnitWorld, store: AttestationStore, index: int) -> int:
    """Receive and verify unit `index`'s honest attestation; its row id."""
    cose = world.sign(index)
    row, created = store.receive(world.attestation(index), cose)
    assert created and row.id is not None
    result = verify(cose, world.context(), own_id=row.id)
    assert result.ok, result
    assert store.apply(row.id, result).status == "verified"
    return row.id


def test_planned_units_verify_and_chain_through_the_store(
    world: UnitWorld, store: AttestationStore
) -> None:
    assert [(u.index, u.kind) for u in world.units.values()] == [
        (0, "stage"),
        (1, "stage"),
        (2, "stage"),
        (3, "eval"),
        (4, "eval"),
    ]
    world.complete(0)
    result = _verify(world, 0)
    assert result.ok, result
    assert result.checks[2:4] == ("job_escrow_recorded", "unit_planned")
    assert result.checks[-1] == "unit_chain"
    _store_verified(world, store, 0)
    world.complete(1)
    world.complete(3, metrics={"loss": "0.4"})
    _store_verified(world, store, 1)
    # The evaluation of stage 1 chains to stage 1's verified checkpoint.
    eval_work = world.attestation(3).unit
    assert eval_work is not None and eval_work.inputs == (world.outputs[1],)
    assert eval_work.output is None
    _store_verified(world, store, 3)
    payable = store.payable_units(f"{world.escrow.tx_id}#{world.escrow.index}")
    assert sorted(payable) == [0, 1, 3]
    assert payable[1].output == world.outputs[1] and payable[3].output is None


def test_unit_present_exactly_when_the_job_has_a_topology(world: UnitWorld) -> None:
    world.complete(0)
    single = make_world()
    stray = single.variant(unit=UnitWork(index=0, kind="stage", output="1" * 64))
    result = verify(single.sign(stray), single.context())
    assert result.reason == Reason.UNIT_UNEXPECTED
    assert _rejected(world, 0, world.sign(0, world.attestation(0, unit=None))) == (
        Reason.UNIT_MISSING
    )


def test_unit_must_be_planned_with_its_kind(world: UnitWorld) -> None:
    world.complete(0)
    unplanned = world.attestation(0, unit=UnitWork(index=9, kind="stage", output="1" * 64))
    assert _rejected(world, 0, world.sign(0, unplanned)) == Reason.UNIT_NOT_PLANNED
    other_kind = world.attestation(0, unit=UnitWork(index=0, kind="aggregate", output="1" * 64))
    assert _rejected(world, 0, world.sign(0, other_kind)) == Reason.UNIT_NOT_PLANNED


def test_unit_lease_is_the_units_own(world: UnitWorld) -> None:
    # Not completed yet: the unit, not the job, is what must be completed.
    assert _rejected(world, 0) == Reason.UNIT_NOT_COMPLETED
    world.complete(0)
    world.complete(1)
    # Stage 1's worker presenting stage 0's attestation (its own key, its own nonce).
    stolen = world.attestation(0, worker_key=world.worker_key(1), payout_address=world.payout(1))
    assert _rejected(world, 1, world.sign(1, stolen)) == Reason.LEASE_OTHER_WORKER
    other_nonce = world.attestation(0, nonce=world.nonces[1])
    assert _rejected(world, 0, world.sign(0, other_nonce)) == Reason.NONCE_MISMATCH
    early = world.attestation(0, started_ms=world.now_ms - 3_600_000)
    assert _rejected(world, 0, world.sign(0, early)) == Reason.TIMES_OUTSIDE_LEASE


def test_unit_amount_is_at_most_its_planned_amount(store: AttestationStore) -> None:
    world = make_unit_world(store)
    world.complete(0)
    over = world.attestation(0, amount=STAGE_AMOUNT + 1)
    assert _rejected(world, 0, world.sign(0, over)) == Reason.AMOUNT_EXCEEDS_PRICE
    assert _verify(world, 0, world.sign(0, world.attestation(0, amount=STAGE_AMOUNT - 1))).ok
    # The whole job's price is far above one stage's amount; the plan decides, not the price.
    assert PRICE > STAGE_AMOUNT
    # An escrow that cannot pay every unit of the plan pays none of them.
    short = make_unit_world(store, budget=3 * STAGE_AMOUNT + EVAL_AMOUNT)
    short.complete(0)
    assert _rejected(short, 0) == Reason.AMOUNT_EXCEEDS_BUDGET


def test_unit_results_are_the_units_uploads(world: UnitWorld) -> None:
    world.complete(0)
    lie = world.attestation(0, result_hashes={**world.uploads(0), "metrics.json": "7" * 64})
    assert _rejected(world, 0, world.sign(0, lie)) == Reason.RESULT_HASHES_MISMATCH
    # Stage 0's uploads are not stage 1's: the job-level results do not count.
    world.set_job(results={"metrics.json": world.uploads(0)["metrics.json"]})
    world.complete(1)
    other = world.attestation(1, result_hashes=world.uploads(0))
    assert _rejected(world, 1, world.sign(1, other)) == Reason.RESULT_HASHES_MISMATCH


def test_unit_output_is_the_recorded_checkpoint(world: UnitWorld, store: AttestationStore) -> None:
    world.complete(0)
    base = world.attestation(0)
    assert base.unit is not None
    other = base.unit.model_copy(update={"output": "9" * 64})
    lie = world.attestation(0, unit=other, result_hashes={**world.uploads(0)})
    assert _rejected(world, 0, world.sign(0, lie)) == Reason.UNIT_OUTPUT_MISMATCH
    none = world.attestation(0, unit=base.unit.model_copy(update={"output": None}))
    assert _rejected(world, 0, world.sign(0, none)) == Reason.UNIT_OUTPUT_MISMATCH
    # The recorded output is right but the attested checkpoint upload is another file.
    world.set_unit(0, results={**world.uploads(0), "checkpoint/model.npz": "8" * 64})
    upload = world.attestation(
        0, result_hashes={**world.uploads(0), "checkpoint/model.npz": "8" * 64}
    )
    assert _rejected(world, 0, world.sign(0, upload)) == Reason.UNIT_OUTPUT_MISMATCH
    world.complete(0)
    _store_verified(world, store, 0)
    world.complete(1)
    _store_verified(world, store, 1)
    world.complete(3)
    evaluation = world.attestation(3)
    assert evaluation.unit is not None
    claims_checkpoint = evaluation.unit.model_copy(update={"output": "6" * 64})
    assert _rejected(world, 3, world.sign(3, world.attestation(3, unit=claims_checkpoint))) == (
        Reason.UNIT_OUTPUT_MISMATCH
    )


def test_inputs_chain_to_verified_outputs_and_wait_for_them(
    world: UnitWorld, store: AttestationStore
) -> None:
    world.complete(0)
    world.complete(1)
    # Stage 0's attestation has not reached this oracle yet: wait, do not reject.
    result = _verify(world, 1)
    assert result.outcome == "retry" and result.reason is None
    assert "unit 0" in result.message and result.checks[-1] == "result_hashes"
    # Received but not verified yet is not enough either: the oracle's own verdict counts.
    cose0 = world.sign(0)
    row, _ = store.receive(world.attestation(0), cose0)
    assert _verify(world, 1).outcome == "retry"
    assert row.id is not None
    store.apply(row.id, verify(cose0, world.context(), own_id=row.id))
    assert _verify(world, 1).ok
    # A stage that claims to start from any other checkpoint breaks the chain.
    work = world.attestation(1).unit
    assert work is not None
    forged = work.model_copy(update={"inputs": ("5" * 64,)})
    assert _rejected(world, 1, world.sign(1, world.attestation(1, unit=forged))) == (
        Reason.UNIT_CHAIN_BROKEN
    )
    skipped = work.model_copy(update={"inputs": ()})
    assert _rejected(world, 1, world.sign(1, world.attestation(1, unit=skipped))) == (
        Reason.UNIT_CHAIN_BROKEN
    )


def test_at_most_one_payable_attestation_per_unit(
    world: UnitWorld, store: AttestationStore
) -> None:
    world.complete(0)
    first = _store_verified(world, store, 0)
    again = world.attestation(0, gpu_milliseconds=400_000)  # another signed attestation
    row, created = store.receive(again, world.sign(0, again))
    assert created and row.id is not None
    result = verify(world.sign(0, again), world.context(), own_id=row.id)
    assert result.reason == Reason.ESCROW_ALREADY_CLAIMED and "unit 0" in result.message
    # Even if a verifier with a stale view passes it, the database refuses a second payee.
    stale = VerificationResult("verified", None, "", ("stale",), again)
    applied = store.apply(row.id, stale)
    assert applied.status == "rejected" and applied.reason == Reason.ESCROW_ALREADY_CLAIMED
    ref = f"{world.escrow.tx_id}#{world.escrow.index}"
    assert store.payable_for_escrow(payable_key(ref, 0)) == (first, "verified")
    assert store.payable_for_escrow(ref) is None  # no whole-escrow claim exists


def test_nodes_must_agree_on_the_output(store: AttestationStore) -> None:
    world = make_unit_world(store, node_topology(3))
    for rank in range(3):
        world.complete(rank)
    _store_verified(world, store, 0)
    _store_verified(world, store, 1)
    # Node 2 reports (and the API recorded) another checkpoint than nodes 0 and 1.
    world.set_unit(2, output="4" * 64)
    base = world.attestation(2)
    assert base.unit is not None
    odd = world.attestation(2, unit=base.unit.model_copy(update={"output": "4" * 64}))
    assert _rejected(world, 2, world.sign(2, odd)) == Reason.NODE_OUTPUT_DISAGREES
    world.set_unit(2, output=world.cluster_output)
    assert _verify(world, 2).ok


def test_intake_verifies_waiting_units_when_their_input_is_verified(
    world: UnitWorld, store: AttestationStore
) -> None:
    for index in (0, 1, 2):
        world.complete(index)
    intake = Intake(store, world.context(), OracleMetrics(), inline=True)
    try:
        late = [intake.accept(world.sign(i)).record for i in (2, 1)]
        assert [r.status for r in late] == ["received", "received"]
        assert all(r.retry_at is not None for r in late)
        first = intake.accept(world.sign(0)).record
        assert first.status == "verified"
        # Stage 0's verdict woke stage 1, whose verdict woke stage 2: no retry delay.
        assert [store.get(r.id).status for r in late if r.id] == ["verified", "verified"]  # type: ignore[union-attr]
    finally:
        intake.close()
    rows = store.for_job(world.job_id)
    assert sorted((r.unit_index, r.unit_output) for r in rows) == sorted(
        (i, world.outputs[i]) for i in (0, 1, 2)
    )
    assert {r.payable_escrow for r in rows} == {
        payable_key(f"{world.escrow.tx_id}#{world.escrow.index}", i) for i in (0, 1, 2)
    }


def test_relay_without_evaluation_plans_stages_only(store: AttestationStore) -> None:
    world = make_unit_world(store, relay_topology(stages=2, every=None))
    assert [u.kind for u in world.units.values()] == ["stage", "stage"]
    assert world.total == 2 * STAGE_AMOUNT


def test_a_superseded_node_lease_waits_and_is_released_when_the_job_ends(
    store: AttestationStore,
) -> None:
    """Node 0 completed in cluster attempt 1, which then failed: the API queued both nodes
    again. Attempt 2's node 0 attestation waits for the stale one to be released (at the
    job's end), then is verified; attempt 1's is never paid."""
    from settlement_fixtures import FakeChain

    from oracle.settlement.ports import OutRef, UnitEscrow
    from oracle.settlement.readiness import JobEndReadiness, ReadinessPolicy

    world = make_unit_world(store, node_topology(2))
    world.complete(0)
    stale = _store_verified(world, store, 0)
    # Attempt 2: a new lease (nonce) for node 0, and another checkpoint for the run.
    world.nonces[0] = "77" * 32
    world.outputs.clear()
    world.cluster_output = "3" * 64
    world.complete(0)
    world.complete(1)
    fresh = world.sign(0)
    row, _ = store.receive(world.attestation(0), fresh)
    assert row.id is not None
    waiting = verify(fresh, world.context(), own_id=row.id)
    assert waiting.outcome == "retry" and "superseded" in waiting.message
    # Node 1 of attempt 2 agrees with attempt 2, not with attempt 1's stale node 0.
    assert _verify(world, 1).ok
    world.set_job(status="completed")
    store.create_schema()  # the settlement's tables, now that they are imported
    readiness = JobEndReadiness(world.feed, FakeChain(), store.engine, ReadinessPolicy())
    group = UnitEscrow(OutRef(world.escrow.tx_id, world.escrow.index), world.job_id, 1, 0.0)
    assert readiness.ready(group) is False  # released the stale one; node 0 is undecided now
    released = store.get(stale)
    assert released is not None and released.status == "rejected"
    assert released.reason == Reason.LEASE_SUPERSEDED and released.payable_escrow is None
    assert store.apply(row.id, verify(fresh, world.context(), own_id=row.id)).status == ("verified")


# A spec naming the data-parallel trainer verifiers replay a node's segments with.
DATA_PARALLEL = {
    "trainer": "dp:DataParallelMLP",
    "schedule": {"steps": 24, "dataset_size": 192, "batch_size": 24},
    "steps_per_checkpoint": 6,
}


class _BlamingChecker:
    """A `NodeChecker` whose replay blames node `faulty` (what `cluster_checks.judge_node`
    concludes of a node whose own contribution does not replay)."""

    def __init__(self, faulty: int) -> None:
        self.faulty = faulty
        self.checked: list[int] = []

    def check(self, att: object, job: object) -> SpotCheckVerdict:
        raise AssertionError("a cluster node is never spot-checked as a single run")

    def check_node(self, att: Any, scope: object, unit: Any, job: object) -> SpotCheckVerdict:
        self.checked.append(unit.rank)
        if unit.rank == self.faulty:
            return SpotCheckVerdict(
                False, Reason.SPOT_CHECK_FAILED, "not the gradient of its shard", fault="provider"
            )
        return SpotCheckVerdict(True, None, "")


def test_cluster_nodes_are_spot_checked_and_only_the_faulty_one_is_rejected(
    store: AttestationStore,
) -> None:
    world = make_unit_world(store, node_topology(3), proof=DATA_PARALLEL)
    for rank in range(3):
        world.complete(rank)
    checker = _BlamingChecker(faulty=1)
    results = {r: verify(world.sign(r), world.context(spot_checker=checker)) for r in range(3)}
    assert checker.checked == [0, 1, 2]
    assert results[0].ok and results[2].ok
    assert "node_proof_of_training" in results[0].checks
    assert (results[1].outcome, results[1].reason, results[1].fault) == (
        "rejected",
        Reason.SPOT_CHECK_FAILED,
        "provider",
    )


def test_cluster_nodes_without_a_replayable_trainer_stay_on_their_word(
    store: AttestationStore,
) -> None:
    world = make_unit_world(store, node_topology(2))
    for rank in range(2):
        world.complete(rank)
    checker = _BlamingChecker(faulty=0)
    result = verify(world.sign(0), world.context(spot_checker=checker))
    assert result.ok and checker.checked == []
