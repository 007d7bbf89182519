"""Jobs over HTTP: submission, owner-only reads, status reasons, cancellation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from api_support import FakeClock, Wallet, Worker, job_spec, sign_in
from fastapi.testclient import TestClient


def _post(client: TestClient, headers: dict[str, str], **spec_args: Any) -> dict[str, Any]:
    response = client.post("/api/v1/jobs", json={"spec": job_spec(**spec_args)}, headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


def test_submit_list_get(client: TestClient, approved: tuple[Wallet, dict[str, str]]) -> None:
    _, headers = approved
    spec = job_spec(gpus=2, gpu_memory_mb=40960)
    response = client.post("/api/v1/jobs", json={"spec": spec}, headers=headers)
    assert response.status_code == 201
    job = response.json()
    from proofnet.messages.jobspec import JobSpec

    assert job["job_id"] == JobSpec.model_validate(spec).job_id
    assert job["status"] == "queued"
    listed = client.get("/api/v1/jobs", headers=headers).json()
    assert listed["count"] == 1 and listed["data"][0]["job_id"] == job["job_id"]
    got = client.get(f"/api/v1/jobs/{job['job_id']}", headers=headers)
    assert got.status_code == 200 and got.json()["spec"]["seed"] == spec["seed"]
    duplicate = client.post("/api/v1/jobs", json={"spec": spec}, headers=headers)
    assert duplicate.status_code == 409


def test_nobody_reads_another_users_jobs(
    client: TestClient, approved: tuple[Wallet, dict[str, str]]
) -> None:
    _, owner = approved
    job = _post(client, owner)
    stranger = sign_in(client, Wallet())
    for path in (f"/api/v1/jobs/{job['job_id']}", f"/api/v1/jobs/{job['job_id']}/status"):
        response = client.get(path, headers=stranger)
        assert response.status_code == 404, path
    assert client.post(f"/api/v1/jobs/{job['job_id']}/cancel", headers=stranger).status_code == 404
    assert client.get("/api/v1/jobs", headers=stranger).json()["count"] == 0
    assert client.get(f"/api/v1/jobs/{job['job_id']}").status_code == 401
    # Still queued: the stranger's cancel changed nothing.
    assert client.get(f"/api/v1/jobs/{job['job_id']}", headers=owner).json()["status"] == "queued"


def test_unapproved_user_cannot_post(client: TestClient) -> None:
    headers = sign_in(client, Wallet())
    response = client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=headers)
    assert response.status_code == 403


def test_invalid_and_extra_fields_are_refused(
    client: TestClient, approved: tuple[Wallet, dict[str, str]]
) -> None:
    _, headers = approved
    spec = job_spec()
    spec["image"] = "pytorch/pytorch:latest"  # not pinned by digest
    bad = client.post("/api/v1/jobs", json={"spec": spec}, headers=headers)
    assert bad.status_code == 422
    assert "digest" in bad.text
    extra_top = client.post(
        "/api/v1/jobs", json={"spec": job_spec(), "priority": "high"}, headers=headers
    )
    assert extra_top.status_code == 422
    nested = job_spec()
    nested["resources"]["tpus"] = 4
    assert client.post("/api/v1/jobs", json={"spec": nested}, headers=headers).status_code == 422
    extra_auth = client.post(
        "/api/v1/auth/challenge", json={"address": Wallet().address, "admin": True}
    )
    assert extra_auth.status_code == 422


def test_status_says_why_a_job_is_stuck(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
) -> None:
    _, headers = approved
    job = _post(client, headers, gpus=2, gpu_memory_mb=40960)
    status = client.get(f"/api/v1/jobs/{job['job_id']}/status", headers=headers).json()
    assert status["reason"] == "waiting: no provider with >= 2 GPUs of 40 GB online"
    assert status["matching_providers_online"] == 0

    # A provider whose second GPU is too small does not count.
    small = worker_factory()
    small.register([("A100-40GB", 40960), ("T4", 16384)])
    status = client.get(f"/api/v1/jobs/{job['job_id']}/status", headers=headers).json()
    assert status["matching_providers_online"] == 0
    assert small.claim().status_code == 204

    big = worker_factory()
    big.register([("A100-40GB", 40960), ("A100-40GB", 40960)])
    clock.advance(1)  # the count per resource shape is cached for up to a second
    status = client.get(f"/api/v1/jobs/{job['job_id']}/status", headers=headers).json()
    assert status["matching_providers_online"] == 1
    assert "1 matching provider online" in status["reason"]

    clock.advance(61)  # both providers fall silent
    status = client.get(f"/api/v1/jobs/{job['job_id']}/status", headers=headers).json()
    assert status["matching_providers_online"] == 0

    claimed = big.claim()
    assert claimed.status_code == 200
    token = claimed.json()["lease_token"]
    beat = big.request(
        "POST", f"/api/v1/worker/leases/{token}/heartbeat", {"progress": 0.25, "message": "epoch 1"}
    )
    assert beat.status_code == 200, beat.text
    status = client.get(f"/api/v1/jobs/{job['job_id']}/status", headers=headers).json()
    assert status["status"] == "leased"
    assert status["progress"] == 0.25
    assert "epoch 1" in status["reason"] and "running on provider" in status["reason"]


def test_cancel_queued_and_running(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    queued = _post(client, headers, gpus=8, gpu_memory_mb=81920)
    cancelled = client.post(f"/api/v1/jobs/{queued['job_id']}/cancel", headers=headers)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert (
        client.post(f"/api/v1/jobs/{queued['job_id']}/cancel", headers=headers).status_code == 409
    )

    running = _post(client, headers)
    worker = worker_factory()
    worker.register([("L4", 24576)])
    token = worker.claim().json()["lease_token"]
    assert (
        client.post(f"/api/v1/jobs/{running['job_id']}/cancel", headers=headers).status_code == 200
    )
    beat = worker.request("POST", f"/api/v1/worker/leases/{token}/heartbeat", {})
    assert beat.status_code == 409
    assert "cancelled" in beat.json()["detail"]
    done = worker.request("POST", f"/api/v1/worker/leases/{token}/complete", {"result": {}})
    assert done.status_code == 409
    # The cancelled 8-GPU job is not handed out either.
    assert worker.claim().status_code == 204


def test_list_filters_and_pages(
    client: TestClient, approved: tuple[Wallet, dict[str, str]]
) -> None:
    _, headers = approved
    ids = [_post(client, headers)["job_id"] for _ in range(3)]
    client.post(f"/api/v1/jobs/{ids[0]}/cancel", headers=headers)
    queued = client.get("/api/v1/jobs?status=queued", headers=headers).json()
    assert queued["count"] == 2 and {j["job_id"] for j in queued["data"]} == set(ids[1:])
    page = client.get("/api/v1/jobs?limit=1&offset=1", headers=headers).json()
    assert page["count"] == 3 and len(page["data"]) == 1
    assert client.get("/api/v1/jobs?status=bogus", headers=headers).status_code == 422
