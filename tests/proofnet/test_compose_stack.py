"""docker-compose.yml run for real: the devnet profile on the locally built images.

Builds the base images from cache (scripts/ci/build-base-images.sh), builds the proofnet
image offline, brings postgres + devnet + api + oracle up in a project of its own, checks
what they serve and that they reach each other, and tears everything down (`down -v`).
Without a Docker engine or Compose it skips with the reason, unless CI=true or
PROOFNET_REQUIRE_DOCKER=1, where that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from api.migrate import head_revision
from oracle.keys import write_key

pytestmark = [pytest.mark.slow, pytest.mark.docker]

REPO = Path(__file__).resolve().parents[2]
PROOFNET_UID = 10001  # the image's user (Dockerfile)
SERVICES = ("postgres", "devnet", "api", "oracle")
START_TIMEOUT_S = 150.0


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true" or os.environ.get("PROOFNET_REQUIRE_DOCKER") == "1":
        pytest.fail(f"CI=true or PROOFNET_REQUIRE_DOCKER=1 but {reason}", pytrace=False)
    pytest.skip(f"{reason} (set PROOFNET_REQUIRE_DOCKER=1 to make this a failure)")


def _compose_command() -> list[str] | None:
    """`docker-compose` (v1.29, Debian's) or the `docker compose` plugin, whichever runs."""
    candidates = [["docker-compose"], ["docker", "compose"]]
    for cmd in candidates:
        if shutil.which(cmd[0]) is None:
            continue
        probe = subprocess.run([*cmd, "version"], capture_output=True, text=True, timeout=60)
        if probe.returncode == 0:
            return cmd
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Stack:
    compose: list[str]
    env: dict[str, str]
    ports: dict[str, int]
    oracle_public_key: str

    def run(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        result = subprocess.run(
            [*self.compose, *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return result.stdout

    def exec(self, service: str, *argv: str) -> str:
        return self.run("exec", "-T", service, *argv)

    def url(self, service: str, path: str) -> str:
        return f"http://127.0.0.1:{self.ports[service]}{path}"

    def logs(self) -> str:
        return self.run("logs", "--no-color", "--tail=40", check=False)


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200, url
        return json.load(response)


def _wait(description: str, probe: Any, stack: Stack, timeout_s: float = START_TIMEOUT_S) -> Any:
    """Polls `probe` until it returns a truthy value; the stack's logs explain a timeout."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = probe()
            if value:
                return value
            last = value
        except (OSError, urllib.error.URLError, ValueError, AssertionError) as exc:
            last = exc
        time.sleep(1)
    raise AssertionError(
        f"{description} not within {timeout_s:.0f}s (last: {last!r})\n{stack.logs()}"
    )


@pytest.fixture(scope="module")
def compose() -> list[str]:
    """The Compose command, once the engine answers and the local base images exist."""
    if shutil.which("docker") is None:
        _unavailable("no docker CLI")
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        _unavailable("no Docker engine answers; start one with scripts/ci/start-dockerd.sh")
    command = _compose_command()
    if command is None:
        _unavailable(
            "neither docker-compose nor `docker compose` runs (apt-get install docker-compose)"
        )
    # From cache: seconds; a cold build (debootstrap, wheels) takes minutes and needs root.
    base = subprocess.run(
        ["bash", "scripts/ci/build-base-images.sh"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if base.returncode != 0:
        _unavailable(f"the local base images could not be built:\n{base.stderr[-3000:]}")
    return command


@pytest.fixture(scope="module")
def stack(compose: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("compose")
    key = write_key(work / "oracle.skey")
    # The secret is bind-mounted as it is: 0600 and owned by the image's user. chown through
    # a container, which works whether or not the tests run as root.
    subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "-v", f"{work}:/keys",
         "proofnet/python-base:local", "chown", f"{PROOFNET_UID}:{PROOFNET_UID}", "/keys/oracle.skey"],
        check=True,
        capture_output=True,
        timeout=120,
    )  # fmt: skip
    empty_env_file = work / "compose.env"
    empty_env_file.write_text("")
    ports = {"devnet": _free_port(), "api": _free_port(), "oracle": _free_port()}
    # Only what this test sets: a developer's PROOFNET_* variables or .env must not leak in.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROOFNET_", "COMPOSE_"))}
    env |= {
        "COMPOSE_PROJECT_NAME": f"proofnet-test-{os.getpid()}",
        "PROOFNET_ORACLE_KEY_FILE": str(work / "oracle.skey"),
        "PROOFNET_API_ORACLE_KEYS": key.public_key_hex,
        "PROOFNET_PUBLISH_DEVNET_PORT": str(ports["devnet"]),
        "PROOFNET_PUBLISH_API_PORT": str(ports["api"]),
        "PROOFNET_PUBLISH_ORACLE_PORT": str(ports["oracle"]),
    }
    files = ["-f", "docker-compose.yml", "-f", "docker-compose.local.yml"]
    command = [*compose, "--env-file", str(empty_env_file), *files, "--profile", "devnet"]
    stack = Stack(command, env, ports, key.public_key_hex)
    try:
        # One build: every proofnet service runs the same image (proofnet:local).
        stack.run("build", "api", timeout=900)
        stack.run("up", "-d", "--no-build", timeout=300)
        yield stack
    finally:
        stack.run("down", "-v", "--remove-orphans", "--timeout", "20", timeout=300, check=False)


def _health(stack: Stack, service: str) -> str:
    container = stack.run("ps", "-q", service).strip()
    state = subprocess.run(
        ["docker", "inspect", "--format", "{{json .State}}", container],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    body = json.loads(state.stdout)
    return str(body.get("Health", {}).get("Status", body.get("Status")))


def _check_every_service_turns_healthy(stack: Stack) -> None:
    # The compose file's own health checks: a wrong URL or command leaves one unhealthy.
    def all_healthy() -> bool:
        states = {s: _health(stack, s) for s in SERVICES}
        assert "unhealthy" not in states.values(), states
        return all(v == "healthy" for v in states.values())

    _wait("all services healthy", all_healthy, stack)


def _check_api_answers_and_runs_on_the_compose_postgres(stack: Stack) -> None:
    body = _wait("api health", lambda: _get_json(stack.url("api", "/api/v1/health")), stack)
    assert body == {"detail": "ok"}
    # The API migrated the compose database (not a SQLite file) to the head revision.
    revision = stack.exec(
        "postgres", "psql", "-U", "proofnet", "-d", "proofnet", "-Atc",
        "SELECT version_num FROM alembic_version",
    )  # fmt: skip
    assert revision.strip() == head_revision()
    favicon = urllib.request.urlopen(stack.url("api", "/app/favicon.svg"), timeout=10)
    assert favicon.status == 200  # package data made it into the installed image


def _check_oracle_answers_on_a_database_of_its_own(stack: Stack) -> None:
    body = _wait("oracle health", lambda: _get_json(stack.url("oracle", "/api/v1/health")), stack)
    assert body == {"status": "ok"}

    def tables(database: str) -> set[str]:
        out = stack.exec(
            "postgres", "psql", "-U", "proofnet", "-d", database, "-Atc",
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
        )  # fmt: skip
        return set(out.split())

    oracle_tables = _wait("oracle schema", lambda: tables("oracle"), stack)
    assert {"oracle_attestations", "settlement_intents"} <= oracle_tables
    assert not oracle_tables & tables("proofnet"), "the oracle wrote into the API's database"


def _check_devnet_serves_blockfrost_routes_and_confirms_a_payment(stack: Stack) -> None:
    tip = _wait(
        "devnet tip", lambda: _get_json(stack.url("devnet", "/api/v0/blocks/latest")), stack
    )
    assert tip["height"] >= 0 and len(tip["hash"]) == 64
    params = _get_json(stack.url("devnet", "/api/v0/epochs/latest/parameters"))
    assert params["min_fee_a"] > 0

    # A key made in the api container, funded from the devnet container's faucet over the
    # compose network (PROOFNET_DEVNET_URL), read back from the host.
    out = stack.exec("api", "proofnet", "chain", "keygen", "/var/lib/proofnet/payee.skey")
    address = next(w for w in out.split() if w.startswith("addr_test1"))
    stack.exec("devnet", "proofnet", "devnet", "fund", address, "--ada", "7")

    def utxos() -> list[dict[str, Any]]:
        try:
            return list(_get_json(stack.url("devnet", f"/api/v0/addresses/{address}/utxos")))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:  # Blockfrost's answer for an address with no history yet
                return []
            raise

    found = _wait("the payment in a block", utxos, stack, timeout_s=60)
    lovelace = sum(
        int(a["quantity"]) for u in found for a in u["amount"] if a["unit"] == "lovelace"
    )
    assert lovelace == 7_000_000


def _check_services_reach_each_other_by_their_configured_urls(stack: Stack) -> None:
    script = (
        "import urllib.request as u\n"
        "from proofnet.settings import build_settings\n"
        "s = build_settings()\n"
        "for url in (s.devnet_url + '/health', s.api_url + '/api/v1/health',"
        " s.oracle_url + '/api/v1/health'):\n"
        "    print(u.urlopen(url, timeout=10).status, url)\n"
    )
    for service in ("api", "oracle"):
        out = stack.exec(service, "python3", "-c", script)
        assert [line.split()[0] for line in out.splitlines()] == ["200"] * 3, out


def _check_proofnet_services_run_unprivileged(stack: Stack) -> None:
    for service in ("devnet", "api", "oracle"):
        assert stack.exec(service, "id", "-u").strip() == str(PROOFNET_UID)


def test_devnet_profile_runs_for_real(stack: Stack) -> None:
    # One test, not one per check: under pytest-xdist, tests of one module may land on both
    # workers, and each would bring up a stack of its own.
    _check_every_service_turns_healthy(stack)
    _check_api_answers_and_runs_on_the_compose_postgres(stack)
    _check_oracle_answers_on_a_database_of_its_own(stack)
    _check_devnet_serves_blockfrost_routes_and_confirms_a_payment(stack)
    _check_services_reach_each_other_by_their_configured_urls(stack)
    _check_proofnet_services_run_unprivileged(stack)


def test_local_postgres_image_refuses_to_start_without_a_password(compose: list[str]) -> None:
    # As the official image does: a superuser without a password would be open to anyone
    # who reaches the port.
    result = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "-e", "POSTGRES_USER=proofnet",
         "proofnet/postgres:local"],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 1
    assert "POSTGRES_PASSWORD is not set" in result.stderr
