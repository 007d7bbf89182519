"""docker-compose.yml read as data: the services and profiles it promises, that every
proofnet command and variable in it exists, and that the preprod services use the paths
the official images define. test_compose_stack.py runs the devnet profile for real."""

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


# --- settings, images and the local override ------------------------------------------------

LOCAL = COMPOSE.with_name("docker-compose.local.yml")
DOCKERFILE = COMPOSE.with_name("Dockerfile")
INITDB = COMPOSE.parent / "deploy" / "postgres" / "initdb"


def _proofnet_services(compose: dict) -> dict[str, dict]:
    return {name: s for name, s in compose["services"].items() if "build" in s}


def test_every_proofnet_variable_is_a_setting(compose: dict) -> None:
    from proofnet.settings import Settings

    known = {f"PROOFNET_{name.upper()}" for name in Settings.model_fields}
    for name, service in _proofnet_services(compose).items():
        variables = {v for v in service["environment"] if v.startswith("PROOFNET_")}
        assert variables, name
        # A misspelt name is silently ignored by the settings (extra="ignore").
        assert variables <= known, f"{name}: not settings: {sorted(variables - known)}"


def test_services_reach_each_other_by_service_name_and_port(compose: dict) -> None:
    services = compose["services"]
    env = services["api"]["environment"]
    assert env["PROOFNET_DEVNET_URL"] == "http://devnet:3030/api/v0"
    assert "--port" in services["devnet"]["command"]
    assert (
        services["devnet"]["command"][services["devnet"]["command"].index("--port") + 1] == "3030"
    )
    assert env["PROOFNET_API_URL"] == "http://api:8000"
    assert env["PROOFNET_ORACLE_URL"] == "http://oracle:8100"
    assert env["PROOFNET_OGMIOS_URL"] == "ws://ogmios:1337"
    assert env["PROOFNET_KUPO_URL"] == "http://kupo:1442"
    # Published ports stay on the loopback interface.
    for name, service in services.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name}: {port}"


def test_the_oracle_has_a_database_of_its_own_created_on_first_start(compose: dict) -> None:
    services = compose["services"]
    api_db = services["api"]["environment"]["PROOFNET_DATABASE_URL"]
    oracle_db = services["oracle"]["environment"]["PROOFNET_DATABASE_URL"]
    assert api_db.rsplit("/", 1)[1] == "proofnet"
    assert oracle_db.rsplit("/", 1)[1] == "oracle"
    assert (
        "./deploy/postgres/initdb:/docker-entrypoint-initdb.d:ro" in services["postgres"]["volumes"]
    )
    sql = "\n".join(p.read_text() for p in sorted(INITDB.glob("*.sql")))
    assert "CREATE DATABASE oracle;" in sql


def test_postgres_health_check_waits_for_the_final_server(compose: dict) -> None:
    # The first-start server listens on its socket only; TCP answers once set-up is done.
    test = compose["services"]["postgres"]["healthcheck"]["test"]
    assert "-h 127.0.0.1" in test[1] and "-d proofnet" in test[1]
    for name in ("devnet", "api", "oracle"):
        assert compose["services"][name]["healthcheck"]["test"][0] == "CMD"


def test_compose_v1_can_read_the_file(compose: dict) -> None:
    # Compose 1.29 (Debian bookworm's docker-compose) rejects a top-level `name`.
    assert "name" not in compose and "version" not in compose


def test_worker_work_dir_has_the_same_path_on_host_and_in_the_container(compose: dict) -> None:
    worker = compose["services"]["worker"]
    work_dir = worker["environment"]["PROOFNET_WORKER_WORK_DIR"]
    host_dir = "${PROOFNET_WORKER_HOST_DIR:-/var/lib/proofnet-worker}"
    assert work_dir == f"{host_dir}/work"
    assert f"{host_dir}:{host_dir}" in worker["volumes"]
    assert "/var/run/docker.sock:/var/run/docker.sock" in worker["volumes"]
    assert worker["group_add"] == ["${PROOFNET_DOCKER_GID:-999}"]


# --- preprod: the paths the official images use -----------------------------------------------
# Sources (docs/operations.md lists them): cardano-node's nix/docker (NETWORK scripts mode,
# /data/db, socket /ipc/node.socket), Ogmios' Dockerfile (server/config/network copied to
# /config, one folder per network), Kupo's Dockerfile (the binary only, no configuration)
# and its manual (--ogmios-host/--ogmios-port instead of --node-socket/--node-config).


def _option(command: list[str], name: str) -> str:
    assert name in command, f"{name} missing from {command}"
    return command[command.index(name) + 1]


def test_cardano_node_runs_preprod_with_the_socket_in_the_shared_volume(compose: dict) -> None:
    node = compose["services"]["cardano-node"]
    assert node["image"].startswith("ghcr.io/intersectmbo/cardano-node:")
    assert node["environment"] == {"NETWORK": "preprod"}
    assert "command" not in node  # scripts mode: the image picks config, db and socket
    assert {"node-db:/data", "node-ipc:/ipc"} <= set(node["volumes"])


def test_ogmios_reads_the_socket_and_its_own_preprod_config(compose: dict) -> None:
    ogmios = compose["services"]["ogmios"]
    command = ogmios["command"]
    assert _option(command, "--node-socket") == "/ipc/node.socket"
    assert _option(command, "--node-config") == "/config/preprod/cardano-node/config.json"
    assert _option(command, "--host") == "0.0.0.0"
    # Followers decode transactions from their CBOR, which Ogmios sends only when asked.
    assert "--include-transaction-cbor" in command
    assert "node-ipc:/ipc" in ogmios["volumes"]


def test_kupo_follows_the_chain_through_ogmios(compose: dict) -> None:
    kupo = compose["services"]["kupo"]
    command = kupo["command"]
    # Kupo's image ships no network configuration, so no --node-config it could read.
    assert "--node-socket" not in command and "--node-config" not in command
    assert _option(command, "--ogmios-host") == "ogmios"
    assert _option(command, "--ogmios-port") == "1337"
    assert _option(command, "--since") == "${PROOFNET_KUPO_SINCE:-origin}"
    assert _option(command, "--match") == "*"
    # The chain watcher and the auditor resolve spent outputs: nothing may be pruned.
    assert "--prune-utxo" not in command
    assert "ogmios" in kupo["depends_on"]


# --- building without a registry ------------------------------------------------------------


def test_dockerfile_base_is_a_build_argument_defaulting_to_the_official_image() -> None:
    text = DOCKERFILE.read_text()
    assert "ARG BASE_IMAGE=python:3.11-slim-bookworm" in text
    froms = [line for line in text.splitlines() if line.startswith("FROM ")]
    assert froms and all(line.startswith("FROM ${BASE_IMAGE}") for line in froms)
    assert "torch" not in text


def test_local_override_builds_every_proofnet_service_offline(compose: dict) -> None:
    local = yaml.safe_load(LOCAL.read_text())
    assert local["services"]["postgres"]["image"] == "proofnet/postgres:local"
    for name in _proofnet_services(compose):
        args = local["services"][name]["build"]["args"]
        assert args == {"BASE_IMAGE": "proofnet/python-base:local", "PIP_OFFLINE": "1"}, name
