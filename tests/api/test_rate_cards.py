"""Rate card documents: published by a provider's PUT, served by digest, named by jobs, and
matched at claim time (on SQLite and PostgreSQL)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from api_support import Wallet, Worker, job_spec
from fastapi.testclient import TestClient
from sqlmodel import Session

from api.config import ApiConfig
from api.services.oracle_feed import job_feed
from oracle.inputs.feed import parse_job
from proofnet.messages.rate_card import RATE_CARD_DOMAIN, RateCardDocument

A100 = ("NVIDIA A100 80GB", 81920)


@pytest.fixture
def config(database_url: str) -> ApiConfig:
    return ApiConfig(database_url=database_url, network="devnet", rate_limit_per_minute=100_000)


def publish(worker: Worker, rates: dict[str, int]) -> dict[str, Any]:
    response = worker.request("PUT", "/api/v1/worker/rate-card", {"rates": rates})
    assert response.status_code == 200, response.text
    return dict(response.json())


def rate_card_spec(digest: str, *, max_amount: int = 10**9, gpus: int = 1) -> dict[str, Any]:
    spec = job_spec(gpus=gpus, gpu_memory_mb=40000)
    spec["pricing"] = {"kind": "rate_card", "rate_card": digest, "max_amount": max_amount}
    return spec


def test_publish_returns_the_digest_and_the_document_is_served_by_it(
    client: TestClient, worker_factory: Callable[[], Worker]
) -> None:
    worker = worker_factory()
    worker.register([A100, ("NVIDIA H100 80GB HBM3", 81920)])
    body = publish(worker, {"NVIDIA A100 80GB": 7200, "NVIDIA H100 80GB HBM3": 14400})
    expected = RateCardDocument(
        provider=worker.public_key,
        ntx_per_gpu_hour={"NVIDIA A100 80GB": 7200, "NVIDIA H100 80GB HBM3": 14400},
    )
    assert body["digest"] == expected.digest
    assert body["document"] == expected.model_dump(mode="json")
    assert [r["gpu_model"] for r in body["rates"]] == ["NVIDIA A100 80GB", "NVIDIA H100 80GB HBM3"]

    # Public, and exactly the canonical bytes the digest hashes after the domain tag.
    served = client.get(f"/api/v1/rate-cards/{body['digest']}")
    assert served.status_code == 200, served.text
    assert served.content == expected.canonical_bytes()
    digest = "sha256:" + hashlib.sha256(RATE_CARD_DOMAIN + served.content).hexdigest()
    assert digest == body["digest"]
    assert RateCardDocument.from_canonical(served.content) == expected

    # Publishing the same rates again is the same document; new rates are a new one, and
    # the old one stays fetchable (specs may name it).
    assert publish(worker, dict(expected.ntx_per_gpu_hour))["digest"] == expected.digest
    newer = publish(worker, {"NVIDIA A100 80GB": 9000})
    assert newer["digest"] != expected.digest
    assert client.get(f"/api/v1/rate-cards/{expected.digest}").status_code == 200

    listed = client.get("/api/v1/rate-cards").json()
    assert listed["count"] == 1
    assert listed["data"][0]["digest"] == newer["digest"]
    assert listed["data"][0]["provider"] == worker.public_key
    by_key = client.get("/api/v1/rate-cards", params={"provider": worker.public_key}).json()
    assert by_key["count"] == 1
    assert client.get("/api/v1/rate-cards", params={"provider": "0" * 64}).json()["count"] == 0

    # Withdrawing every rate leaves no current card.
    assert publish(worker, {})["digest"] is None
    assert client.get("/api/v1/rate-cards").json()["count"] == 0


def test_unknown_digests_and_bad_rates_are_refused(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, auth = approved
    unknown = "sha256:" + "c" * 64
    missing = client.get(f"/api/v1/rate-cards/{unknown}")
    assert missing.status_code == 404 and "no rate card" in missing.json()["detail"]
    assert client.get("/api/v1/rate-cards/sha256:nothex").status_code == 422

    posted = client.post("/api/v1/jobs", json={"spec": rate_card_spec(unknown)}, headers=auth)
    assert posted.status_code == 422, posted.text
    assert "not a rate card published on this API" in posted.json()["detail"]
    estimate = client.post(
        "/api/v1/estimates", json={"spec": rate_card_spec(unknown)}, headers=auth
    )
    assert estimate.status_code == 422

    worker = worker_factory()
    worker.register([A100])
    digest = publish(worker, {A100[0]: 7200})["digest"]
    cpu_only = client.post(
        "/api/v1/jobs", json={"spec": rate_card_spec(digest, gpus=0)}, headers=auth
    )
    assert cpu_only.status_code == 422 and "fixed amount" in cpu_only.json()["detail"]
    # GPU models the provider did not register, and names the attestation cannot carry.
    other = worker.request("PUT", "/api/v1/worker/rate-card", {"rates": {"NVIDIA L4": 1}})
    assert other.status_code == 400 and "did not register" in other.json()["detail"]
    odd = worker_factory()
    odd.register([("GPU \u00e9", 1024)])
    refused = odd.request("PUT", "/api/v1/worker/rate-card", {"rates": {"GPU \u00e9": 1}})
    assert refused.status_code == 400 and "invalid rate card" in refused.json()["detail"]
    assert (
        client.post("/api/v1/jobs", json={"spec": rate_card_spec(digest)}, headers=auth).status_code
        == 201
    )


def test_only_the_provider_whose_current_card_it_is_claims_the_job(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    session: Session,
) -> None:
    _, auth = approved
    seller, other = worker_factory(), worker_factory()
    seller.register([A100])
    other.register([A100])
    digest = publish(seller, {A100[0]: 7200})["digest"]
    publish(other, {A100[0]: 7200})  # the same rates, but another provider's document
    posted = client.post("/api/v1/jobs", json={"spec": rate_card_spec(digest)}, headers=auth)
    assert posted.status_code == 201, posted.text
    job_id = posted.json()["job_id"]
    # A fixed-price job anyone fitting may take.
    fixed = client.post("/api/v1/jobs", json={"spec": job_spec(gpu_memory_mb=40000)}, headers=auth)
    assert fixed.status_code == 201

    taken = other.claim()
    assert taken.status_code == 200 and taken.json()["job_id"] == fixed.json()["job_id"]
    assert other.claim().status_code == 204  # the rate-card job is not its to take

    # The seller changed its prices: its old card no longer lets it claim ...
    publish(seller, {A100[0]: 9000})
    assert seller.claim().status_code == 204
    # ... until it publishes those rates again (the same document).
    assert publish(seller, {A100[0]: 7200})["digest"] == digest
    claimed = seller.claim()
    assert claimed.status_code == 200 and claimed.json()["job_id"] == job_id

    # The oracle feed carries the document, which the oracle re-hashes and prices by.
    feed = job_feed(session, job_id)
    document = parse_job(feed, expected_job_id=job_id).rate_card
    assert document is not None
    assert document.digest == digest and document.provider == seller.public_key
    assert job_feed(session, fixed.json()["job_id"])["rate_card"] is None


def test_estimate_prices_by_the_named_document(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, auth = approved
    seller, dearer = worker_factory(), worker_factory()
    seller.register([A100])
    dearer.register([A100, ("NVIDIA H100 80GB HBM3", 81920)])
    digest = publish(seller, {A100[0]: 3600})["digest"]  # 1 NTX unit per GPU-second
    publish(dearer, {A100[0]: 360_000, "NVIDIA H100 80GB HBM3": 720_000})
    spec = rate_card_spec(digest)
    spec["resources"]["max_duration_s"] = 1000
    est = client.post("/api/v1/estimates", json={"spec": spec}, headers=auth)
    assert est.status_code == 200, est.text
    body = est.json()
    # Only the seller's GPUs, at its document's rate: 0..1000 GPU-seconds x 1 NTX unit.
    assert body["gpu_models"] == [A100[0]]
    assert body["cost"]["rule"] == "rate_card"
    assert (body["cost"]["low"], body["cost"]["high"]) == (0, 1000)
    assert digest in body["cost"]["basis"]
    # Capped at max_amount.
    spec["pricing"]["max_amount"] = 500
    capped = client.post("/api/v1/estimates", json={"spec": spec}, headers=auth).json()
    assert capped["cost"]["high"] == capped["cost"]["cap"] == 500
