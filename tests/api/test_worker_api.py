"""The worker side over HTTP: signed requests, registration, claims and leases."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from api_support import NETWORK, FakeClock, Wallet, Worker, capabilities, job_spec
from fastapi.testclient import TestClient
from nacl.signing import SigningKey

from proofnet.messages.binding import binding_message
from proofnet.messages.worker_auth import sign_request_headers


def _post_job(client: TestClient, headers: dict[str, str], **spec_args: Any) -> str:
    response = client.post("/api/v1/jobs", json={"spec": job_spec(**spec_args)}, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["job_id"])


def test_register_lists_provider_with_gpus(
    client: TestClient, worker_factory: Callable[[], Worker]
) -> None:
    worker = worker_factory()
    payout = Wallet()
    registered = worker.register([("H100", 81559), ("H100", 81559)], payout=payout)
    assert registered["payout_address"] == payout.address
    assert registered["online"] is True
    rate = worker.request("PUT", "/api/v1/worker/rate-card", {"rates": {"H100": 2_500_000}})
    assert rate.status_code == 200, rate.text
    unknown = worker.request("PUT", "/api/v1/worker/rate-card", {"rates": {"A100": 1}})
    assert unknown.status_code == 400
    telemetry = worker.request(
        "PUT", "/api/v1/worker/telemetry", {"snapshot": {"gpus": [{"util": 97, "temp_c": 70}]}}
    )
    assert telemetry.status_code == 200
    listing = client.get("/api/v1/providers").json()
    assert listing["count"] == 1
    provider = listing["data"][0]
    assert provider["worker_key"] == worker.public_key
    assert [g["model"] for g in provider["gpus"]] == ["H100", "H100"]
    assert provider["rate_card"][0]["ntx_per_gpu_hour"] == 2_500_000
    assert provider["telemetry"]["gpus"][0]["util"] == 97


def test_binding_must_be_signed_by_the_requesting_worker(
    client: TestClient, worker_factory: Callable[[], Worker]
) -> None:
    worker, other = worker_factory(), worker_factory()
    nonce = worker.request("POST", "/api/v1/worker/challenge").json()["nonce"]
    payout = Wallet().address
    # `other` signs a binding for its own key with worker's nonce: refused.
    binding = {
        "network": NETWORK,
        "worker_pubkey": other.public_key,
        "payout_address": payout,
        "nonce": nonce,
        "signature": other.key.sign(
            binding_message(NETWORK, other.public_key, payout, nonce)
        ).signature.hex(),
    }
    body = {"binding": binding, "gpus": [], "capabilities": capabilities([])}
    assert other.request("POST", "/api/v1/worker/register", body).status_code == 401
    assert worker.request("POST", "/api/v1/worker/register", body).status_code == 401
    # A binding whose signature does not match its fields is refused and burns the nonce.
    forged = dict(binding, worker_pubkey=worker.public_key)
    response = worker.request("POST", "/api/v1/worker/register", dict(body, binding=forged))
    assert response.status_code == 401
    assert "signature does not verify" in response.json()["detail"]
    assert client.get("/api/v1/providers").json()["count"] == 0


def test_binding_nonce_is_single_use(worker_factory: Callable[[], Worker]) -> None:
    worker = worker_factory()
    worker.register([("L4", 24576)])
    nonce_body = worker.request("POST", "/api/v1/worker/challenge").json()
    payout = Wallet().address
    sig = worker.key.sign(
        binding_message(NETWORK, worker.public_key, payout, nonce_body["nonce"])
    ).signature.hex()
    binding = {
        "network": NETWORK,
        "worker_pubkey": worker.public_key,
        "payout_address": payout,
        "nonce": nonce_body["nonce"],
        "signature": sig,
    }
    body = {"binding": binding, "gpus": [], "capabilities": capabilities([])}
    assert worker.request("POST", "/api/v1/worker/register", body).status_code == 200
    replay = worker.request("POST", "/api/v1/worker/register", body)
    assert replay.status_code == 401 and "already used" in replay.json()["detail"]


def test_signed_requests_refuse_tampering_replay_and_skew(
    client: TestClient, worker_factory: Callable[[], Worker], clock: FakeClock
) -> None:
    worker = worker_factory()
    worker.register([("L4", 24576)])
    path = "/api/v1/worker/heartbeat"
    now = int(clock().timestamp())
    headers = sign_request_headers(
        worker.key,
        network=NETWORK,
        method="POST",
        path=path,
        body=b"",
        timestamp=now,
        nonce=secrets.token_hex(16),
    )
    assert client.post(path, headers=headers).status_code == 200
    replay = client.post(path, headers=headers)
    assert replay.status_code == 401 and "replay" in replay.json()["detail"]
    # Same signature, different path.
    moved = client.post("/api/v1/worker/claim", headers=headers)
    assert moved.status_code == 401
    # Body changed after signing.
    signed = sign_request_headers(
        worker.key,
        network=NETWORK,
        method="PUT",
        path="/api/v1/worker/telemetry",
        body=b'{"snapshot":{}}',
        timestamp=now,
        nonce=secrets.token_hex(16),
    )
    tampered = client.put(
        "/api/v1/worker/telemetry",
        content=b'{"snapshot":{"x":1}}',
        headers={**signed, "content-type": "application/json"},
    )
    assert tampered.status_code == 401
    # Signed for another network.
    other_net = sign_request_headers(
        worker.key,
        network="mainnet",
        method="POST",
        path=path,
        body=b"",
        timestamp=now,
        nonce=secrets.token_hex(16),
    )
    assert client.post(path, headers=other_net).status_code == 401
    # Too far from the server clock.
    stale = sign_request_headers(
        worker.key,
        network=NETWORK,
        method="POST",
        path=path,
        body=b"",
        timestamp=now - 600,
        nonce=secrets.token_hex(16),
    )
    response = client.post(path, headers=stale)
    assert response.status_code == 401 and "clock" in response.json()["detail"]
    assert client.post(path).status_code == 401


def test_unregistered_worker_cannot_claim(worker_factory: Callable[[], Worker]) -> None:
    response = worker_factory().claim()
    assert response.status_code == 403
    assert "not registered" in response.json()["detail"]


def test_claim_heartbeat_complete_over_http(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
) -> None:
    _, headers = approved
    job_id = _post_job(client, headers)
    worker = worker_factory()
    worker.register([("L4", 24576)])
    claimed = worker.claim()
    assert claimed.status_code == 200, claimed.text
    body = claimed.json()
    assert body["job_id"] == job_id and len(body["nonce"]) == 64 and body["attempt"] == 1
    token = body["lease_token"]
    assert worker.claim().status_code == 204  # nothing else queued

    clock.advance(100)
    beat = worker.request("POST", f"/api/v1/worker/leases/{token}/heartbeat", {"progress": 0.5})
    assert beat.status_code == 200
    clock.advance(100)  # within the renewed 120 s lease
    done = worker.request(
        "POST", f"/api/v1/worker/leases/{token}/complete", {"result": {"root": "ab" * 32}}
    )
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed"
    again = worker.request("POST", f"/api/v1/worker/leases/{token}/complete", {"result": {}})
    assert again.status_code == 409
    job = client.get(f"/api/v1/jobs/{job_id}", headers=headers).json()
    assert job["status"] == "completed" and job["result"] == {"root": "ab" * 32}


def test_lease_of_another_worker_is_not_found(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    _post_job(client, headers)
    owner, thief = worker_factory(), worker_factory()
    owner.register([("L4", 24576)])
    thief.register([("L4", 24576)])
    token = owner.claim().json()["lease_token"]
    stolen = thief.request("POST", f"/api/v1/worker/leases/{token}/complete", {"result": {}})
    assert stolen.status_code == 404


def test_expired_lease_requeues_and_stale_token_is_refused(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
) -> None:
    _, headers = approved
    job_id = _post_job(client, headers)
    slow, fast = worker_factory(), worker_factory()
    slow.register([("L4", 24576)])
    fast.register([("L4", 24576)])
    stale = slow.claim().json()["lease_token"]
    clock.advance(121)
    # The claim path sweeps first: the expired job goes straight to the next worker.
    second = fast.claim()
    assert second.status_code == 200 and second.json()["job_id"] == job_id
    assert second.json()["attempt"] == 2
    refused = slow.request("POST", f"/api/v1/worker/leases/{stale}/complete", {"result": {}})
    assert refused.status_code == 409
    status = client.get(f"/api/v1/jobs/{job_id}/status", headers=headers).json()
    assert status["attempts"] == 2 and status["failures"] == 1


def test_release_and_fail_with_reason(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    job_id = _post_job(client, headers)
    worker = worker_factory()
    worker.register([("L4", 24576)])
    token = worker.claim().json()["lease_token"]
    released = worker.request(
        "POST", f"/api/v1/worker/leases/{token}/release", {"reason": "shutting down"}
    )
    assert released.status_code == 200 and released.json()["status"] == "queued"
    for attempt in range(3):
        token = worker.claim().json()["lease_token"]
        failed = worker.request(
            "POST", f"/api/v1/worker/leases/{token}/fail", {"reason": f"CUDA OOM {attempt}"}
        )
        assert failed.status_code == 200
    job = client.get(f"/api/v1/jobs/{job_id}/status", headers=headers).json()
    assert job["status"] == "failed"  # max_attempts = 3 failures; the release did not count
    assert "CUDA OOM 2" in job["reason"]
    assert worker.claim().status_code == 204
    missing_reason = worker.request("POST", f"/api/v1/worker/leases/{token}/fail", {})
    assert missing_reason.status_code == 422


def test_claim_respects_gpu_fit(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    big_job = _post_job(client, headers, gpus=2, gpu_memory_mb=40960)
    cpu_job = _post_job(client, headers, gpus=0)
    cpu_worker = worker_factory()
    cpu_worker.register([])
    got = cpu_worker.claim().json()
    assert got["job_id"] == cpu_job  # skips the older job it cannot run
    assert cpu_worker.claim().status_code == 204
    gpu_worker = worker_factory()
    gpu_worker.register([("A100", 40960), ("A100", 40960)])
    assert gpu_worker.claim().json()["job_id"] == big_job


def test_worker_body_must_be_json_the_worker_signed(
    client: TestClient, worker_factory: Callable[[], Worker]
) -> None:
    worker = worker_factory()
    worker.register([])
    key = SigningKey.generate()
    body = json.dumps({"snapshot": {}}).encode()
    headers = sign_request_headers(
        key,
        network=NETWORK,
        method="PUT",
        path="/api/v1/worker/telemetry",
        body=body,
        timestamp=int(datetime.now(UTC).timestamp()),
        nonce=secrets.token_hex(16),
    )
    # Signature checks out, but the key never registered.
    response = client.put(
        "/api/v1/worker/telemetry",
        content=body,
        headers={**headers, "content-type": "application/json"},
    )
    assert response.status_code in (401, 403)


def test_registration_must_match_its_inventory_report(worker_factory: Callable[[], Worker]) -> None:
    worker = worker_factory()
    nonce = worker.request("POST", "/api/v1/worker/challenge").json()["nonce"]
    payout = Wallet().address
    binding = {
        "network": NETWORK,
        "worker_pubkey": worker.public_key,
        "payout_address": payout,
        "nonce": nonce,
        "signature": worker.key.sign(
            binding_message(NETWORK, worker.public_key, payout, nonce)
        ).signature.hex(),
    }
    gpu = {"index": 0, "uuid": "GPU-1", "name": "H100", "memory_mb": 81920}
    report = capabilities([dict(gpu, memory_mb=40960)])  # the report shows half the memory
    response = worker.request(
        "POST",
        "/api/v1/worker/register",
        {"binding": binding, "gpus": [gpu], "capabilities": report},
    )
    assert response.status_code == 400
    assert "the report shows 40960 MB" in response.json()["detail"]
    missing = worker.request(
        "POST",
        "/api/v1/worker/register",
        {"binding": None, "gpus": [], "capabilities": capabilities([])},
    )
    assert missing.status_code == 400 and "payout binding" in missing.json()["detail"]
