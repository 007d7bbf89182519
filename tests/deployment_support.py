"""A sample deployment and the checks every service's `GET /api/v1/deployment` must pass."""

from __future__ import annotations

from fastapi.testclient import TestClient

from chain.offchain.builders.deployment import Deployment
from proofnet.messages.deployment import DEPLOYMENT_PATH


def sample_deployment(tag: str = "a") -> Deployment:
    ref = f"{tag * 64}#0"
    return Deployment(
        network="testnet",
        seed=ref,
        config_policy=tag * 56,
        config_name="01",
        oracle_config_hash="b" * 56,
        escrow_hash="c" * 56,
        batch_hash="d" * 56,
        config_ref=f"{tag * 64}#1",
        escrow_script_ref=f"{tag * 64}#2",
        batch_script_ref=f"{tag * 64}#3",
        config_script_ref=f"{tag * 64}#4",
        ntx_policy="e" * 56,
        ntx_name="4e5458",
    )


def check_served(client: TestClient, deployed: Deployment) -> None:
    response = client.get(DEPLOYMENT_PATH)  # no credentials: public
    assert response.status_code == 200, response.text
    assert Deployment.from_json(response.text) == deployed
    assert response.text == deployed.to_json()
    assert "public" in response.headers["cache-control"]
    etag = response.headers["etag"]
    again = client.get(DEPLOYMENT_PATH, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    other = client.get(DEPLOYMENT_PATH, headers={"If-None-Match": '"' + "0" * 64 + '"'})
    assert other.status_code == 200
