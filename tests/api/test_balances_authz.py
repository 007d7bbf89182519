"""Cross-user authorization: one signed-in user can never read or change another user's
jobs, results, logs, usage, estimates, balances or notification settings."""

from __future__ import annotations

from collections.abc import Callable

from api_support import Wallet, Worker, job_spec, sign_in
from fastapi.testclient import TestClient


def test_nobody_reads_another_users_private_data(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    owner_wallet, owner = approved
    intruder_wallet = Wallet()
    intruder = sign_in(client, intruder_wallet)
    client.put(
        "/api/v1/notifications/webhook",
        json={"url": "http://127.0.0.1:9/owner-hook"},
        headers=owner,
    )
    worker = worker_factory()
    worker.register([("NVIDIA A100 80GB", 81920)])
    posted = client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=owner)
    job_id = posted.json()["job_id"]
    lease = worker.claim().json()["lease_token"]
    assert worker.request("POST", f"/api/v1/worker/leases/{lease}/complete", {}).status_code == 200

    job_reads = [
        f"/api/v1/jobs/{job_id}",
        f"/api/v1/jobs/{job_id}/status",
        f"/api/v1/jobs/{job_id}/estimate",
        f"/api/v1/jobs/{job_id}/results",
        f"/api/v1/jobs/{job_id}/results/model.pt",
        f"/api/v1/jobs/{job_id}/logs",
        f"/api/v1/jobs/{job_id}/usage",
    ]
    for path in job_reads:
        # The owner can read it (or it is simply absent, for the result file) ...
        assert client.get(path, headers=owner).status_code in (200, 404), path
        # ... the intruder sees no such job, and anonymous callers must sign in.
        denied = client.get(path, headers=intruder)
        assert denied.status_code == 404, (path, denied.status_code)
        assert "train.py" not in denied.text and "status" not in denied.json()
        assert client.get(path).status_code == 401, path
    assert client.get("/api/v1/jobs", headers=intruder).json()["count"] == 0
    assert client.post(f"/api/v1/jobs/{job_id}/cancel", headers=intruder).status_code == 404

    balance = f"/api/v1/balances/{owner_wallet.address}"
    assert client.get(balance, headers=owner).status_code == 200
    assert client.get(balance, headers=intruder).status_code == 403

    assert client.get("/api/v1/notifications", headers=intruder).json()["webhook"] is None
    assert client.get("/api/v1/notifications/deliveries", headers=intruder).json()["count"] == 0
    assert client.get("/api/v1/notifications/deliveries", headers=owner).json()["count"] == 1
    # The intruder's own webhook never replaces or reveals the owner's.
    mine = client.put(
        "/api/v1/notifications/webhook", json={"url": "https://evil.example/x"}, headers=intruder
    )
    assert mine.status_code == 200
    owner_view = client.get("/api/v1/notifications", headers=owner).json()
    assert owner_view["webhook"]["url"] == "http://127.0.0.1:9/owner-hook"
