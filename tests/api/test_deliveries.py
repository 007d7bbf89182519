"""A job whose spec names result destinations completes only when every one acknowledged.

The attack: a worker (or a broken webhook) leaves a destination unacknowledged and tries to
complete the job anyway; the API refuses and names the destination. The honest twin reports
every destination acknowledged and completes; a spec without destinations completes as it
always did."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from api_support import NETWORK, Wallet, Worker, job_spec
from fastapi.testclient import TestClient

from proofnet.messages.worker_auth import request_target, sign_request_headers

HOOK = {"kind": "webhook", "url": "https://hooks.example/results"}
PUT = {"name": "out/metrics.json", "url": "https://bucket.example/m?X-Amz-Signature=ab"}
RESULTS = [{"path": "out/*.json", "kind": "json"}]
METRICS = b'{"loss": "0.25"}\n'
ACK = {"name": "out/metrics.json", "sha256": hashlib.sha256(METRICS).hexdigest(), "status": 200}


def _upload(worker: Worker, token: str, name: str, data: bytes) -> None:
    path = f"/api/v1/worker/leases/{token}/results/{name}"
    now = worker.clock() if worker.clock else None
    signed = sign_request_headers(
        worker.key,
        network=NETWORK,
        method="PUT",
        path=request_target(path),
        body=data,
        timestamp=int(now.timestamp()) if now else None,
    )
    signed["content-type"] = "application/octet-stream"
    answer = worker.client.request("PUT", path, content=data, headers=signed)
    assert answer.status_code == 200, answer.text


def _lease(
    client: TestClient, headers: dict[str, str], worker: Worker, destinations: list[Any]
) -> tuple[str, str]:
    spec = dict(job_spec(), results=RESULTS, destinations=destinations)
    posted = client.post("/api/v1/jobs", json={"spec": spec}, headers=headers)
    assert posted.status_code == 201, posted.text
    worker.register([("L4", 24576)])
    claimed = worker.claim()
    assert claimed.status_code == 200, claimed.text
    return str(posted.json()["job_id"]), str(claimed.json()["lease_token"])


def _report(worker: Worker, token: str, reports: list[dict[str, Any]]) -> Any:
    return worker.request("POST", f"/api/v1/worker/leases/{token}/deliveries", {"reports": reports})


def _complete(worker: Worker, token: str) -> Any:
    return worker.request("POST", f"/api/v1/worker/leases/{token}/complete", {"result": {}})


def test_a_job_with_an_unacknowledged_destination_is_not_complete(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    worker = worker_factory()
    job_id, token = _lease(client, headers, worker, [{"kind": "api"}, HOOK])

    # Nothing reported yet: not complete.
    refused = _complete(worker, token)
    assert refused.status_code == 409 and "destination 1 (webhook) was not reported" in refused.text

    # The webhook refused the result: still not complete, and the reason is kept.
    _upload(worker, token, "out/metrics.json", METRICS)
    reason = "refused: over the webhook's inline cap of 262144 bytes per result"
    answer = _report(
        worker,
        token,
        [
            {"index": 0, "kind": "api", "acknowledged": True, "results": [ACK]},
            {"index": 1, "kind": "webhook", "acknowledged": False, "reason": reason},
        ],
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["pending"] == [f"destination 1 (webhook) was not acknowledged: {reason}"]
    refused = _complete(worker, token)
    assert refused.status_code == 409 and "inline cap" in refused.text
    job = client.get(f"/api/v1/jobs/{job_id}", headers=headers).json()
    assert job["status"] == "leased"
    view = client.get(f"/api/v1/jobs/{job_id}/deliveries", headers=headers).json()
    assert [(d["kind"], d["state"]) for d in view["data"]] == [
        ("api", "acknowledged"),
        ("webhook", "refused"),
    ]
    assert view["data"][1]["reason"] == reason and view["complete"] is False

    # Every destination acknowledged: the job completes.
    hook_ack = {"index": 1, "kind": "webhook", "acknowledged": True, "results": [ACK]}
    assert _report(worker, token, [hook_ack]).json()["pending"] == []
    done = _complete(worker, token)
    assert done.status_code == 200, done.text
    assert client.get(f"/api/v1/jobs/{job_id}", headers=headers).json()["status"] == "completed"
    view = client.get(f"/api/v1/jobs/{job_id}/deliveries", headers=headers).json()
    assert view["complete"] is True
    assert view["data"][1]["results"] == [dict(ACK, etag=None)]


def test_reports_must_match_the_specs_destinations(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    worker = worker_factory()
    _, token = _lease(client, headers, worker, [{"kind": "s3_presigned", "puts": [PUT]}])
    # A report for a destination the spec does not name, or of another kind, counts for nothing.
    wrong_kind = {"index": 0, "kind": "webhook", "acknowledged": True}
    assert _report(worker, token, [wrong_kind]).status_code == 400
    beyond = {"index": 3, "kind": "s3_presigned", "acknowledged": True}
    assert _report(worker, token, [beyond]).status_code == 400
    assert _complete(worker, token).status_code == 409
    acked = {"index": 0, "kind": "s3_presigned", "acknowledged": True, "results": [ACK]}
    assert _report(worker, token, [acked]).json()["pending"] == []
    assert _complete(worker, token).status_code == 200


def test_another_workers_lease_cannot_report_deliveries(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    worker, intruder = worker_factory(), worker_factory()
    _, token = _lease(client, headers, worker, [HOOK])
    intruder.register([("L4", 24576)])
    acked = {"index": 0, "kind": "webhook", "acknowledged": True, "results": [ACK]}
    assert _report(intruder, token, [acked]).status_code == 404
    assert _complete(worker, token).status_code == 409


def test_the_api_store_is_acknowledged_only_for_what_it_holds(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    """The attack: a worker claims the API store acknowledged results it never uploaded."""
    _, headers = approved
    worker = worker_factory()
    _, token = _lease(client, headers, worker, [{"kind": "api"}])
    claimed = {"index": 0, "kind": "api", "acknowledged": True, "results": [ACK]}
    pending = _report(worker, token, [claimed]).json()["pending"]
    assert pending == [
        "destination 0 (api) was not acknowledged: the API store holds no upload of "
        "out/metrics.json with that hash under this lease"
    ]
    assert _complete(worker, token).status_code == 409
    # The honest twin: uploaded, then reported.
    _upload(worker, token, "out/metrics.json", METRICS)
    assert _report(worker, token, [claimed]).json()["pending"] == []
    assert _complete(worker, token).status_code == 200
