"""The early replay of the first segment (oracle/verification/early.py), played by a job
whose code cannot be replayed (a trainer that does not load, nondeterministic code) and by a
provider whose first segment does not hold (a checkpoint other than its replay, a prefix off
the schedule, withheld files): every verdict says whose fault and why.

A real (numpy) prefix of a run still training: segment 1 committed, the rest to come. The
relay is a fake of the API's verifier desk, as in test_units_recomputed: it keeps the
oracle's signed tasks and answers with reports signed by the drawn verifier's own key,
computed by the test (the worker's replay under its runtime is tested in tests/worker).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nacl.signing import SigningKey
from oracle_fixtures import job_spec
from test_verify_resumed import PROOF, lost_prefix

from oracle.app import create_app
from oracle.inputs.feed import ArtifactMissing, AttemptInfo, FeedError, JobInfo
from oracle.intake.early_replay import EarlyReplay
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from oracle.verification.early import EarlyCommit, check_early, checkable
from oracle.verification.spotcheck import SpotCheckUnavailable
from oracle.verification.verifiers import Candidate, VerifierSpotChecker
from oracle.verification.verify import Reason, VerificationContext
from pot.manifest import PREFIX_NAME, Manifest
from proofnet.messages.job_fault import JobFaultVerdict
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.key_grant import KeyRequest
from proofnet.messages.result_paths import attempt_result_name
from proofnet.messages.verification import (
    PREFIX_FILE,
    VerificationReport,
    VerificationTask,
    early_subject,
)
from proofnet.settings import Settings

Answer = Callable[[VerificationTask, Manifest], dict[str, Any] | None]
PROVIDER = SigningKey(b"\x0b" * 32)


@dataclass
class Desk:
    prefix: bytes | None
    answer: Answer
    verifiers: dict[str, SigningKey] = field(
        default_factory=lambda: {
            bytes(k.verify_key).hex(): k for k in (SigningKey.generate() for _ in range(3))
        }
    )
    tasks: list[VerificationTask] = field(default_factory=list)

    def artifact(self, job_id: str, name: str) -> bytes:
        if self.prefix is None or name != attempt_result_name(1, PREFIX_FILE):
            raise ArtifactMissing(name)
        return self.prefix

    def worker_payout(self, worker_key: str) -> str | None:
        return "addr_test1provider"

    def verifier_candidates(self, device_class: str, exclude: str) -> list[Candidate]:
        return [Candidate(k, f"addr-{k[:8]}") for k in self.verifiers if k != exclude]

    def post_verification(self, task: VerificationTask) -> dict[str, Any]:
        self.tasks.append(task)
        assert self.prefix is not None
        fields = self.answer(task, Manifest.from_bytes(self.prefix))
        report = None
        if fields is not None:
            report = VerificationReport.sign(self.verifiers[task.verifier], task, **fields)
        return {
            "report": None if report is None else report.to_json(),
            "created_at": datetime.now(UTC).isoformat(),
        }

    def request_keys(self, request: KeyRequest) -> int:
        raise AssertionError("an early task's job is never sealed")


def _spec() -> JobSpec:
    data = job_spec(gpus=0).model_dump(mode="python")
    data["model"] = {"repo_url": "https://example.org/numpy-mlp.git", "commit": "a" * 40}
    data["proof"] = PROOF
    data["commands"] = []
    return JobSpec.from_dict(data)


def _job(spec: JobSpec, nonce: str, **changes: Any) -> JobInfo:
    attempt = AttemptInfo(
        attempt=1,
        worker_key=bytes(PROVIDER.verify_key).hex(),
        payout_address="addr_test1provider",
        nonce=nonce,
        outcome=None,
        started_ms=0,
        ended_ms=None,
        resumed_from=None,
        resumed_at=None,
        first_segment=1,
        last_segment=None,
        results=MappingProxyType({}),
    )
    job = JobInfo(spec.job_id, spec, "leased", None, None, attempts=(attempt,))
    return replace(job, **changes)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> tuple[JobSpec, str, bytes]:
    """A job still training: its prefix commits segments 1..2 of 6."""
    spec = _spec()
    nonce = secrets.token_hex(32)
    pot = lost_prefix(tmp_path_factory.mktemp("early"), spec, bytes.fromhex(nonce))
    return spec, nonce, (pot / PREFIX_NAME).read_bytes()


def _honest(task: VerificationTask, prefix: Manifest, **changes: Any) -> dict[str, Any]:
    leaf = prefix.leaves[1]
    result = {
        "segment": 1,
        "weights_hash": leaf.weights,
        "update_norm": leaf.update_norm,
        "distance": "0",
    }
    fields: dict[str, Any] = {
        "status": "passed",
        "initial_weights_hash": prefix.leaves[0].weights,
        "results": [result],
        "repeat": result,
    }
    return fields | changes


def _check(running: tuple[JobSpec, str, bytes], answer: Answer, **job: Any) -> tuple[Any, Desk]:
    spec, nonce, prefix = running
    desk = Desk(prefix, answer)
    checker = VerifierSpotChecker(desk, SigningKey.generate())  # type: ignore[arg-type]
    return check_early(checker, _job(spec, nonce, **job), EarlyCommit(spec.job_id, 1, nonce)), desk


def test_a_first_segment_that_replays_passes_and_the_task_names_the_prefix(
    running: tuple[JobSpec, str, bytes],
) -> None:
    verdict, desk = _check(running, _honest)
    assert verdict.passed and verdict.fault is None, verdict
    (task,) = desk.tasks
    spec, nonce, prefix = running
    root = Manifest.from_bytes(prefix).root
    assert task.kind == "early" and task.segments == (1,) and task.unit is None
    assert task.pot_root == root == verdict.prefix_root
    assert task.attestation == early_subject(spec.job_id, nonce, root)
    assert task.files[0] == PREFIX_FILE and "pot/000001.weights" in task.files
    assert task.provider == bytes(PROVIDER.verify_key).hex() != task.verifier


def test_job_code_the_harness_cannot_load_is_the_jobs_fault(
    running: tuple[JobSpec, str, bytes],
) -> None:
    answer: Answer = lambda task, prefix: {"status": "usage_error", "message": "no module mlp"}  # noqa: E731
    verdict, _ = _check(running, answer)
    assert (verdict.passed, verdict.fault) == (False, "job")
    assert verdict.reason == Reason.JOB_NOT_REPLAYABLE and "no module mlp" in verdict.message


def test_nondeterministic_job_code_is_the_jobs_fault(running: tuple[JobSpec, str, bytes]) -> None:
    def answer(task: VerificationTask, prefix: Manifest) -> dict[str, Any]:
        honest = _honest(task, prefix)
        return honest | {"repeat": {**honest["repeat"], "weights_hash": "9" * 64}}

    verdict, _ = _check(running, answer)
    assert (verdict.passed, verdict.fault) == (False, "job")
    assert "not deterministic" in verdict.message


def test_a_first_segment_that_replays_elsewhere_is_the_providers_fault(
    running: tuple[JobSpec, str, bytes],
) -> None:
    """Deterministic code (both replays agree) that does not reach the committed checkpoint:
    the provider committed what it did not train."""

    def answer(task: VerificationTask, prefix: Manifest) -> dict[str, Any]:
        other = {**_honest(task, prefix)["repeat"], "weights_hash": "8" * 64}
        return _honest(task, prefix) | {"status": "failed", "results": [other], "repeat": other}

    verdict, _ = _check(running, answer)
    assert (verdict.passed, verdict.fault) == (False, "provider")
    assert verdict.reason == Reason.SPOT_CHECK_FAILED
    withheld: Answer = lambda task, prefix: {"status": "withheld", "message": "no grant"}  # noqa: E731
    verdict, _ = _check(running, withheld)
    assert (verdict.fault, verdict.reason) == ("provider", Reason.POT_WITHHELD)
    # Checkpoint 0 is not what the trainer builds from the job seed.
    forged: Answer = lambda task, prefix: _honest(task, prefix, initial_weights_hash="7" * 64)  # noqa: E731
    verdict, _ = _check(running, forged)
    assert (verdict.fault, verdict.reason) == ("provider", Reason.POT_INITIAL_STATE_MISMATCH)


def test_a_prefix_off_the_schedule_is_the_providers_fault_without_a_replay(
    running: tuple[JobSpec, str, bytes],
) -> None:
    spec, nonce, raw = running
    prefix = Manifest.from_bytes(raw)
    moved = replace(prefix.leaves[1], step=prefix.leaves[1].step + 1)
    shifted = replace(prefix, leaves=(prefix.leaves[0], moved, *prefix.leaves[2:]))
    desk = Desk(shifted.encode(), _honest)
    checker = VerifierSpotChecker(desk, SigningKey.generate())  # type: ignore[arg-type]
    verdict = check_early(checker, _job(spec, nonce), EarlyCommit(spec.job_id, 1, nonce))
    assert verdict is not None and (verdict.fault, verdict.reason) == (
        "provider",
        Reason.POT_SCHEDULE_MISMATCH,
    )
    assert desk.tasks == []  # refused without code, before any verifier is drawn


def test_no_verdict_until_the_prefix_and_a_report_are_there(
    running: tuple[JobSpec, str, bytes],
) -> None:
    with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
        _check(running, lambda task, prefix: None)
    spec, nonce, _ = running
    desk = Desk(None, _honest)
    checker = VerifierSpotChecker(desk, SigningKey.generate())  # type: ignore[arg-type]
    with pytest.raises(SpotCheckUnavailable, match="not uploaded"):
        check_early(checker, _job(spec, nonce), EarlyCommit(spec.job_id, 1, nonce))


def test_only_a_whole_unsealed_jobs_first_attempt_is_replayed_early(
    running: tuple[JobSpec, str, bytes],
) -> None:
    spec, nonce, _ = running
    commit = EarlyCommit(spec.job_id, 1, nonce)
    assert checkable(_job(spec, nonce), commit) is None
    assert "sealed" in (checkable(_job(spec, nonce, sealed=True), commit) or "")
    assert "no attempt" in (checkable(_job(spec, nonce), replace(commit, attempt=2)) or "")
    assert "no attempt" in (checkable(_job(spec, nonce), replace(commit, nonce="ab" * 32)) or "")
    resumed = _job(spec, nonce)
    resumed = replace(resumed, attempts=(replace(resumed.attempts[0], resumed_from=1),))
    assert "resumed" in (checkable(resumed, commit) or "")
    verdict, _ = _check(running, _honest, sealed=True)
    assert verdict is None


@dataclass
class EarlyFeed:
    """The API's list of early commits and its job feed (the desk reads the prefix)."""

    commits: list[EarlyCommit]
    jobs: dict[str, JobInfo]

    def early_commits(self) -> list[EarlyCommit]:
        return list(self.commits)

    def job(self, job_id: str) -> JobInfo | None:
        return self.jobs.get(job_id)


