"""`proofnet worker rate-card`: a provider publishes its prices against the real API, and a
worker then prices a job by the document the API serves for its digest."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from agent_fixtures import NETWORK, ApiServer, api_server  # noqa: F401  (fixture)
from api_support import Wallet, capabilities

from proofnet.messages.jobspec import JobSpec
from worker.api_client import ApiClient
from worker.identity import bind_payout_address, create_key
from worker.rate_card_cli import RateCardPublishError, parse_rates, publish_rates
from worker.rate_cards import RateCardBook

H200 = "NVIDIA H200"


def registered_gpu_worker(api: ApiServer, key_file: Path) -> ApiClient:
    key = create_key(key_file)
    client = ApiClient(api.url, key, NETWORK)
    nonce = client.request("POST", "/api/v1/worker/challenge").json()["nonce"]
    binding = bind_payout_address(key, Wallet().address, NETWORK, nonce)
    offered = [{"index": 0, "uuid": "GPU-test-0", "name": H200, "memory_mb": 1000}]
    body = {
        "binding": binding.model_dump(mode="json"),
        "gpus": offered,
        "capabilities": capabilities(offered),
    }
    client.request("POST", "/api/v1/worker/register", body=json.dumps(body).encode())
    return client


def test_parse_rates() -> None:
    assert parse_rates(["NVIDIA H100 80GB HBM3=3600000", "NVIDIA L4=7"]) == {
        "NVIDIA H100 80GB HBM3": 3_600_000,
        "NVIDIA L4": 7,
    }
    for bad in ("NVIDIA L4", "=5", "NVIDIA L4=1.5", "NVIDIA L4=-3"):
        with pytest.raises(RateCardPublishError, match="MODEL="):
            parse_rates([bad])


def test_published_card_prices_a_job_the_worker_fetches_by_digest(
    api_server: ApiServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    client = registered_gpu_worker(api_server, tmp_path / "worker.skey")
    try:
        document = publish_rates(client, {H200: 3_600_000})
        assert document is not None and document.provider == client.key.public_key_hex
        listed = api_server.http.get("/api/v1/rate-cards").json()["data"]
        assert [c["digest"] for c in listed] == [document.digest]

        spec = JobSpec.from_dict(
            {
                "model": {"repo_url": "https://example.org/train.git", "commit": "c" * 40},
                "framework": "numpy",
                "image": "python@sha256:" + "d" * 64,
                "commands": [["python", "train.py"]],
                "resources": {
                    "gpus": 1,
                    "gpu_memory_mb": 1000,
                    "cpus": 1,
                    "ram_mb": 1024,
                    "disk_mb": 1024,
                    "max_duration_s": 3600,
                },
                "pricing": {"kind": "rate_card", "rate_card": document.digest, "max_amount": 10},
                "seed": 1,
            }
        )
        book = RateCardBook({}, client, client.key.public_key_hex)
        assert book.amount(spec, 7, H200) == 7
        assert book.amount(spec, 10**6, H200) == 10

        assert publish_rates(client, {}) is None  # withdrawn
        assert api_server.http.get("/api/v1/rate-cards").json()["count"] == 0
        with pytest.raises(RateCardPublishError, match="did not publish"):
            publish_rates(client, {"NVIDIA L4": 1})  # not a registered GPU
    finally:
        client.close()


def test_an_answer_naming_another_document_is_refused(tmp_path: Path) -> None:
    key = create_key(tmp_path / "worker.skey")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"digest": "sha256:" + "0" * 64, "rates": []})

    transport = httpx.MockTransport(handler)
    with (
        ApiClient("http://api.test", key, NETWORK, transport=transport) as api,
        pytest.raises(RateCardPublishError, match="not this worker's document"),
    ):
        publish_rates(api, {H200: 5})
