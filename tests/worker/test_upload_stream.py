"""The worker's streaming uploads against a real API over HTTP: a connection dropped in the
middle of a chunk resumes to the same file, two requests on one session never interleave,
and (slow) a file far larger than the memory either side uses streams through."""

from __future__ import annotations

import fcntl
import hashlib
import os
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_fixtures import (
    NETWORK,
    ApiServer,
    RegisteredWorker,
    make_api_server,
    register_worker,
)
from api_process import api_process

from api.client_cli import JobClient, JobCliError
from api.clock import utcnow
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.services.users import add_senior
from api.storage import LocalBlobStore
from proofnet.messages.worker_auth import sign_request_headers
from worker.api_client import ApiClient, ApiUnavailable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from api_support import RELEASE_ORACLE, Wallet, job_spec, sign_in  # noqa: E402

MiB = 1 << 20


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiServer]:
    yield from make_api_server(tmp_path)


def _leased(api: ApiServer, tmp: Path) -> tuple[RegisteredWorker, str]:
    worker, token, _ = _leased_job(api, tmp)
    return worker, token


def _leased_job(api: ApiServer, tmp: Path) -> tuple[RegisteredWorker, str, str]:
    spec = job_spec(gpus=0)
    spec["results"] = [{"path": "out/*.bin", "kind": "model"}]
    job_id = api.submit(spec, escrow=False)
    worker = register_worker(api, tmp / "worker.skey")
    with ApiClient(api.url, worker.key, NETWORK) as client:
        claimed = client.claim()
    assert claimed is not None
    return worker, claimed.lease_token, job_id