def _store(tmp_path: Path) -> AttestationStore:
    store = AttestationStore(make_engine(f"sqlite:///{tmp_path / 'oracle.db'}"))
    store.create_schema()
    return store


def test_each_lease_is_decided_once_and_served_with_whose_fault(
    running: tuple[JobSpec, str, bytes], tmp_path: Path
) -> None:
    spec, nonce, prefix = running
    answers: list[Answer] = [lambda task, prefix: None]  # the verifier has not answered yet
    desk = Desk(prefix, lambda task, manifest: answers[-1](task, manifest))
    checker = VerifierSpotChecker(desk, SigningKey.generate())  # type: ignore[arg-type]
    feed = EarlyFeed([EarlyCommit(spec.job_id, 1, nonce)], {spec.job_id: _job(spec, nonce)})
    store = _store(tmp_path)
    replay = EarlyReplay(feed, checker, store)
    assert replay.run_once() == [] and store.early_checks(spec.job_id) == []
    answers.append(lambda task, manifest: {"status": "usage_error", "message": "no mlp"})
    (verdict,) = replay.run_once()
    assert (verdict.fault, verdict.reason) == ("job", Reason.JOB_NOT_REPLAYABLE)
    posted = len(desk.tasks)
    # Decided: later rounds neither redraw nor change it, whatever a verifier says now.
    answers.append(_honest)
    assert replay.run_once() == [] and len(desk.tasks) == posted
    (row,) = store.early_checks(spec.job_id)
    assert (row.status, row.fault, row.nonce) == ("failed", "job", nonce)

    # Served by the oracle, the round running in the app's lifespan.
    other = _store(tmp_path / "served")
    context = VerificationContext(
        network="devnet",
        escrow_script_hash="00" * 28,
        chain=None,  # type: ignore[arg-type]
        feed=feed,  # type: ignore[arg-type]
        store=other,
        spot_checker=VerifierSpotChecker(desk, SigningKey.generate()),  # type: ignore[arg-type]
    )
    app = create_app(Settings(), context=context, engine=other.engine, early_interval_s=0.05)
    with TestClient(app) as client:
        deadline = time.monotonic() + 30
        while not (served := client.get(f"/api/v1/jobs/{spec.job_id}/early-checks").json())["data"]:
            assert time.monotonic() < deadline, "no early verdict served"
            time.sleep(0.05)
    (shown,) = served["data"]
    assert shown["fault"] is None and shown["status"] == "passed", shown
    assert shown["prefix_root"] == Manifest.from_bytes(prefix).root


