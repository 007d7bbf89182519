"""Stopping a lease for the job's fault (api/services/job_faults.py): the oracles' signed
early verdicts are kept one per oracle key, and the lease stops only at the deployment's
threshold; its heartbeat answer then tells the worker to stop, with the segments its
uploaded prefix committed. The attacks: one oracle below the threshold, the same oracle
twice, a verdict signed by a key outside the oracle set, one relayed by another oracle,
one replayed onto another job or attempt, a forged signature."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from api_support import FakeClock, Worker
from fastapi.testclient import TestClient
from nacl.signing import SigningKey
from sqlmodel import Session, select
from test_resume import post_job, pot_files, upload_pot

from api.config import ApiConfig
from api.models import Job
from api.services import job_faults
from api.storage import LocalBlobStore
from oracle.inputs.feed import FeedError
from oracle.intake.feed_client import HttpApiFeed
from proofnet.messages.job_fault import JobFaultVerdict

ORACLES = [SigningKey(bytes([0x20 + i]) * 32) for i in range(3)]
OUTSIDER = SigningKey(b"\x66" * 32)
NETWORK = "devnet"
SEGMENTS = 2


@pytest.fixture
def config(make_config: Callable[..., ApiConfig]) -> ApiConfig:
    keys = tuple(bytes(k.verify_key).hex() for k in ORACLES)
    return make_config(oracle_keys=keys, oracle_threshold=2)


def _feed(client: TestClient, key: SigningKey) -> HttpApiFeed:
    return HttpApiFeed("", key, NETWORK, client=client, ttl_s=0)


def _running(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    tmp_path: Path,
) -> tuple[str, Worker, dict[str, Any]]:
    """A whole job leased and training, its first two segments committed and uploaded."""
    _, headers = approved
    job_id = post_job(client, headers)
    worker = worker_factory()
    worker.register([("L4", 24576)])
    claim = worker.claim().json()
    upload_pot(worker, clock, claim["lease_token"], pot_files(tmp_path / "run", SEGMENTS))
    return job_id, worker, claim


def _verdict(job_id: str, claim: dict[str, Any], key: SigningKey, **kw: Any) -> JobFaultVerdict:
    fields: dict[str, Any] = {
        "job_id": job_id,
        "nonce": claim["nonce"],
        "attempt": claim["attempt"],
        "reason": "job_not_replayable",
        "message": "two replays of segment 1 disagree",
        "prefix_root": "ab" * 32,
    }
    return JobFaultVerdict.sign(key, **(fields | kw))


def _beat(worker: Worker, claim: dict[str, Any]) -> dict[str, Any]:
    answer = worker.request(
        "POST", f"/api/v1/worker/leases/{claim['lease_token']}/heartbeat", {"progress": 0.5}
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_the_quorum_stops_the_lease_and_the_heartbeat_says_so(
    client: TestClient,
    session: Session,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    job_id, worker, claim = _running(client, approved, worker_factory, clock, tmp_path)
    first = _feed(client, ORACLES[0]).post_job_fault(_verdict(job_id, claim, ORACLES[0]))
    assert first["oracles"] == [ORACLES[0].verify_key.encode().hex()]
    assert first["stopped"] is False and first["threshold"] == 2
    assert _beat(worker, claim).get("stop") is None  # one oracle is not the quorum

    second = _feed(client, ORACLES[1]).post_job_fault(_verdict(job_id, claim, ORACLES[1]))
    assert second["stopped"] is True and len(second["oracles"]) == 2
    stop = _beat(worker, claim)["stop"]
    assert stop["reason"] == "job_fault" and stop["segments"] == SEGMENTS
    assert "two replays of segment 1 disagree" in stop["message"]
    owner = approved[1]
    view = client.get(f"/api/v1/jobs/{job_id}", headers=owner).json()
    assert view["progress_message"].startswith("stopped: job's fault: ")
    # What a results gate reads: the quorum's verdict that the fault is the job's.
    job = session.exec(select(Job).where(Job.job_id == job_id)).one()
    assert job_faults.job_fault_of(session, job) == (
        "job_not_replayable: two replays of segment 1 disagree"
    )


def test_one_oracle_twice_is_one_vote(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    job_id, worker, claim = _running(client, approved, worker_factory, clock, tmp_path)
    feed = _feed(client, ORACLES[0])
    feed.post_job_fault(_verdict(job_id, claim, ORACLES[0]))
    again = feed.post_job_fault(_verdict(job_id, claim, ORACLES[0], message="once more"))
    assert again["stopped"] is False and len(again["oracles"]) == 1
    assert _beat(worker, claim).get("stop") is None


@pytest.mark.parametrize(
    "attack",
    ["outsider_key", "relayed_by_another_oracle", "forged_signature", "other_job", "other_attempt"],
)
def test_a_forged_or_replayed_verdict_is_refused(
    attack: str,
    client: TestClient,
    session: Session,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    job_id, worker, claim = _running(client, approved, worker_factory, clock, tmp_path)
    other_job, _, other_claim = _running(client, approved, worker_factory, clock, tmp_path / "b")
    poster, verdict = ORACLES[1], _verdict(job_id, claim, ORACLES[1])
    if attack == "outsider_key":
        # Signed well, by a key the deployment's oracle set does not hold (posting as one).
        verdict = _verdict(job_id, claim, OUTSIDER)
        poster = OUTSIDER
    elif attack == "relayed_by_another_oracle":
        # An oracle posting what another key signed (its own word is not a vote).
        verdict = _verdict(job_id, claim, ORACLES[2])
    elif attack == "forged_signature":
        verdict = verdict.model_copy(update={"message": "edited after signing"})
    elif attack == "other_job":
        # Signed for another job with this lease's nonce: that job has no such lease.
        verdict = _verdict(other_job, claim, ORACLES[1])
        assert other_claim["nonce"] != claim["nonce"]
    elif attack == "other_attempt":
        verdict = _verdict(job_id, claim, ORACLES[1], attempt=claim["attempt"] + 1)
    _feed(client, ORACLES[0]).post_job_fault(_verdict(job_id, claim, ORACLES[0]))
    with pytest.raises(FeedError, match=r"40[0-4]"):
        _feed(client, poster).post_job_fault(verdict)
    assert _beat(worker, claim).get("stop") is None
    job = session.exec(select(Job).where(Job.job_id == job_id)).one()
    assert job_faults.job_fault_of(session, job) is None


def test_a_caller_without_an_oracle_key_cannot_post(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    job_id, worker, claim = _running(client, approved, worker_factory, clock, tmp_path)
    # The provider itself posting a verdict it signed: not an oracle of this API.
    verdict = _verdict(job_id, claim, worker.key)
    answer = worker.request("POST", "/api/v1/oracle/job-faults", verdict.to_json())
    assert answer.status_code == 403
    assert _beat(worker, claim).get("stop") is None


def test_a_stopped_lease_that_ends_without_attesting_fails_the_job_rather_than_requeue_it(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    """The job's code is at fault: another provider would fail the same way."""
    job_id, worker, claim = _running(client, approved, worker_factory, clock, tmp_path)
    for key in ORACLES[:2]:
        _feed(client, key).post_job_fault(_verdict(job_id, claim, key))
    released = worker.request(
        "POST", f"/api/v1/worker/leases/{claim['lease_token']}/release", {"reason": "gave up"}
    )
    assert released.status_code == 200, released.text
    view = client.get(f"/api/v1/jobs/{job_id}", headers=approved[1]).json()
    assert view["status"] == "failed", view
    assert view["last_error"].startswith("stopped: job's fault: "), view
    status = client.get(f"/api/v1/jobs/{job_id}/status", headers=approved[1]).json()
    assert "stopped: job's fault: " in status["reason"], status
    other = worker_factory()
    other.register([("L4", 24576)])
    assert other.claim().status_code == 204  # nobody is handed it again
