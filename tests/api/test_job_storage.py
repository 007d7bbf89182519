"""`proofnet job store`'s placing, against the real API (in process) and a real S3 server:
k copies with the cheapest offers that fit, each holding the same content root; too few
offers, a spec that places no storage, or a named provider that cannot take it are refused
with one line, before anything is recorded."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from moto.server import ThreadedMotoServer

from api.client_cli import JobClient
from api.job_storage import StoreError, s3_writer, store_file
from proofnet.messages import storage as s
from proofnet.storage_objects import allow_public_reads, s3_client
from tests.api.api_support import Wallet, Worker, job_spec
from tests.api.test_storage_offers import offer_storage


@pytest.fixture
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield "http://{}:{}".format(*server.get_host_and_port())
    finally:
        server.stop()


def _providers(endpoint: str, make: Callable[[], Worker], prices: list[int]) -> list[Worker]:
    workers = []
    for i, price in enumerate(prices):
        bucket = f"store-{secrets.token_hex(4)}-{i}"
        client = s3_client(endpoint, access_key="p", secret_key="p")
        client.create_bucket(Bucket=bucket)
        allow_public_reads(client, bucket)
        worker = make()
        got = offer_storage(worker, endpoint=endpoint, bucket=bucket, ntx_per_gb_month=price)
        assert got.status_code == 200, got.text
        workers.append(worker)
    return workers


def _job(client: TestClient, auth: dict[str, str], storage: dict[str, Any] | None) -> str:
    spec = job_spec()
    spec["results"] = [{"path": "out/*.json", "kind": "json"}]
    if storage is not None:
        spec["storage"] = storage
    return str(client.post("/api/v1/jobs", json={"spec": spec}, headers=auth).json()["job_id"])


STORAGE = {
    "kinds": ["results"],
    "replicas": 2,
    "term_days": 30,
    "max_ntx_per_gb_month": 5_000,
    "budget": 100_000,
}


def test_store_places_k_copies_with_the_cheapest_offers_that_fit(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    s3_endpoint: str,
) -> None:
    wallet, auth = approved
    dear, cheap, mid, over_cap = _providers(
        s3_endpoint, worker_factory, [4_000, 1_000, 2_000, 9_000]
    )
    job_id = _job(client, auth, STORAGE)
    jobs = JobClient("http://testserver", wallet.signing_key, http=client)
    data = secrets.token_bytes(3000)
    placed = store_file(
        jobs.call,
        s3_writer("p", "p"),
        job_id=job_id,
        kind="results",
        object_key=f"jobs/{job_id}/results/out.json",
        data=data,
        chunk_size=1024,
    )
    assert [p["provider_key"] for p in placed] == [cheap.public_key, mid.public_key]
    assert {p["content_root"] for p in placed} == {s.commit(data, 1024).content_root}
    # The k copies are held: a second run places nothing and says so.
    with pytest.raises(StoreError, match="already has the 2 copies"):
        store_file(
            jobs.call, s3_writer("p", "p"), job_id=job_id, kind="results",
            object_key=f"jobs/{job_id}/results/out.json", data=data, chunk_size=1024,
        )  # fmt: skip
    # A provider over the spec's price cap cannot be named.
    with pytest.raises(StoreError, match="cannot take this copy"):
        store_file(
            jobs.call, s3_writer("p", "p"), job_id=job_id, kind="results",
            object_key=f"jobs/{job_id}/results/other.json", data=data,
            providers=[over_cap.public_key],
        )  # fmt: skip
    assert dear.public_key not in {p["provider_key"] for p in placed}


def test_store_refuses_what_the_spec_does_not_ask_for(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    s3_endpoint: str,
) -> None:
    wallet, auth = approved
    _providers(s3_endpoint, worker_factory, [1_000])
    jobs = JobClient("http://testserver", wallet.signing_key, http=client)
    plain = _job(client, auth, None)
    with pytest.raises(StoreError, match="places no storage"):
        store_file(jobs.call, s3_writer(), job_id=plain, kind="results", object_key="k", data=b"x")
    placed = _job(client, auth, STORAGE)
    with pytest.raises(StoreError, match="not 'data'"):
        store_file(jobs.call, s3_writer(), job_id=placed, kind="data", object_key="k", data=b"x")
    # Two copies asked, one offer: nothing is put or recorded.
    with pytest.raises(StoreError, match="2 more copies are needed but only 1 offers fit"):
        store_file(jobs.call, s3_writer(), job_id=placed, kind="results", object_key="k", data=b"x")
    assert client.get("/api/v1/storage/placements", params={"job_id": placed}).json()["count"] == 0
