"""Worker uploads under a lease (results, logs, metering) and the owner reading them back."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from api_support import NETWORK, FakeClock, Wallet, Worker, job_spec
from fastapi.testclient import TestClient

from api.services import results as results_service
from api.storage import DigestMismatch, LocalBlobStore
from proofnet.messages.result_paths import ResultNameError, check_result_name, glob_matches
from proofnet.messages.worker_auth import request_target, sign_request_headers


def _put(worker: Worker, path: str, data: bytes, **headers: str) -> Any:
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
    signed.update(headers)
    return worker.client.request("PUT", path, content=data, headers=signed)


def _leased_job(
    client: TestClient,
    headers: dict[str, str],
    worker: Worker,
    results: list[dict[str, str]] | None = None,
) -> tuple[str, str]:
    spec = job_spec(gpus=0)
    spec["results"] = results or [
        {"path": "results/metrics.json", "kind": "json"},
        {"path": "out/**/*.bin", "kind": "model"},
    ]
    posted = client.post("/api/v1/jobs", json={"spec": spec}, headers=headers)
    assert posted.status_code == 201, posted.text
    worker.register([])
    claimed = worker.claim()
    assert claimed.status_code == 200, claimed.text
    return str(posted.json()["job_id"]), str(claimed.json()["lease_token"])


def test_result_upload_is_hashed_stored_and_served_to_the_owner_only(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    store: LocalBlobStore,
) -> None:
    _, headers = approved
    worker = worker_factory()
    job_id, token = _leased_job(client, headers, worker)
    data = b'{"accuracy": "0.9"}\n'
    digest = hashlib.sha256(data).hexdigest()

    up = _put(worker, f"/api/v1/worker/leases/{token}/results/results/metrics.json", data)
    assert up.status_code == 200, up.text
    assert up.json()["sha256"] == digest and up.json()["size"] == len(data)
    assert store.read_bytes(digest) == data

    # A name with a space and nested dirs: the signature covers the decoded path.
    weights = b"\x00\x01" * 1000
    name = "out/run 1/model.bin"
    up2 = _put(
        worker, f"/api/v1/worker/leases/{token}/results/{quote(name)}", weights,
        **{"X-Content-SHA256": hashlib.sha256(weights).hexdigest()},
    )  # fmt: skip
    assert up2.status_code == 200, up2.text

    from api_support import release_results

    release_results(client, job_id)  # results reach the submitter with the verdict
    listed = client.get(f"/api/v1/jobs/{job_id}/results", headers=headers)
    assert listed.status_code == 200
    assert {r["name"]: r["sha256"] for r in listed.json()} == {
        "results/metrics.json": digest,
        name: hashlib.sha256(weights).hexdigest(),
    }
    got = client.get(f"/api/v1/jobs/{job_id}/results/results/metrics.json", headers=headers)
    assert got.status_code == 200 and got.content == data
    assert got.headers["x-content-sha256"] == digest

    stranger = Wallet()
    from api_support import sign_in

    other = sign_in(client, stranger)
    assert client.get(f"/api/v1/jobs/{job_id}/results", headers=other).status_code == 404
    assert (
        client.get(f"/api/v1/jobs/{job_id}/results/results/metrics.json", headers=other).status_code
        == 404
    )
    assert client.get(f"/api/v1/jobs/{job_id}/results").status_code == 401


def test_undeclared_oversize_mismatched_and_unsafe_uploads_are_refused(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    store: LocalBlobStore,
) -> None:
    _, headers = approved
    worker = worker_factory()
    _, token = _leased_job(client, headers, worker)
    base = f"/api/v1/worker/leases/{token}/results/"

    undeclared = _put(worker, base + "results/secret.txt", b"x")
    assert undeclared.status_code == 400
    assert "not declared" in undeclared.json()["detail"]
    # Percent-encoded so the client sends it as is; the API sees out/../results/...
    escape = _put(worker, base + "out/%2E%2E/results/metrics.json", b"x")
    assert escape.status_code == 400 and "'..'" in escape.json()["detail"]
    wrong = _put(worker, base + "results/metrics.json", b"x", **{"X-Content-SHA256": "0" * 64})
    assert wrong.status_code == 400 and "hashes to" in wrong.json()["detail"]

    # The per-file upload limit (not the JSON body limit) refuses a file before it streams.
    app = client.app
    app.state.config = dataclasses.replace(app.state.config, max_upload_bytes=4096)  # type: ignore[attr-defined]
    big = _put(worker, base + "out/big.bin", b"\0" * 4097)
    assert big.status_code == 413 and "the limit is 4096" in big.json()["detail"]
    assert _put(worker, base + "out/fits.bin", b"\0" * 4096).status_code == 200
    fits = hashlib.sha256(b"\0" * 4096).hexdigest()
    assert store.exists(fits)
    (store._path(fits)).unlink()
    # ... and no staged bytes were left behind by the refused or one-shot uploads.
    assert not list(store.staging_dir.rglob("*.part"))
    # Nothing was recorded for the refused uploads.
    assert not list((store.root).glob("??/??/*"))


def test_uploads_on_a_stale_lease_are_refused(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
) -> None:
    _, headers = approved
    worker = worker_factory()
    _, token = _leased_job(client, headers, worker)
    clock.advance(10_000)  # the lease expired
    stale = _put(worker, f"/api/v1/worker/leases/{token}/results/results/metrics.json", b"{}")
    assert stale.status_code == 409
    logs = worker.request(
        "POST",
        f"/api/v1/worker/leases/{token}/logs",
        {"lines": [{"at": 1.0, "stream": "stdout", "text": "late"}]},
    )
    assert logs.status_code == 409
    thief = worker_factory()
    thief.register([])
    stolen = _put(thief, f"/api/v1/worker/leases/{token}/results/results/metrics.json", b"{}")
    assert stolen.status_code == 404


def test_logs_are_appended_bounded_and_paged(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, headers = approved
    worker = worker_factory()
    job_id, token = _leased_job(client, headers, worker)
    monkeypatch.setattr(results_service, "MAX_LOG_LINES_PER_JOB", 5)
    path = f"/api/v1/worker/leases/{token}/logs"
    first = worker.request(
        "POST",
        path,
        {
            "lines": [
                {"at": 1_700_000_000.5, "stream": "stdout", "text": f"line {i}"} for i in range(4)
            ]
            + [{"at": 1_700_000_001.0, "stream": "stderr", "text": "y" * 5000}]
        },
    )
    assert first.status_code == 200, first.text
    assert first.json() == {"stored": 5, "truncated_lines": 1, "dropped_old": 0}
    second = worker.request(
        "POST", path, {"lines": [{"at": 1_700_000_002.0, "stream": "worker", "text": "done"}]}
    )
    assert second.json()["dropped_old"] == 1

    page = client.get(f"/api/v1/jobs/{job_id}/logs?limit=3", headers=headers).json()
    assert [line["text"] for line in page["lines"]] == ["line 1", "line 2", "line 3"]
    rest = client.get(
        f"/api/v1/jobs/{job_id}/logs?after={page['next_after']}", headers=headers
    ).json()
    assert [line["stream"] for line in rest["lines"]] == ["stderr", "worker"]
    assert len(rest["lines"][0]["text"]) == results_service.MAX_LOG_LINE_CHARS

    too_many = worker.request(
        "POST", path, {"lines": [{"at": 1.0, "stream": "stdout", "text": "x"}] * 1001}
    )
    assert too_many.status_code == 422
    bad_stream = worker.request(
        "POST", path, {"lines": [{"at": 1.0, "stream": "secret", "text": "x"}]}
    )
    assert bad_stream.status_code == 422


def test_usage_report_is_kept_per_lease(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    worker = worker_factory()
    job_id, token = _leased_job(client, headers, worker)
    assert client.get(f"/api/v1/jobs/{job_id}/usage", headers=headers).json() is None
    usage = {
        "duration_s": 12.5,
        "gpu_seconds": 25.0,
        "gpu_busy_seconds": 20.0,
        "gpu_count": 2,
        "energy_j": 3000.0,
        "energy_source": "counter",
        "samples": 13,
        "running": False,
    }
    sent = worker.request("POST", f"/api/v1/worker/leases/{token}/telemetry", usage)
    assert sent.status_code == 200, sent.text
    usage["gpu_seconds"] = 26.0
    worker.request("POST", f"/api/v1/worker/leases/{token}/telemetry", usage)
    got = client.get(f"/api/v1/jobs/{job_id}/usage", headers=headers).json()
    assert got["usage"]["gpu_seconds"] == 26.0 and got["usage"]["energy_source"] == "counter"
    negative = worker.request(
        "POST", f"/api/v1/worker/leases/{token}/telemetry", {**usage, "gpu_seconds": -1}
    )
    assert negative.status_code == 422


def test_blob_store_verifies_digests(tmp_path: Path) -> None:
    blobs = LocalBlobStore(tmp_path)
    ref = blobs.put([b"ab", b"c"])
    assert ref.sha256 == hashlib.sha256(b"abc").hexdigest() and ref.size == 3
    assert blobs.exists(ref.sha256) and blobs.size(ref.sha256) == 3
    with pytest.raises(DigestMismatch):
        blobs.put_bytes(b"abd", expected_sha256=ref.sha256)
    assert blobs.read_bytes(ref.sha256) == b"abc"
    assert not list((tmp_path / "tmp").iterdir())
    with pytest.raises(KeyError):
        blobs.read_bytes("0" * 64)
    with pytest.raises(ValueError):
        blobs.exists("../../etc/passwd")


@pytest.mark.parametrize(
    ("glob", "name", "expected"),
    [
        ("results/*.json", "results/metrics.json", True),
        ("results/*.json", "results/sub/metrics.json", False),
        ("results/**/*.json", "results/metrics.json", True),
        ("results/**/*.json", "results/a/b/metrics.json", True),
        ("**", "anything/at/all", True),
        ("model.bin", "model.bin", True),
        ("model.bin", "x/model.bin", False),
    ],
)
def test_result_globs(glob: str, name: str, expected: bool) -> None:
    assert glob_matches(glob, name) is expected


@pytest.mark.parametrize("name", ["", "/etc/passwd", "a/../b", "./a", "a//b", "a\\b", "a\nb"])
def test_unsafe_result_names(name: str) -> None:
    with pytest.raises(ResultNameError):
        check_result_name(name)
