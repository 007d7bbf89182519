"""Resumable uploads (`POST .../uploads`, `PUT .../uploads/{id}`), played as the attacker.

Each test is an attack on the upload protocol with its honest twin: a client that sends
more than it declared, chunks at the wrong offset, a file that does not hash to what was
declared, a forged or replayed chunk, names and ids that try to leave their directory, a
stranger writing into another lease's session. The refused request leaves nothing behind:
neither staged bytes nor a blob under the claimed hash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
from collections.abc import Callable
from typing import Any

import pytest
from api_support import NETWORK, Wallet, Worker, job_spec
from fastapi.testclient import TestClient

from api.storage import LocalBlobStore
from proofnet.messages.worker_auth import request_target, sign_request_headers

RESULTS = [
    {"path": "results/metrics.json", "kind": "json"},
    {"path": "out/**/*.bin", "kind": "model"},
]


def _lease(client: TestClient, headers: dict[str, str], worker: Worker) -> str:
    spec = job_spec(gpus=0)
    spec["results"] = RESULTS
    posted = client.post("/api/v1/jobs", json={"spec": spec}, headers=headers)
    assert posted.status_code == 201, posted.text
    worker.register([])
    claimed = worker.claim()
    assert claimed.status_code == 200, claimed.text
    return str(claimed.json()["lease_token"])


def _declare(worker: Worker, token: str, name: str, data: bytes, **over: Any) -> Any:
    body = {"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), **over}
    return worker.request("POST", f"/api/v1/worker/leases/{token}/uploads", body)


def _chunk(
    worker: Worker,
    token: str,
    upload_id: str,
    body: bytes,
    content_range: str | None,
    *,
    signed_body: bytes | None = None,
    nonce: str | None = None,
) -> Any:
    """One signed chunk; `signed_body` signs other bytes than are sent (a forgery)."""
    path = f"/api/v1/worker/leases/{token}/uploads/{upload_id}"
    assert worker.clock is not None
    headers = sign_request_headers(
        worker.key,
        network=NETWORK,
        method="PUT",
        path=request_target(path),
        body=body if signed_body is None else signed_body,
        timestamp=int(worker.clock().timestamp()),
        nonce=nonce or secrets.token_hex(16),
    )
    headers["content-type"] = "application/octet-stream"
    if content_range is not None:
        headers["content-range"] = content_range
    return worker.client.put(path, content=body, headers=headers)


def _state(worker: Worker, token: str, upload_id: str) -> dict[str, Any]:
    answer = worker.request("GET", f"/api/v1/worker/leases/{token}/uploads/{upload_id}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _staged(store: LocalBlobStore) -> list[str]:
    return sorted(p.name for p in store.staging_dir.rglob("*.part"))


@pytest.fixture
def leased(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    store: LocalBlobStore,
) -> tuple[Worker, str, dict[str, str]]:
    _, headers = approved
    worker = worker_factory()
    return worker, _lease(client, headers, worker), headers


def test_chunks_in_order_store_the_file_and_a_redeclaration_resumes(
    leased: tuple[Worker, str, dict[str, str]], store: LocalBlobStore, client: TestClient
) -> None:
    worker, token, _ = leased
    data = os.urandom(10_000)
    digest = hashlib.sha256(data).hexdigest()
    first = _declare(worker, token, "out/model.bin", data)
    assert first.status_code == 201, first.text
    session = first.json()
    assert session["offset"] == 0 and not session["complete"] and session["id"]
    upload_id = session["id"]

    ok = _chunk(worker, token, upload_id, data[:4000], f"bytes 0-3999/{len(data)}")
    assert ok.status_code == 200, ok.text
    assert ok.json()["offset"] == 4000 and not ok.json()["complete"]
    # A worker that lost the id (restart) declares the same file again: same session, and
    # the offset tells it where to go on.
    again = _declare(worker, token, "out/model.bin", data).json()
    assert again["id"] == upload_id and again["offset"] == 4000
    assert _state(worker, token, upload_id)["offset"] == 4000

    done = _chunk(worker, token, upload_id, data[4000:], f"bytes 4000-9999/{len(data)}")
    assert done.status_code == 200, done.text
    answer = done.json()
    assert answer["complete"] and answer["result"]["sha256"] == digest
    assert store.read_bytes(digest) == data
    assert _staged(store) == []
    # Declaring it once more: already stored, nothing to send.
    stored = _declare(worker, token, "out/model.bin", data).json()
    assert stored["complete"] and stored["id"] is None and stored["offset"] == len(data)
    # The session is gone once stored.
    gone = worker.request("GET", f"/api/v1/worker/leases/{token}/uploads/{upload_id}")
    assert gone.status_code == 404


def test_an_empty_file_completes_with_an_empty_chunk(
    leased: tuple[Worker, str, dict[str, str]], store: LocalBlobStore
) -> None:
    worker, token, _ = leased
    session = _declare(worker, token, "out/empty.bin", b"").json()
    done = _chunk(worker, token, session["id"], b"", "bytes */0")
    assert done.status_code == 200, done.text
    assert done.json()["result"]["sha256"] == hashlib.sha256(b"").hexdigest()


def test_a_chunk_at_the_wrong_offset_is_refused_and_changes_nothing(
    leased: tuple[Worker, str, dict[str, str]], store: LocalBlobStore
) -> None:
    worker, token, _ = leased
    data = os.urandom(3000)
    upload_id = _declare(worker, token, "out/a.bin", data).json()["id"]
    # Skipping ahead (a hole) and going back (overwriting) are both refused.
    ahead = _chunk(worker, token, upload_id, data[1000:2000], "bytes 1000-1999/3000")
    assert ahead.status_code == 409 and "send from byte 0" in ahead.json()["detail"]
    assert _chunk(worker, token, upload_id, data[:1000], "bytes 0-999/3000").status_code == 200
    back = _chunk(worker, token, upload_id, b"X" * 500, "bytes 500-999/3000")
    assert back.status_code == 409 and "send from byte 1000" in back.json()["detail"]
    assert _state(worker, token, upload_id)["offset"] == 1000
    # The honest twin carries on and the file is exactly the declared bytes.
    assert _chunk(worker, token, upload_id, data[1000:], "bytes 1000-2999/3000").status_code == 200
    assert store.read_bytes(hashlib.sha256(data).hexdigest()) == data


def test_more_bytes_than_declared_are_refused_and_leave_nothing(
    leased: tuple[Worker, str, dict[str, str]], store: LocalBlobStore
) -> None:
    worker, token, _ = leased
    data = os.urandom(2000)
    upload_id = _declare(worker, token, "out/a.bin", data).json()["id"]
    # A range past the declared size.
    past = _chunk(worker, token, upload_id, data + b"more", "bytes 0-2003/2000")
    assert past.status_code == 400 and "2000" in past.json()["detail"]
    # A range that claims another total size.
    total = _chunk(worker, token, upload_id, data, "bytes 0-1999/5000")
    assert total.status_code == 400 and "5000" in total.json()["detail"]
    # A body longer than its (honest-looking) range: cut off, nothing kept.
    longer = _chunk(worker, token, upload_id, data[:1000] + b"smuggled", "bytes 0-999/2000")
    assert longer.status_code == 400 and "longer" in longer.json()["detail"]
    # ... and shorter.
    shorter = _chunk(worker, token, upload_id, data[:10], "bytes 0-999/2000")
    assert shorter.status_code == 400 and "10 bytes" in shorter.json()["detail"]
    # No range at all.
    assert _chunk(worker, token, upload_id, data[:10], None).status_code == 400
    assert _state(worker, token, upload_id)["offset"] == 0
    assert [p.stat().st_size for p in store.staging_dir.rglob("*.part")] == [0]
    # A declaration past the per-file limit never gets a session.
    client = worker.client
    config = client.app.state.config  # type: ignore[attr-defined]
    client.app.state.config = dataclasses.replace(config, max_upload_bytes=1999)  # type: ignore[attr-defined]
    too_big = _declare(worker, token, "out/b.bin", data)
    assert too_big.status_code == 413 and "the limit is 1999" in too_big.json()["detail"]


def test_a_file_that_hashes_otherwise_is_stored_under_no_name(
    leased: tuple[Worker, str, dict[str, str]], store: LocalBlobStore
) -> None:
    worker, token, _ = leased
    data = os.urandom(4096)
    claimed = hashlib.sha256(b"what the worker claims it sends").hexdigest()
    upload_id = _declare(worker, token, "out/a.bin", data, sha256=claimed).json()["id"]
    wrong = _chunk(worker, token, upload_id, data, "bytes 0-4095/4096")
    assert wrong.status_code == 400 and "nothing was stored" in wrong.json()["detail"]
    assert not store.exists(claimed)
    assert not store.exists(hashlib.sha256(data).hexdigest())
    assert _staged(store) == []  # the session is dropped: start over
    gone = worker.request("GET", f"/api/v1/worker/leases/{token}/uploads/{upload_id}")
    assert gone.status_code == 404


def test_forged_and_replayed_chunks_are_refused_and_cut_off(
    leased: tuple[Worker, str, dict[str, str]], store: LocalBlobStore
) -> None:
    worker, token, _ = leased
    data = os.urandom(2048)
    upload_id = _declare(worker, token, "out/a.bin", data).json()["id"]
    # Someone on the path swaps the chunk's bytes: the signature covers other bytes.
    forged = _chunk(
        worker, token, upload_id, b"E" * 1024, "bytes 0-1023/2048", signed_body=data[:1024]
    )
    assert forged.status_code == 401
    assert _state(worker, token, upload_id)["offset"] == 0
    nonce = secrets.token_hex(16)
    ok = _chunk(worker, token, upload_id, data[:1024], "bytes 0-1023/2048", nonce=nonce)
    assert ok.status_code == 200
    # The captured request replayed as the next chunk (right offset, same bytes and nonce).
    replay = _chunk(worker, token, upload_id, data[:1024], "bytes 1024-2047/2048", nonce=nonce)
    assert replay.status_code == 401 and "replay" in replay.json()["detail"]
    assert _state(worker, token, upload_id)["offset"] == 1024
    # A stranger (another registered worker) cannot write into this lease's session.
    thief = Worker(worker.client, clock=worker.clock)
    thief.register([])
    stolen = _chunk(thief, token, upload_id, data[1024:], "bytes 1024-2047/2048")
    assert stolen.status_code == 404 and "no such lease" in stolen.json()["detail"]
    assert _state(worker, token, upload_id)["offset"] == 1024


@pytest.mark.parametrize(
    "name",
    ["../../etc/passwd", "out/../../x.bin", "/abs/out/x.bin", "out/a\\..\\b.bin", "out/./x.bin"],
)
def test_names_that_leave_the_job_are_refused(
    leased: tuple[Worker, str, dict[str, str]], store: LocalBlobStore, name: str
) -> None:
    worker, token, _ = leased
    refused = _declare(worker, token, name, b"x")
    assert refused.status_code in (400, 422), refused.text
    assert _staged(store) == []


def test_upload_ids_that_leave_the_staging_dir_are_refused(
    leased: tuple[Worker, str, dict[str, str]], store: LocalBlobStore
) -> None:
    worker, token, _ = leased
    upload_id = _declare(worker, token, "out/a.bin", b"xyz").json()["id"]
    for bad in ("..%2F..%2Fblobs", "%2E%2E", upload_id.upper(), upload_id + "0", "0" * 32):
        answer = _chunk(worker, token, bad, b"xyz", "bytes 0-2/3")
        assert answer.status_code == 404, (bad, answer.text)
    assert _state(worker, token, upload_id)["offset"] == 0


def test_uploads_in_flight_are_capped_per_lease(
    leased: tuple[Worker, str, dict[str, str]],
    store: LocalBlobStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each open session holds disk on the API host: a lease cannot open more than it may
    store, but resuming one it has is never refused."""
    from api.services import results

    monkeypatch.setattr(results, "MAX_RESULTS_PER_LEASE", 2)
    worker, token, _ = leased
    first = _declare(worker, token, "out/a.bin", b"a")
    assert first.status_code == 201
    assert _declare(worker, token, "out/b.bin", b"b").status_code == 201
    third = _declare(worker, token, "out/c.bin", b"c")
    assert third.status_code == 413 and "in progress" in third.json()["detail"]
    again = _declare(worker, token, "out/a.bin", b"a")
    assert again.status_code == 201 and again.json()["id"] == first.json()["id"]
    # Finishing one frees its place.
    done = _chunk(worker, token, first.json()["id"], b"a", "bytes 0-0/1")
    assert done.status_code == 200 and done.json()["complete"]
    assert _declare(worker, token, "out/c.bin", b"c").status_code == 201
