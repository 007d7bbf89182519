"""Results reach the submitter only with the oracles' verdict (issue 12.4), played as a
submitter who downloads early and as a provider (or anyone) who forges a verdict.

Each attack has its honest twin: the same download once a trusted oracle's verdict releases
the results (verified, or the fault is the job's)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from api_support import RELEASE_ORACLE, Wallet, Worker, job_spec, post_verdict, release_results
from fastapi.testclient import TestClient
from nacl.signing import SigningKey

from api.config import ApiConfig
from proofnet.messages.worker_auth import request_target, sign_request_headers

METRICS = b'{"accuracy": "0.9"}\n'
WEIGHTS = b"\x00\x01" * 500


def _put(worker: Worker, path: str, data: bytes) -> Any:
    now = worker.clock() if worker.clock else None
    signed = sign_request_headers(
        worker.key,
        network="devnet",
        method="PUT",
        path=request_target(path),
        body=data,
        timestamp=int(now.timestamp()) if now else None,
    )
    signed["content-type"] = "application/octet-stream"
    return worker.client.request("PUT", path, content=data, headers=signed)


def _completed_job(client: TestClient, headers: dict[str, str], worker: Worker) -> tuple[str, str]:
    """A job whose provider uploaded its results and completed: (job id, lease token)."""
    spec = job_spec(gpus=0)
    spec["results"] = [
        {"path": "results/metrics.json", "kind": "json"},
        {"path": "out/model.bin", "kind": "model"},
    ]
    posted = client.post("/api/v1/jobs", json={"spec": spec}, headers=headers)
    assert posted.status_code == 201, posted.text
    worker.register([])
    claimed = worker.claim()
    assert claimed.status_code == 200, claimed.text
    token = claimed.json()["lease_token"]
    base = f"/api/v1/worker/leases/{token}/results/"
    for name, data in (("results/metrics.json", METRICS), ("out/model.bin", WEIGHTS)):
        assert _put(worker, base + name, data).status_code == 200
    done = worker.request("POST", f"/api/v1/worker/leases/{token}/complete", {"result": {}})
    assert done.status_code == 200, done.text
    return str(posted.json()["job_id"]), token


def _reads(client: TestClient, headers: dict[str, str], job_id: str) -> list[Any]:
    """Every read that serves results: the manifest and each file (a checkpoint included)."""
    return [
        client.get(f"/api/v1/jobs/{job_id}/results", headers=headers),
        client.get(f"/api/v1/jobs/{job_id}/results/results/metrics.json", headers=headers),
        client.get(f"/api/v1/jobs/{job_id}/results/out/model.bin", headers=headers),
    ]


def _refused(client: TestClient, headers: dict[str, str], job_id: str, why: str) -> None:
    for answer in _reads(client, headers, job_id):
        assert answer.status_code == 409, answer.text
        assert why in answer.json()["detail"], answer.text
        assert METRICS not in answer.content and WEIGHTS not in answer.content


def _served(client: TestClient, headers: dict[str, str], job_id: str) -> None:
    listed, metrics, weights = _reads(client, headers, job_id)
    assert listed.status_code == 200, listed.text
    assert {r["name"]: r["sha256"] for r in listed.json()} == {
        "results/metrics.json": hashlib.sha256(METRICS).hexdigest(),
        "out/model.bin": hashlib.sha256(WEIGHTS).hexdigest(),
    }
    assert metrics.status_code == 200 and metrics.content == METRICS
    assert weights.status_code == 200 and weights.content == WEIGHTS


@pytest.fixture
def completed(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> tuple[str, dict[str, str], Worker]:
    _, headers = approved
    worker = worker_factory()
    job_id, _ = _completed_job(client, headers, worker)
    return job_id, headers, worker


def test_the_submitter_cannot_download_results_before_the_verdict(
    client: TestClient, completed: tuple[str, dict[str, str], Worker]
) -> None:
    job_id, headers, _ = completed
    _refused(client, headers, job_id, "waiting for the oracles' verdict")
    state = client.get(f"/api/v1/jobs/{job_id}/release", headers=headers).json()
    assert state["state"] == "waiting" and state["quorum"] == 1

    release_results(client, job_id)  # the honest twin: verified
    _served(client, headers, job_id)
    assert client.get(f"/api/v1/jobs/{job_id}/release", headers=headers).json()["state"] == (
        "released"
    )


@pytest.mark.parametrize(
    ("status", "fault"), [("rejected", "provider"), ("unproven", None), ("unproven", "provider")]
)
def test_a_rejected_or_unproven_verdict_never_releases_the_results(
    client: TestClient,
    completed: tuple[str, dict[str, str], Worker],
    status: str,
    fault: str | None,
) -> None:
    job_id, headers, _ = completed
    posted = post_verdict(client, job_id, status=status, fault=fault, reason="segment_mismatch")
    assert posted.status_code == 200, posted.text
    assert posted.json()["state"] == "withheld"
    _refused(client, headers, job_id, f"verdict is {status}")
    assert "the escrow refunds" in _reads(client, headers, job_id)[0].json()["detail"]


@pytest.mark.parametrize(("status", "fault"), [("verified", "job"), ("rejected", "job")])
def test_the_jobs_fault_releases_the_results(
    client: TestClient,
    completed: tuple[str, dict[str, str], Worker],
    status: str,
    fault: str,
) -> None:
    job_id, headers, _ = completed
    release_results(client, job_id, status=status, fault=fault, reason="job_not_replayable")
    _served(client, headers, job_id)


def test_a_verdict_from_anyone_but_a_trusted_oracle_is_refused(
    client: TestClient, completed: tuple[str, dict[str, str], Worker]
) -> None:
    job_id, headers, provider = completed
    # The provider itself, a stranger's key, and the submitter's bearer token: none is an
    # oracle the API trusts, so none can release the results.
    for key in (provider.key, SigningKey.generate()):
        forged = post_verdict(client, job_id, key=key)
        assert forged.status_code == 403, forged.text
    by_submitter = client.post(
        "/api/v1/oracle/verdicts",
        json={"job_id": job_id, "nonce": "0" * 64, "status": "verified"},
        headers=headers,
    )
    assert by_submitter.status_code in (401, 403), by_submitter.text
    _refused(client, headers, job_id, "waiting for the oracles' verdict")


def test_a_verdict_must_say_whose_fault_a_rejection_is(
    client: TestClient, completed: tuple[str, dict[str, str], Worker]
) -> None:
    job_id, headers, _ = completed
    for status, fault in (("rejected", None), ("verified", "provider")):
        answer = post_verdict(client, job_id, status=status, fault=fault)
        assert answer.status_code == 400, answer.text
    _refused(client, headers, job_id, "waiting for the oracles' verdict")


def test_a_later_rejection_by_the_same_oracle_withholds_again(
    client: TestClient, completed: tuple[str, dict[str, str], Worker]
) -> None:
    job_id, headers, _ = completed
    release_results(client, job_id)
    post_verdict(client, job_id, status="rejected", fault="provider", reason="spot_check_failed")
    _refused(client, headers, job_id, "verdict is rejected")


@pytest.fixture
def config(make_config: Callable[..., ApiConfig]) -> ApiConfig:
    return make_config(oracle_keys=(bytes(RELEASE_ORACLE.verify_key).hex(), SECOND.hex))


class _Key:
    def __init__(self) -> None:
        self.key = SigningKey.generate()
        self.hex = bytes(self.key.verify_key).hex()


SECOND = _Key()


def test_a_quorum_of_distinct_trusted_oracles_releases(
    client: TestClient,
    make_config: Callable[..., ApiConfig],
    completed: tuple[str, dict[str, str], Worker],
) -> None:
    job_id, headers, _ = completed
    client.app.state.config = make_config(  # type: ignore[attr-defined]
        oracle_keys=(bytes(RELEASE_ORACLE.verify_key).hex(), SECOND.hex),
        result_release_quorum=2,
    )
    # One oracle's word, even posted twice, is not a quorum of two.
    for _ in range(2):
        once = post_verdict(client, job_id)
        assert once.status_code == 200 and once.json()["state"] == "waiting", once.text
    _refused(client, headers, job_id, "1 of 2 releasing verdicts")
    release_results(client, job_id, key=SECOND.key)
    _served(client, headers, job_id)


def test_the_oracles_feed_client_posts_the_verdict_that_releases(
    client: TestClient, completed: tuple[str, dict[str, str], Worker]
) -> None:
    """The oracle's side (oracle.intake.announce) over the real route: its signed post
    releases; the same post signed by a key the API does not trust is refused."""
    from api_support import newest_nonce

    from oracle.inputs.feed import FeedError
    from oracle.intake.announce import Verdict
    from oracle.intake.feed_client import HttpApiFeed

    job_id, headers, _ = completed
    verdict = Verdict(job_id, newest_nonce(client, job_id), "verified", None, "", "")
    impostor = HttpApiFeed("", SigningKey.generate(), "devnet", client=client, ttl_s=0)
    with pytest.raises(FeedError, match="403"):
        impostor.post_verdict(verdict)
    _refused(client, headers, job_id, "waiting for the oracles' verdict")
    HttpApiFeed("", RELEASE_ORACLE, "devnet", client=client, ttl_s=0).post_verdict(verdict)
    _served(client, headers, job_id)


def test_a_verdict_from_an_oracle_no_longer_trusted_stops_counting(
    client: TestClient,
    make_config: Callable[..., ApiConfig],
    completed: tuple[str, dict[str, str], Worker],
) -> None:
    job_id, headers, _ = completed
    release_results(client, job_id, key=SECOND.key)
    _served(client, headers, job_id)
    # The operator drops that oracle's key: its word releases nothing any more.
    client.app.state.config = make_config(  # type: ignore[attr-defined]
        oracle_keys=(bytes(RELEASE_ORACLE.verify_key).hex(),)
    )
    _refused(client, headers, job_id, "waiting for the oracles' verdict")


def test_an_m_of_n_deployment_releases_with_its_settlement_quorum_by_default() -> None:
    """Unset, the release quorum is the settlement threshold: in a 2-of-3 deployment one
    oracle's verdict (one compromised host's word) releases nothing; a set value wins."""
    from proofnet.settings import build_settings

    assert (
        ApiConfig.from_settings(build_settings(settlement_threshold=2)).result_release_quorum == 2
    )
    assert ApiConfig.from_settings(build_settings()).result_release_quorum == 1
    pinned = build_settings(settlement_threshold=2, api_result_release_quorum=3)
    assert ApiConfig.from_settings(pinned).result_release_quorum == 3
