"""S3BlobStore against a real S3-compatible HTTP server (moto in server mode, on loopback)."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from api.blob_stores import blob_store_for
from api.storage import BlobMissing, DigestMismatch, LocalBlobStore, StorageError
from api.storage_s3 import S3BlobStore


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_url() -> Iterator[str]:
    port = _free_port()
    server = Path(sys.executable).with_name("moto_server")
    assert server.exists(), f"moto_server is not installed next to {sys.executable}"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    proc = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/moto-api/", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _store(url: str, bucket: str, **kw: object) -> S3BlobStore:
    client = boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    client.create_bucket(Bucket=bucket)
    return S3BlobStore(
        bucket,
        endpoint_url=url,
        region="us-east-1",
        access_key="test",
        secret_key="test",
        **kw,  # type: ignore[arg-type]
    )


def test_put_get_roundtrip_is_content_addressed(s3_url: str) -> None:
    store = _store(s3_url, "roundtrip", prefix="proofnet")
    data = b"model weights " * 1000
    ref = store.put([data[:5], data[5:]])
    assert ref.sha256 == hashlib.sha256(data).hexdigest() and ref.size == len(data)
    assert store.exists(ref.sha256) and store.size(ref.sha256) == len(data)
    assert store.read_bytes(ref.sha256) == data
    # The object key is the hash, under the prefix: what an operator sees in the bucket.
    keys = [o["Key"] for o in store.client.list_objects_v2(Bucket="roundtrip")["Contents"]]
    assert keys == [f"proofnet/blobs/{ref.sha256}"]
    # Same content again: same name, still one object.
    assert store.put_bytes(data, expected_sha256=ref.sha256) == ref
    assert store.client.list_objects_v2(Bucket="roundtrip")["KeyCount"] == 1


def test_declared_digest_is_verified(s3_url: str) -> None:
    store = _store(s3_url, "verify")
    wrong = hashlib.sha256(b"other").hexdigest()
    with pytest.raises(DigestMismatch):
        store.put_bytes(b"payload", expected_sha256=wrong)
    assert not store.exists(wrong)
    assert store.client.list_objects_v2(Bucket="verify")["KeyCount"] == 0
    with pytest.raises(ValueError):
        store.put_bytes(b"payload", expected_sha256="not-hex")


def test_missing_blob(s3_url: str) -> None:
    store = _store(s3_url, "missing")
    absent = hashlib.sha256(b"absent").hexdigest()
    assert not store.exists(absent)
    with pytest.raises(BlobMissing):
        store.open_chunks(absent)
    with pytest.raises(BlobMissing):
        store.size(absent)


def test_large_blob_streams_by_multipart_and_leaves_no_temporary(s3_url: str) -> None:
    store = _store(s3_url, "large", buffer_bytes=5 << 20)
    chunk = os.urandom(1 << 20)
    chunks = [chunk] * 19  # 19 MiB: three parts, the last one short
    want = hashlib.sha256(b"".join(chunks)).hexdigest()
    ref = store.put(iter(chunks), expected_sha256=want)
    assert ref.sha256 == want and ref.size == 19 << 20
    got = hashlib.sha256()
    pieces = 0
    for piece in store.open_chunks(want):
        got.update(piece)
        pieces += 1
    assert got.hexdigest() == want and pieces > 1  # streamed, not one read
    keys = [o["Key"] for o in store.client.list_objects_v2(Bucket="large")["Contents"]]
    assert keys == [f"blobs/{want}"]
    # A large upload that hashes otherwise is refused and its temporary object removed.
    with pytest.raises(DigestMismatch):
        store.put(iter(chunks[:7]), expected_sha256=want)
    keys = [o["Key"] for o in store.client.list_objects_v2(Bucket="large")["Contents"]]
    assert keys == [f"blobs/{want}"]
    uploads = store.client.list_multipart_uploads(Bucket="large").get("Uploads", [])
    assert uploads == []


def test_unreachable_bucket_is_a_storage_error(s3_url: str) -> None:
    store = S3BlobStore(
        "no-such-bucket",
        endpoint_url=s3_url,
        region="us-east-1",
        access_key="test",
        secret_key="test",
    )
    with pytest.raises(StorageError):
        store.put_bytes(b"x")


class _Settings:
    result_store = "s3"
    result_store_s3_bucket = "from-settings"
    result_store_s3_region = "us-east-1"
    result_store_s3_access_key = "test"
    result_store_s3_secret_key = "test"
    result_store_s3_prefix = "p/"
    result_store_s3_endpoint_url = ""


def test_settings_select_the_store(s3_url: str, tmp_path: Path) -> None:
    assert isinstance(blob_store_for(tmp_path), LocalBlobStore)
    settings = _Settings()
    settings.result_store_s3_endpoint_url = s3_url
    _store(s3_url, "from-settings")
    store = blob_store_for(tmp_path, settings)
    assert isinstance(store, S3BlobStore) and store.prefix == "p/"
    ref = store.put_bytes(b"hello")
    assert store.read_bytes(ref.sha256) == b"hello"
    settings.result_store = "ftp"
    with pytest.raises(ValueError, match="local' or 's3"):
        blob_store_for(tmp_path, settings)
    settings.result_store, settings.result_store_s3_bucket = "s3", ""
    with pytest.raises(ValueError, match="bucket"):
        blob_store_for(tmp_path, settings)


def test_a_staged_upload_streams_to_s3_by_multipart_and_reads_back_in_ranges(
    s3_url: str, tmp_path: Path
) -> None:
    store = _store(s3_url, "staged", buffer_bytes=5 << 20, staging_dir=tmp_path / "staging")
    staged = tmp_path / "staging" / "upload.part"
    staged.parent.mkdir()
    block = os.urandom(1 << 20)
    with staged.open("wb") as f:
        for _ in range(12):
            f.write(block)
    want = hashlib.sha256(block * 12).hexdigest()
    # A hash the bytes do not have: refused, nothing under either name, no upload left over.
    with pytest.raises(DigestMismatch):
        store.put_file(staged, sha256=hashlib.sha256(b"claimed").hexdigest())
    assert store.client.list_objects_v2(Bucket="staged")["KeyCount"] == 0
    assert store.client.list_multipart_uploads(Bucket="staged").get("Uploads", []) == []
    ref = store.put_file(staged, sha256=want)
    assert ref.sha256 == want and ref.size == 12 << 20
    assert not staged.exists()  # consumed
    tail = b"".join(store.open_chunks(want, start=(12 << 20) - 100))
    assert tail == block[-100:]


def test_chunked_uploads_through_the_api_land_in_s3(
    s3_url: str, tmp_path: Path, client: Any, approved: Any, worker_factory: Any
) -> None:
    from test_uploads import _chunk, _declare, _lease

    store = _store(s3_url, "through-api", buffer_bytes=5 << 20, staging_dir=tmp_path / "stage")
    client.app.state.blob_store = store
    _, headers = approved
    worker = worker_factory()
    token = _lease(client, headers, worker)
    data = os.urandom(7 << 20)
    digest = hashlib.sha256(data).hexdigest()
    upload_id = _declare(worker, token, "out/model.bin", data).json()["id"]
    half = len(data) // 2
    assert (
        _chunk(worker, token, upload_id, data[:half], f"bytes 0-{half - 1}/{len(data)}").status_code
        == 200
    )
    done = _chunk(
        worker, token, upload_id, data[half:], f"bytes {half}-{len(data) - 1}/{len(data)}"
    )
    assert done.status_code == 200, done.text
    assert done.json()["result"]["sha256"] == digest
    assert store.size(digest) == len(data)
    assert list((tmp_path / "stage").rglob("*.part")) == []
    from api_support import release_results

    job_id = _job_of(client, headers)
    release_results(client, job_id)
    got = client.get(f"/api/v1/jobs/{job_id}/results/out/model.bin", headers=headers)
    assert got.status_code == 200 and hashlib.sha256(got.content).hexdigest() == digest


def _job_of(client: Any, headers: dict[str, str]) -> str:
    listed = client.get("/api/v1/jobs", headers=headers).json()
    return str(listed["data"][0]["job_id"])