@dataclass
class Stops:
    """The API's job-fault route: keeps what each oracle posted."""

    posted: list[JobFaultVerdict] = field(default_factory=list)
    fail: bool = False

    def post_job_fault(self, verdict: JobFaultVerdict) -> dict[str, Any]:
        if self.fail:
            raise FeedError("the API is down")
        self.posted.append(verdict)
        return {"stopped": False}


def test_a_job_fault_is_signed_and_posted_to_stop_the_lease_and_posted_again_after_a_failure(
    running: tuple[JobSpec, str, bytes], tmp_path: Path
) -> None:
    spec, nonce, prefix = running
    desk = Desk(prefix, lambda task, manifest: {"status": "usage_error", "message": "no mlp"})
    key = SigningKey.generate()
    checker = VerifierSpotChecker(desk, key)  # type: ignore[arg-type]
    feed = EarlyFeed([EarlyCommit(spec.job_id, 1, nonce)], {spec.job_id: _job(spec, nonce)})
    stops = Stops(fail=True)
    replay = EarlyReplay(feed, checker, _store(tmp_path), stops)
    (verdict,) = replay.run_once()
    assert verdict.fault == "job" and stops.posted == []  # the API was down: not posted
    stops.fail = False
    assert replay.run_once() == []  # decided before: not replayed again, but posted now
    (posted,) = stops.posted
    posted.verify({bytes(key.verify_key).hex()})
    assert posted.names(spec.job_id, nonce, 1) and posted.reason == Reason.JOB_NOT_REPLAYABLE
    assert posted.prefix_root == Manifest.from_bytes(prefix).root


def test_a_passed_or_providers_fault_verdict_stops_nothing(
    running: tuple[JobSpec, str, bytes], tmp_path: Path
) -> None:
    spec, nonce, prefix = running
    for answer in (_honest, lambda task, m: _honest(task, m, status="failed")):
        desk = Desk(prefix, answer)
        checker = VerifierSpotChecker(desk, SigningKey.generate())  # type: ignore[arg-type]
        feed = EarlyFeed([EarlyCommit(spec.job_id, 1, nonce)], {spec.job_id: _job(spec, nonce)})
        stops = Stops()
        replay = EarlyReplay(feed, checker, _store(tmp_path / secrets.token_hex(4)), stops)
        (verdict,) = replay.run_once()
        assert verdict.fault != "job" and stops.posted == []
