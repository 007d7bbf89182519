"""Result destinations in two phases: the API's store before completion, the submitter's own
destinations (webhook, pre-signed S3) only after the oracles' verdict releases the results.

The attacks: a worker completes without the API store holding the results (refused, the
destination named); a worker reports a delivery to the submitter's webhook before the verdict
(refused: an honest worker never sends early, and the record never shows it as delivered);
another worker reports for the lease (refused). The honest twins: the store acknowledged,
the job completes; the verdict releases, the provider delivers and reports.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from api_support import NETWORK, Wallet, Worker, job_spec, post_verdict, release_results
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


def _after_release(worker: Worker, job_id: str, reports: list[dict[str, Any]]) -> Any:
    return worker.request("POST", f"/api/v1/worker/jobs/{job_id}/deliveries", {"reports": reports})


def test_the_submitters_destinations_are_delivered_only_after_the_verdict(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    worker = worker_factory()
    job_id, token = _lease(client, headers, worker, [{"kind": "api"}, HOOK])

    # Nothing reported yet: not complete (the API's store must hold the results).
    refused = _complete(worker, token)
    assert refused.status_code == 409 and "destination 0 (api) was not reported" in refused.text

    # The webhook, before the verdict: refused, under the lease as after it.
    _upload(worker, token, "out/metrics.json", METRICS)
    hook_ack = {"index": 1, "kind": "webhook", "acknowledged": True, "results": [ACK]}
    early = _report(worker, token, [hook_ack])
    assert early.status_code == 409 and "oracles' verdict" in early.text, early.text

    # The store acknowledged: the job completes; the webhook waits for the verdict.
    store_ack = {"index": 0, "kind": "api", "acknowledged": True, "results": [ACK]}
    assert _report(worker, token, [store_ack]).json()["pending"] == []
    done = _complete(worker, token)
    assert done.status_code == 200, done.text
    assert client.get(f"/api/v1/jobs/{job_id}", headers=headers).json()["status"] == "completed"
    view = client.get(f"/api/v1/jobs/{job_id}/deliveries", headers=headers).json()
    assert [(d["kind"], d["state"]) for d in view["data"]] == [
        ("api", "acknowledged"),
        ("webhook", "pending"),
    ]
    assert "oracles' verdict" in view["data"][1]["reason"] and view["complete"] is False
    early = _after_release(worker, job_id, [hook_ack])
    assert early.status_code == 409 and "not released" in early.text, early.text

    # A provider's-fault verdict: never released, never delivered.
    post_verdict(client, job_id, status="rejected", fault="provider")
    assert _after_release(worker, job_id, [hook_ack]).status_code == 409

    # The verdict releases: the provider delivers; a refusal is kept with its reason.
    release_results(client, job_id)
    reason = "refused: over the webhook's inline cap of 262144 bytes per result"
    refusal = {"index": 1, "kind": "webhook", "acknowledged": False, "reason": reason}
    answer = _after_release(worker, job_id, [refusal])
    assert answer.json()["pending"] == [f"destination 1 (webhook) was not acknowledged: {reason}"]
    assert _after_release(worker, job_id, [hook_ack]).json()["pending"] == []
    view = client.get(f"/api/v1/jobs/{job_id}/deliveries", headers=headers).json()
    assert view["complete"] is True
    assert view["data"][1]["results"] == [dict(ACK, etag=None)]
    # Only the submitter's own destinations are reported after completion.
    assert _after_release(worker, job_id, [store_ack]).status_code == 400


def test_only_the_provider_that_completed_the_job_reports_after_the_verdict(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    worker, intruder = worker_factory(), worker_factory()
    job_id, token = _lease(client, headers, worker, [HOOK])
    assert _complete(worker, token).status_code == 200
    release_results(client, job_id)
    intruder.register([("L4", 24576)])
    acked = {"index": 0, "kind": "webhook", "acknowledged": True, "results": [ACK]}
    assert _after_release(intruder, job_id, [acked]).status_code == 404
    assert _after_release(worker, job_id, [acked]).json()["pending"] == []


def test_reports_must_match_the_specs_destinations(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    worker = worker_factory()
    job_id, token = _lease(client, headers, worker, [{"kind": "s3_presigned", "puts": [PUT]}])
    assert _complete(worker, token).status_code == 200
    release_results(client, job_id)
    # A report for a destination the spec does not name, or of another kind, counts for nothing.
    wrong_kind = {"index": 0, "kind": "webhook", "acknowledged": True}
    assert _after_release(worker, job_id, [wrong_kind]).status_code == 400
    beyond = {"index": 3, "kind": "s3_presigned", "acknowledged": True}
    assert _after_release(worker, job_id, [beyond]).status_code == 400
    acked = {"index": 0, "kind": "s3_presigned", "acknowledged": True, "results": [ACK]}
    assert _after_release(worker, job_id, [acked]).json()["pending"] == []


def test_another_workers_lease_cannot_report_deliveries(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    worker, intruder = worker_factory(), worker_factory()
    _, token = _lease(client, headers, worker, [{"kind": "api"}])
    _upload(worker, token, "out/metrics.json", METRICS)
    intruder.register([("L4", 24576)])
    acked = {"index": 0, "kind": "api", "acknowledged": True, "results": [ACK]}
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