def _file(path: Path, size: int) -> str:
    digest = hashlib.sha256()
    with path.open("wb") as f:
        for i in range(0, size, MiB):
            block = hashlib.sha256(str(i).encode()).digest() * (min(MiB, size - i) // 32)
            block += b"\0" * (min(MiB, size - i) - len(block))
            f.write(block)
            digest.update(block)
    return digest.hexdigest()


class _BreakingStream(httpx.SyncByteStream):
    """Sends `keep` bytes of the body, then fails as a reset connection would."""

    def __init__(self, inner: Any, keep: int) -> None:
        self.inner, self.keep = inner, keep

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        for block in self.inner:
            if sent + len(block) > self.keep:
                yield block[: self.keep - sent]
                raise httpx.WriteError("connection reset by peer (test)")
            sent += len(block)
            yield block


class _DropsOneChunk(httpx.HTTPTransport):
    """A real transport that breaks the `nth` chunk upload halfway through its body."""

    def __init__(self, nth: int, keep: int) -> None:
        super().__init__()
        self.nth, self.keep, self.puts = nth, keep, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "PUT" and "/uploads/" in request.url.path:
            self.puts += 1
            if self.puts == self.nth:
                request.stream = _BreakingStream(request.stream, self.keep)
        return super().handle_request(request)


def _wait_unlocked(staging: Path) -> None:
    """Wait until no request holds a session's lock (the broken one has been wound up)."""
    deadline = time.monotonic() + 60
    while True:
        free = True
        for lock in staging.rglob("*.lock"):
            fd = os.open(lock, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                free = False
            finally:
                os.close(fd)
        if free:
            return
        assert time.monotonic() < deadline, "the broken request never released its session"
        time.sleep(0.01)


def test_an_upload_broken_mid_chunk_resumes_from_the_api_offset(
    api: ApiServer, tmp_path: Path
) -> None:
    worker, token = _leased(api, tmp_path)
    source = tmp_path / "model.bin"
    digest = _file(source, 7 * MiB + 123)
    chunk = 2 * MiB
    # The third chunk (bytes 4..6 MiB) breaks after 1.5 MiB: the API has written some of
    # it to disk, but no signature vouched for it.
    broken = _DropsOneChunk(nth=3, keep=3 * MiB // 2)
    seen: list[int] = []
    with (
        ApiClient(api.url, worker.key, NETWORK, transport=broken) as client,
        pytest.raises(ApiUnavailable, match="broke off at byte 4194304"),
    ):
        client.upload_file(
            token, "out/model.bin", source, digest, chunk_bytes=chunk, on_progress=seen.append
        )
    assert seen == [0, 2 * MiB, 4 * MiB]
    staging = tmp_path / "blobs" / "staging"
    _wait_unlocked(staging)
    (part,) = staging.rglob("*.part")
    assert part.stat().st_size == 4 * MiB  # the unvouched half chunk was cut off again

    resumed: list[int] = []
    with ApiClient(api.url, worker.key, NETWORK) as client:
        result = client.upload_file(
            token, "out/model.bin", source, digest, chunk_bytes=chunk, on_progress=resumed.append
        )
    assert resumed[0] == 4 * MiB  # only the rest was sent
    assert result["sha256"] == digest and result["size"] == 7 * MiB + 123
    store = LocalBlobStore(tmp_path / "blobs")
    got = hashlib.sha256()
    for block in store.open_chunks(digest):
        got.update(block)
    assert got.hexdigest() == digest
    assert list(staging.rglob("*.part")) == []


def _put_chunk(
    api: ApiServer, worker: RegisteredWorker, path: str, body: Any, digest: str, size: int
) -> httpx.Response:
    """PUT a whole file as one chunk, signed, with no Content-Type (as a bare client would)."""
    signed = sign_request_headers(
        worker.key.signing_key,
        network=NETWORK,
        method="PUT",
        path=path,
        body_sha256=digest,  # the chunk is the whole file
    )
    signed["Content-Range"] = f"bytes 0-{size - 1}/{size}"
    signed["Content-Length"] = str(size)
    return httpx.put(api.url + path, content=body, headers=signed, timeout=60)


def test_a_chunk_without_a_content_type_streams_past_the_json_body_limit(
    api: ApiServer, tmp_path: Path
) -> None:
    """FastAPI reads a body without a content type as JSON, so the JSON limits once held such
    a chunk whole in memory and refused it past `max_body_bytes` (413): upload routes stream
    raw bytes and are exempt, whatever the content type."""
    worker, token = _leased(api, tmp_path)
    source = tmp_path / "model.bin"
    size = 3 * MiB
    assert size > api.config.max_body_bytes
    digest = _file(source, size)
    with ApiClient(api.url, worker.key, NETWORK) as client:
        declared = client._json(
            "POST",
            f"/api/v1/worker/leases/{token}/uploads",
            {"name": "out/model.bin", "size": size, "sha256": digest},
        )
    path = f"/api/v1/worker/leases/{token}/uploads/{declared['id']}"
    answer = _put_chunk(api, worker, path, source.read_bytes(), digest, size)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["sha256"] == digest
    assert LocalBlobStore(tmp_path / "blobs").size(digest) == size


def test_two_requests_on_one_session_never_interleave(api: ApiServer, tmp_path: Path) -> None:
    worker, token = _leased(api, tmp_path)
    source = tmp_path / "model.bin"
    size = 3 * MiB
    digest = _file(source, size)
    data = source.read_bytes()
    with ApiClient(api.url, worker.key, NETWORK) as client:
        declared = client._json(
            "POST",
            f"/api/v1/worker/leases/{token}/uploads",
            {"name": "out/model.bin", "size": size, "sha256": digest},
        )
        upload_id = declared["id"]
        path = f"/api/v1/worker/leases/{token}/uploads/{upload_id}"
        release = threading.Event()

        def slow_body() -> Iterator[bytes]:
            yield data[: 2 * MiB]  # enough for the API to write to disk
            release.wait(60)
            yield data[2 * MiB :]

        def send(body: Any) -> httpx.Response:
            return _put_chunk(api, worker, path, body, digest, size)

        first: dict[str, httpx.Response] = {}
        thread = threading.Thread(target=lambda: first.setdefault("r", send(slow_body())))
        thread.start()
        try:
            # The event: the API has written the first MiB of the held request to its part
            # file (it writes as the body streams in). The deadline only bounds a hang.
            staging = tmp_path / "blobs" / "staging"
            deadline = time.monotonic() + 120
            while not any(p.stat().st_size >= MiB for p in staging.rglob("*.part")):
                sizes = {p.name: p.stat().st_size for p in staging.rglob("*.part")}
                assert thread.is_alive(), f"the first request ended early: {first}"
                assert time.monotonic() < deadline, f"the part file never grew: {sizes}"
                time.sleep(0.01)
            # The same chunk again while the first is still streaming: refused at once.
            second = send(data)
            assert second.status_code == 409 and "another request" in second.json()["detail"]
        finally:
            release.set()
            thread.join(60)
        assert first["r"].status_code == 200, first["r"].text
        assert first["r"].json()["result"]["sha256"] == digest
    store = LocalBlobStore(tmp_path / "blobs")
    assert store.size(digest) == size


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


@pytest.mark.slow
def test_a_file_far_larger_than_memory_streams_through_both_sides(tmp_path: Path) -> None:
    """256 MiB up (worker) and down (the submitter's CLI) through an API process: the API's
    peak RSS and each client's Python heap grow by a few MiB, never by the file's size. The
    download reads the results as the product releases them: the worker completes the job
    and a trusted oracle's verdict releases them (api.services.result_release)."""
    size = 256 * MiB
    source = tmp_path / "big.bin"
    with source.open("wb") as f:  # sparse: no disk until the API stores it
        f.truncate(size)
    want = hashlib.sha256()
    with source.open("rb") as f:
        while block := f.read(8 * MiB):
            want.update(block)
    digest = want.hexdigest()
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * MiB)
    small_digest = hashlib.sha256(small.read_bytes()).hexdigest()
    trusted = (bytes(RELEASE_ORACLE.verify_key).hex(),)  # its verdicts release results
    with api_process(tmp_path / "api", lease_ttl_s=600, oracle_keys=trusted) as (
        url,
        db,
        process,
    ):
        config = ApiConfig(database_url=f"sqlite:///{db}", network=NETWORK)
        engine = make_engine(config.database_url)
        try:
            with httpx.Client(base_url=url, timeout=120) as http:
                wallet = Wallet()
                with open_session(engine) as session:
                    add_senior(session, config, wallet.address, utcnow())
                api = ApiServer(url, config, engine, sign_in(http, wallet), http)  # type: ignore[arg-type]
                worker, token, job_id = _leased_job(api, tmp_path)
                with ApiClient(url, worker.key, NETWORK, timeout_s=120) as client:
                    # Warm the paths up (imports, pools, first writes) before the baseline.
                    client.upload_file(token, "out/small.bin", small, small_digest)
                    before = _peak_rss_kib(process.pid)
                    tracemalloc.start()
                    result = client.upload_file(token, "out/big.bin", source, digest)
                    _, upload_peak = tracemalloc.get_traced_memory()
                    tracemalloc.stop()
                    client.complete(token, {"uploaded": 2})
                assert result["sha256"] == digest and result["size"] == size
                after_upload = _peak_rss_kib(process.pid)
                assert api.job(job_id)["status"] == "completed"
                cli = JobClient(url, wallet.signing_key, http=http, token_cache=tmp_path / "s")
                with pytest.raises(JobCliError, match="HTTP 409.*waiting for the oracles. verdict"):
                    cli.results(job_id, tmp_path / "early")  # no verdict yet: nothing served
                api.release(job_id)  # the oracle verified the attestation

                tracemalloc.start()
                saved = cli.results(job_id, tmp_path / "down")
                _, download_peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                after_download = _peak_rss_kib(process.pid)
        finally:
            engine.dispose()
    assert {r.name: r.sha256 for r in saved} == {
        "out/big.bin": digest,
        "out/small.bin": small_digest,
    }
    assert (tmp_path / "down" / "out" / "big.bin").stat().st_size == size
    grew = (after_upload - before) * 1024
    assert grew < 64 * MiB, f"the API's peak RSS grew by {grew / MiB:.0f} MiB on upload"
    grew = (after_download - before) * 1024
    assert grew < 64 * MiB, f"the API's peak RSS grew by {grew / MiB:.0f} MiB on download"
    assert upload_peak < 16 * MiB, f"the worker's heap peaked at {upload_peak / MiB:.0f} MiB"
    assert download_peak < 16 * MiB, f"the CLI's heap peaked at {download_peak / MiB:.0f} MiB"
