"""Aggregation and evaluation units are recomputed by a drawn verifier, not paid on the
provider's word: each test is a provider (or a job) lying about one unit, and the verdict
that stops it.

The verifier desk is a fake of the API's relay (`oracle.intake.feed_client.HttpApiFeed`): it
keeps the oracle's signed tasks and answers them with a report signed by the drawn
verifier's own key, computed by the test. The API relay and the worker's recomputation in
the job's image are exercised end to end in tests/worker; here the oracle's judgement of
the reports is the subject, so the verifier's arithmetic is what the test says it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey
from unit_fixtures import UnitWorld, make_unit_world, relay_topology

from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from oracle.verification.verifiers import Candidate, VerifierSpotChecker
from oracle.verification.verify import Reason, VerificationResult, verify
from proofnet.messages.key_grant import KeyRequest
from proofnet.messages.verification import VerificationReport, VerificationTask

Answer = Callable[[VerificationTask], dict[str, Any] | None]


@dataclass
class FakeDesk:
    """The API relay between the oracle and its verifiers (see the module doc)."""

    verifiers: dict[str, SigningKey]
    answer: Answer
    tasks: list[VerificationTask] = field(default_factory=list)

    def artifact(self, job_id: str, name: str) -> bytes:
        raise AssertionError(f"a recomputation reads no proof files ({name})")

    def worker_payout(self, worker_key: str) -> str | None:
        return None

    def verifier_candidates(self, device_class: str, exclude: str) -> list[Candidate]:
        return [Candidate(k, f"addr-{k[:8]}") for k in self.verifiers if k != exclude]

    def post_verification(self, task: VerificationTask) -> dict[str, Any]:
        self.tasks.append(task)
        fields = self.answer(task)
        report = None
        if fields is not None:
            signed = VerificationReport.sign(self.verifiers[task.verifier], task, **fields)
            report = signed.to_json()
        return {"report": report, "created_at": datetime.now(UTC).isoformat()}

    def request_keys(self, request: KeyRequest) -> int:
        raise AssertionError("a unit's input checkpoints are never sealed")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AttestationStore]:
    engine = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
    s = AttestationStore(engine)
    s.create_schema()
    yield s
    engine.dispose()


def averaged_topology() -> dict[str, Any]:
    """Two parallel stages (units 0, 1) averaged by unit 2, evaluated by unit 3."""
    topology = relay_topology(stages=2, every=None)
    topology["stages"] = [{"shards": [0]}, {"shards": [1]}]
    topology["aggregation"] = "average"
    topology["aggregate_command"] = ["python", "average.py"]
    topology["aggregate_amount"] = 200
    evaluated = relay_topology(stages=1, every=1)["evaluation"]
    topology["evaluation"] = {**evaluated, "every": 1000}  # the final model only
    return topology


def _verified(world: UnitWorld, store: AttestationStore, index: int) -> None:
    cose = world.sign(index)
    row, created = store.receive(world.attestation(index), cose)
    assert created and row.id is not None
    result = verify(cose, world.context(), own_id=row.id)
    assert result.ok, result
    store.apply(row.id, result)


def _world(store: AttestationStore, topology: dict[str, Any] | None = None) -> UnitWorld:
    world = make_unit_world(store, topology or averaged_topology())
    assert [(u.index, u.kind) for u in world.units.values()] == [
        (0, "stage"),
        (1, "stage"),
        (2, "aggregate"),
        (3, "eval"),
    ]
    for index in (0, 1):
        world.complete(index)
        _verified(world, store, index)
    return world


def _checker(answer: Answer) -> tuple[VerifierSpotChecker, FakeDesk]:
    keys = [SigningKey.generate() for _ in range(3)]
    desk = FakeDesk({bytes(k.verify_key).hex(): k for k in keys}, answer)
    return VerifierSpotChecker(desk, SigningKey.generate()), desk


def _check(world: UnitWorld, index: int, answer: Answer) -> tuple[VerificationResult, FakeDesk]:
    checker, desk = _checker(answer)
    return verify(world.sign(index), world.context(spot_checker=checker)), desk


def test_an_honest_aggregation_is_recomputed_from_its_verified_inputs(
    store: AttestationStore,
) -> None:
    world = _world(store)
    world.complete(2)
    honest = world.outputs[2]
    result, desk = _check(world, 2, lambda task: {"status": "passed", "output_hash": honest})
    assert result.ok, result
    assert result.checks[-1] == "unit_recomputed"
    (task,) = desk.tasks
    # The verifier gets the verified outputs of the input units, and nothing to replay.
    assert task.kind == "aggregate" and task.segments == ()
    assert task.inputs == (world.outputs[0], world.outputs[1])
    assert task.files == ("units/0/checkpoint/model.npz", "units/1/checkpoint/model.npz")
    assert task.verifier != task.provider


def test_an_aggregation_output_its_inputs_do_not_make_is_the_providers_fault(
    store: AttestationStore,
) -> None:
    # The provider uploads (and the API records) a checkpoint of its own making, not the
    # average of the branches it was given: the verifier's average is another file.
    world = _world(store)
    world.complete(2)
    recomputed = "e" * 64
    assert world.outputs[2] != recomputed
    result, _ = _check(world, 2, lambda task: {"status": "passed", "output_hash": recomputed})
    assert result.outcome == "rejected", result
    assert result.reason == Reason.UNIT_RECOMPUTE_MISMATCH
    assert result.fault == "provider"
    assert result.spot_check is not None and result.spot_check.verifier


def test_an_aggregation_is_not_paid_before_a_verifier_answers(store: AttestationStore) -> None:
    world = _world(store)
    world.complete(2)
    result, desk = _check(world, 2, lambda task: None)
    assert result.outcome == "retry", result
    assert "waiting for verifier" in result.message and len(desk.tasks) == 1


def test_an_aggregation_command_that_fails_on_the_verifier_is_the_jobs_fault(
    store: AttestationStore,
) -> None:
    world = _world(store)
    world.complete(2)
    result, _ = _check(world, 2, lambda task: {"status": "error", "message": "average.py: boom"})
    assert result.outcome == "verified" and result.fault == "job", result
    assert "average.py: boom" in result.message


def _evaluated_world(store: AttestationStore, topology: dict[str, Any] | None = None) -> UnitWorld:
    world = _world(store, topology)
    world.complete(2)
    _verified(world, store, 2)
    world.complete(3, metrics={"loss": "0.25"})
    return world


def test_an_evaluation_within_tolerance_of_the_verifiers_is_paid(store: AttestationStore) -> None:
    world = _evaluated_world(store)
    result, desk = _check(world, 3, lambda task: {"status": "passed", "metric": "0.2509"})
    assert result.ok, result
    (task,) = desk.tasks
    assert task.kind == "eval"
    assert task.inputs == (world.outputs[2],)
    assert task.files == ("units/2/checkpoint/model.npz",)


def test_a_made_up_passing_metric_is_rejected(store: AttestationStore) -> None:
    # The provider reports a loss of 0.25 (under the 0.5 threshold: the pipeline goes on)
    # where the model's loss on the held-out data is 0.9.
    world = _evaluated_world(store)
    result, _ = _check(world, 3, lambda task: {"status": "passed", "metric": "0.9"})
    assert result.outcome == "rejected", result
    assert result.reason == Reason.UNIT_RECOMPUTE_MISMATCH and result.fault == "provider"
    assert "tolerance 0.001" in result.message


def test_the_spec_states_the_evaluation_tolerance(store: AttestationStore) -> None:
    topology = averaged_topology()
    topology["evaluation"]["tolerance"] = "0.05"
    world = _evaluated_world(store, topology)
    near, _ = _check(world, 3, lambda task: {"status": "passed", "metric": "0.29"})
    assert near.ok, near
    far, _ = _check(world, 3, lambda task: {"status": "passed", "metric": "0.31"})
    assert far.reason == Reason.UNIT_RECOMPUTE_MISMATCH


def test_an_evaluation_that_omits_the_metric_is_rejected(store: AttestationStore) -> None:
    world = _evaluated_world(store)
    world.set_unit(3, metrics={"accuracy": "0.99"})
    att = world.attestation(3, metrics={"accuracy": "0.99"})
    checker, _ = _checker(lambda task: {"status": "passed", "metric": "0.25"})
    result = verify(world.sign(3, att), world.context(spot_checker=checker))
    assert result.reason == Reason.UNIT_RECOMPUTE_MISMATCH, result


def test_an_attested_metric_must_be_the_one_that_gated_the_pipeline(
    store: AttestationStore,
) -> None:
    # The provider told the API a passing loss (0.25 <= 0.5: the pipeline went on) and
    # attests the true one (0.9), which a verifier would confirm.
    world = _evaluated_world(store)
    att = world.attestation(3, metrics={"loss": "0.9"})
    checker, desk = _checker(lambda task: {"status": "passed", "metric": "0.9"})
    result = verify(world.sign(3, att), world.context(spot_checker=checker))
    assert result.reason == Reason.UNIT_OUTPUT_MISMATCH, result
    assert "gated the pipeline" in result.message and not desk.tasks
