"""docker-compose.yml: the services and profiles it promises, and that every proofnet
command it runs exists with those options (the stack itself needs registry images, which
this machine cannot pull)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from proofnet import cli

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_services_and_profiles(compose: dict) -> None:
    services = compose["services"]
    assert {"postgres", "api", "oracle", "worker", "devnet"} <= set(services)
    assert services["devnet"]["profiles"] == ["devnet"]
    assert services["worker"]["profiles"] == ["worker"]
    for name in ("cardano-node", "ogmios", "kupo"):
        assert services[name]["profiles"] == ["preprod"]
    gpu = services["worker"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu == {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}
    # Every proofnet service reaches the database and the chain through settings.
    env = services["api"]["environment"]
    assert env["PROOFNET_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert "PROOFNET_CHAIN_BACKEND" in env


def test_every_proofnet_command_in_the_file_parses(compose: dict) -> None:
    runner = CliRunner()
    checked = 0
    for name, service in compose["services"].items():
        if "build" not in service:
            continue
        argv = [str(a) for a in service["command"]]
        # --help is eager: it answers 0 only after every option before it was recognised.
        result = runner.invoke(cli.app, [*argv, "--help"])
        assert result.exit_code == 0, f"{name}: proofnet {' '.join(argv)}: {result.output}"
        assert "Usage:" in result.output
        checked += 1
    assert checked >= 4


def test_an_unknown_option_would_be_caught() -> None:
    result = CliRunner().invoke(cli.app, ["devnet", "up", "--no-such-option", "1", "--help"])
    assert result.exit_code != 0
