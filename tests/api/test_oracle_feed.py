"""The oracle feed (signed by a configured oracle key) and the submitter's escrow record."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from api_support import FakeClock, Wallet, Worker, job_spec
from escrow_chain import FakeChainContext, deployment, escrow_datum, escrow_output
from fastapi.testclient import TestClient
from nacl.signing import SigningKey

from api.config import ApiConfig
from api.storage import LocalBlobStore
from oracle.inputs.feed import ArtifactMissing, FeedDataError, parse_worker
from oracle.intake.feed_client import HttpApiFeed
from proofnet.messages.worker_auth import sign_request_headers

ORACLE = SigningKey.generate()
DEPLOYED = deployment()
NETWORK = "devnet"


@pytest.fixture
def config(make_config: Callable[..., ApiConfig]) -> ApiConfig:
    return make_config(oracle_keys=(bytes(ORACLE.verify_key).hex(),))


@pytest.fixture
def feed(client: TestClient, tmp_path: Path) -> HttpApiFeed:
    client.app.state.blob_store = LocalBlobStore(tmp_path / "blobs")  # type: ignore[attr-defined]
    return HttpApiFeed("", ORACLE, NETWORK, client=client, ttl_s=0)


def signed_get(client: TestClient, key: SigningKey, path: str) -> Any:
    headers = sign_request_headers(key, network=NETWORK, method="GET", path=path, body=b"")
    return client.get(path, headers=headers)


def spec_with_results() -> dict[str, Any]:
    spec = job_spec(gpus=1)
    spec["results"] = [
        {"path": "metrics.json", "kind": "json"},
        {"path": "pot/**", "kind": "model"},
    ]
    return spec


def upload(worker: Worker, token: str, name: str, data: bytes, clock: FakeClock) -> None:
    path = f"/api/v1/worker/leases/{token}/results/{name}"
    headers = sign_request_headers(
        worker.key,
        network=NETWORK,
        method="PUT",
        path=path,
        body=data,
        timestamp=int(clock().timestamp()),
    )
    response = worker.client.put(path, content=data, headers=headers)
    assert response.status_code == 200, response.text


def completed_job(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
) -> tuple[str, Worker, dict[str, Any], dict[str, bytes]]:
    _wallet, auth = approved
    spec = spec_with_results()
    job_id = client.post("/api/v1/jobs", json={"spec": spec}, headers=auth).json()["job_id"]
    worker = worker_factory()
    worker.register([("NVIDIA H100", 81920)])
    claim = worker.claim().json()
    files = {"metrics.json": b'{"loss": "0.1"}\n', "pot/manifest.json": b"{}"}
    for name, data in files.items():
        upload(worker, claim["lease_token"], name, data, clock)
    clock.advance(30)
    done = worker.request("POST", f"/api/v1/worker/leases/{claim['lease_token']}/complete", {})
    assert done.status_code == 200, done.text
    return job_id, worker, claim, files


def test_feed_needs_an_oracle_signature(
    client: TestClient, worker_factory: Callable[[], Worker]
) -> None:
    path = f"/api/v1/oracle/jobs/{'a' * 64}"
    assert client.get(path).status_code == 401
    assert signed_get(client, SigningKey.generate(), path).status_code == 403
    assert signed_get(client, ORACLE, path).status_code == 404
    # A captured request cannot be replayed (the nonce is remembered).
    headers = sign_request_headers(ORACLE, network=NETWORK, method="GET", path=path, body=b"")
    assert client.get(path, headers=headers).status_code == 404
    assert client.get(path, headers=headers).status_code == 401


def test_job_feed_describes_the_completing_lease_and_uploads(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    feed: HttpApiFeed,
) -> None:
    job_id, worker, claim, files = completed_job(client, approved, worker_factory, clock)
    info = feed.job(job_id)
    assert info is not None
    assert info.spec.job_id == job_id  # the spec served hashes to the id it is served under
    assert [r.path for r in info.spec.results] == ["metrics.json", "pot/**"]
    assert info.status == "completed" and info.escrow is None
    assert info.lease is not None
    assert info.lease.worker_key == worker.public_key
    assert info.lease.nonce == claim["nonce"]
    assert info.lease.gpus == 1 and info.lease.attempt == 1
    assert info.lease.completed_ms - info.lease.started_ms == 30_000
    assert dict(info.results) == {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}
    assert feed.artifact(job_id, "pot/manifest.json") == files["pot/manifest.json"]
    with pytest.raises(ArtifactMissing):
        feed.artifact(job_id, "pot/000001.weights")
    worker_info = feed.worker(worker.public_key)
    assert worker_info is not None and worker_info.payout_address == info.lease.payout_address
    assert feed.worker("ab" * 32) is None and feed.job("cd" * 32) is None


def test_feed_data_is_rechecked_by_the_oracle(
    client: TestClient, worker_factory: Callable[[], Worker]
) -> None:
    worker = worker_factory()
    worker.register([("NVIDIA H100", 81920)])
    body = signed_get(client, ORACLE, f"/api/v1/oracle/workers/{worker.public_key}").json()
    assert parse_worker(body, expected_key=worker.public_key, network=NETWORK).binding.nonce
    # The API claims another address than the one the worker signed.
    body["payout_address"] = Wallet().address
    with pytest.raises(FeedDataError):
        parse_worker(body, expected_key=worker.public_key, network=NETWORK)


def test_submitter_records_escrow_checked_on_chain(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    feed: HttpApiFeed,
) -> None:
    wallet, auth = approved
    job_id = client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=auth).json()["job_id"]
    chain = FakeChainContext()
    client.app.state.chain_context = chain  # type: ignore[attr-defined]
    client.app.state.deployment = DEPLOYED  # type: ignore[attr-defined]
    path = f"/api/v1/jobs/{job_id}/escrow"

    def record(tx_id: str, index: int = 0, headers: dict[str, str] = auth) -> Any:
        return client.post(path, json={"tx_id": tx_id, "index": index}, headers=headers)

    pkh = wallet.signing_key.to_verification_key().hash().payload.hex()

    def escrow_out(job: str, **kwargs: Any) -> dict[str, Any]:
        datum = escrow_datum(DEPLOYED, job, pkh, budget=1_500_000, deadline_ms=2**42)
        return escrow_output(DEPLOYED, datum, **kwargs)

    missing = secrets.token_hex(32)
    assert record(missing).status_code == 400
    cases = {
        "not at the escrow": escrow_out(job_id, script="12" * 28),
        "was spent": escrow_out(job_id, spent_by="ee" * 32),
        "is for job": escrow_out("34" * 32),
    }
    for expected, out in cases.items():
        tx, _ = chain.put(out)
        response = record(tx)
        assert response.status_code == 400 and expected in response.json()["detail"], response.text
    good, _ = chain.put(escrow_out(job_id))
    assert client.post(path, json={"tx_id": good, "index": 0}).status_code == 401
    response = record(good)
    assert response.status_code == 200, response.text
    assert response.json()["tx_id"] == good and response.json()["budget"] == 1_500_000
    info = feed.job(job_id)
    assert info is not None and info.escrow is not None and info.escrow.tx_id == good
    # Only the owner may record it; another submitter sees no such job.
    other_wallet_auth = approved_other(client)
    assert record(good, headers=other_wallet_auth).status_code == 404
    assert record("zz").status_code == 422


def approved_other(client: TestClient) -> dict[str, str]:
    from api_support import Wallet, sign_in

    from api.db import open_session
    from api.services.users import add_senior

    wallet = Wallet()
    with open_session(client.app.state.engine) as session:  # type: ignore[attr-defined]
        add_senior(session, client.app.state.config, wallet.address, client.app.state.clock())  # type: ignore[attr-defined]
    return sign_in(client, wallet)


def test_running_leases_with_their_first_segment_uploaded_are_listed_for_early_replay(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    feed: HttpApiFeed,
) -> None:
    """Listed once all of the first segment's commitment is uploaded (prefix and the files
    of checkpoints 0 and 1), while the lease runs; the oracle reads the prefix through the
    attempt's feed name; a completed lease is no longer listed (its attestation is)."""
    from oracle.verification.early import EarlyCommit
    from proofnet.messages.result_paths import attempt_result_name

    _wallet, auth = approved
    job_id = client.post("/api/v1/jobs", json={"spec": spec_with_results()}, headers=auth).json()[
        "job_id"
    ]
    worker = worker_factory()
    worker.register([("NVIDIA H100", 81920)])
    claim = worker.claim().json()
    token = claim["lease_token"]
    assert (
        signed_get(client, SigningKey.generate(), "/api/v1/oracle/early-commits").status_code == 403
    )
    files = {
        "pot/prefix.json": b'{"prefix": 1}',
        **{
            f"pot/{i:06d}.{e}": bytes([i]) + e.encode()
            for i in (0, 1)
            for e in ("weights", "optim", "rng.json")
        },
    }
    for name, data in list(files.items())[:-1]:
        upload(worker, token, name, data, clock)
        assert feed.early_commits() == []  # not all of it yet
    upload(worker, token, "pot/000001.rng.json", files["pot/000001.rng.json"], clock)
    (commit,) = feed.early_commits()
    assert commit == EarlyCommit(job_id, 1, claim["nonce"], "NVIDIA H100")
    info = feed.job(job_id)
    assert info is not None and [a.nonce for a in info.attempts] == [claim["nonce"]]
    assert (
        feed.artifact(job_id, attempt_result_name(1, "pot/prefix.json")) == files["pot/prefix.json"]
    )

    clock.advance(30)
    done = worker.request("POST", f"/api/v1/worker/leases/{token}/complete", {})
    assert done.status_code == 200, done.text
    assert feed.early_commits() == []
