"""The claim answer names the escrow that pays for the job, and a served API hands out only
jobs whose escrow the submitter recorded (status says why a job without one waits)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from api_support import NETWORK, Wallet, Worker, job_spec
from escrow_chain import FakeChainContext, deployment, escrow_datum, escrow_output
from fastapi.testclient import TestClient

from api.config import ApiConfig
from api.routes.oracle_feed import escrow_script_hash
from proofnet.settings import build_settings

DEPLOYED = deployment()


@pytest.fixture
def requires_escrow() -> bool:
    return True


@pytest.fixture
def config(database_url: str, requires_escrow: bool) -> ApiConfig:
    """On SQLite and PostgreSQL: the claim's escrow filter is part of its locking query."""
    return ApiConfig(
        database_url=database_url,
        network=NETWORK,
        rate_limit_per_minute=100_000,
        claim_requires_escrow=requires_escrow,
    )


def _post(client: TestClient, headers: dict[str, str]) -> str:
    response = client.post("/api/v1/jobs", json={"spec": job_spec(gpus=0)}, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["job_id"])


@pytest.fixture
def chain(client: TestClient) -> FakeChainContext:
    """The chain the API reads escrows from, and the deployment they must belong to."""
    context = FakeChainContext()
    client.app.state.chain_context = context  # type: ignore[attr-defined]
    client.app.state.deployment = DEPLOYED  # type: ignore[attr-defined]
    return context


def _record(
    client: TestClient,
    chain: FakeChainContext,
    wallet: Wallet,
    headers: dict[str, str],
    job_id: str,
) -> tuple[str, int]:
    """Lock an escrow that can pay the job (on the fake chain) and record it."""
    pkh = wallet.signing_key.to_verification_key().hash().payload.hex()
    datum = escrow_datum(DEPLOYED, job_id, pkh, budget=1_000_000, deadline_ms=2**42)
    tx_id, index = chain.put(escrow_output(DEPLOYED, datum))
    recorded = client.post(
        f"/api/v1/jobs/{job_id}/escrow", json={"tx_id": tx_id, "index": index}, headers=headers
    )
    assert recorded.status_code == 200, recorded.text
    return tx_id, index


def test_a_job_waits_for_its_escrow_then_the_claim_names_it(
    client: TestClient,
    chain: FakeChainContext,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    wallet, headers = approved
    worker = worker_factory()
    worker.register([])
    first, second = _post(client, headers), _post(client, headers)
    assert worker.claim().status_code == 204  # neither has an escrow yet
    status = client.get(f"/api/v1/jobs/{first}/status", headers=headers).json()
    assert status["status"] == "queued"
    assert status["reason"].startswith("waiting for its escrow")
    assert f"/api/v1/jobs/{first}/escrow" in status["reason"]

    # The younger job's escrow is recorded first: it is handed out, the older one still waits.
    tx_id, index = _record(client, chain, wallet, headers, second)
    claimed = worker.claim()
    assert claimed.status_code == 200, claimed.text
    body: dict[str, Any] = claimed.json()
    assert body["job_id"] == second
    assert body["escrow"] == {
        "network": NETWORK,
        "script_hash": escrow_script_hash(),
        "tx_id": tx_id,
        "index": index,
    }
    assert len(body["escrow"]["script_hash"]) == 56
    assert worker.claim().status_code == 204
    _record(client, chain, wallet, headers, first)
    assert worker.claim().json()["job_id"] == first
    status = client.get(f"/api/v1/jobs/{first}/status", headers=headers).json()
    assert status["status"] == "leased"


@pytest.mark.parametrize("requires_escrow", [False])
def test_without_the_requirement_a_job_without_escrow_is_claimed_with_none(
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    client: TestClient,
) -> None:
    _, headers = approved
    worker = worker_factory()
    worker.register([])
    job_id = _post(client, headers)
    body = worker.claim().json()
    assert body["job_id"] == job_id and body["escrow"] is None


def test_the_served_api_requires_escrows() -> None:
    assert ApiConfig.from_settings(build_settings()).claim_requires_escrow is True
