"""`GET /api/v1/deployment` on the API: the deployment JSON it runs with, public, cached by
ETag; 503 with the setting to fix when none is configured (the oracle's twin:
tests/oracle/test_oracle_deployment_route.py)."""

from __future__ import annotations

from deployment_support import check_served, sample_deployment
from fastapi.testclient import TestClient

from proofnet.messages.deployment import DEPLOYMENT_PATH


def test_the_api_serves_its_deployment(client: TestClient) -> None:
    deployed = sample_deployment()
    client.app.state.deployment = deployed  # type: ignore[attr-defined]
    check_served(client, deployed)


def test_an_api_without_a_deployment_names_the_setting(client: TestClient) -> None:
    client.app.state.settings = type("S", (), {"deployment_file": None})()  # type: ignore[attr-defined]
    response = client.get(DEPLOYMENT_PATH)
    assert response.status_code == 503
    assert "PROOFNET_DEPLOYMENT_FILE" in response.json()["detail"]
