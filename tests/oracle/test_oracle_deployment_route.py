"""`GET /api/v1/deployment` on an oracle: the deployment file it runs with, public, cached by
ETag; 503 naming the setting when none is configured."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from deployment_support import check_served, sample_deployment
from fastapi.testclient import TestClient
from oracle_fixtures import make_world

from oracle.app import create_app
from proofnet.messages.deployment import DEPLOYMENT_PATH
from proofnet.settings import Settings


@pytest.fixture
def oracle_for(tmp_path: Path) -> Iterator[Callable[[Settings], TestClient]]:
    def make(settings: Settings) -> TestClient:
        return TestClient(
            create_app(
                settings,
                context=make_world().context(),
                database_url=f"sqlite:///{tmp_path / 'oracle.db'}",
                inline=True,
                sweep_interval_s=3600,
            )
        )

    yield make


def test_an_oracle_serves_the_deployment_file_it_runs_with(
    oracle_for: Callable[[Settings], TestClient], tmp_path: Path
) -> None:
    deployed = sample_deployment("f")
    path = tmp_path / "deployment.json"
    deployed.save(path)
    with oracle_for(Settings(deployment_file=str(path))) as client:
        check_served(client, deployed)
    with oracle_for(Settings(deployment_file=None)) as client:
        response = client.get(DEPLOYMENT_PATH)
        assert response.status_code == 503
        assert "PROOFNET_DEPLOYMENT_FILE" in response.json()["detail"]
