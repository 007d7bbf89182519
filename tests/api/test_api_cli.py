"""`proofnet api migrate` and `add-senior` against a fresh SQLite database."""

from __future__ import annotations

from typing import Any

import pytest
from api_support import Wallet
from sqlmodel import select
from typer.testing import CliRunner

from api.cli import app
from api.db import make_engine, open_session
from api.migrate import head_revision
from api.models import User


@pytest.fixture
def db_env(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'nested' / 'cli.db'}"
    monkeypatch.setenv("PROOFNET_DATABASE_URL", url)
    monkeypatch.setenv("PROOFNET_NETWORK", "devnet")
    monkeypatch.chdir(tmp_path)  # keep any .env of the checkout out of the picture
    return url


def test_migrate_and_add_senior(db_env: str) -> None:
    runner = CliRunner()
    migrated = runner.invoke(app, ["migrate"])
    assert migrated.exit_code == 0, migrated.output
    assert f"revision {head_revision()}" in migrated.output
    wallet = Wallet()
    added = runner.invoke(app, ["add-senior", wallet.address])
    assert added.exit_code == 0, added.output
    again = runner.invoke(app, ["add-senior", wallet.address])
    assert again.exit_code == 0
    engine = make_engine(db_env)
    with open_session(engine) as session:
        users = session.exec(select(User)).all()
        assert [(u.address, u.is_senior, u.is_approved) for u in users] == [
            (wallet.address, True, True)
        ]
    engine.dispose()


def test_add_senior_refuses_a_bad_address(db_env: str) -> None:
    result = CliRunner().invoke(app, ["add-senior", "addr_test1nope"])
    assert result.exit_code == 1
    assert "not a valid Cardano address" in result.output


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_with_several_processes_migrates_once_and_answers(db_env: str, tmp_path: Any) -> None:
    """`serve --workers 2` migrates before forking (the processes never race on DDL) and
    each process serves the same database."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import httpx

    port = _free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "PROOFNET_ORACLE_URL": "", "PROOFNET_DEVNET_URL": "http://127.0.0.1:9"}
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "proofnet.cli", "api", "serve", "--port", str(port),
             "--workers", "2", "--no-access-log"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    try:
        # The events: both server processes logged "Started server process" and the
        # health route answers. The bound only stops a hang; a loaded machine takes long.
        health = f"http://127.0.0.1:{port}/api/v1/health"

        def ready() -> bool:
            if log.read_text(errors="replace").count("Started server process") < 2:
                return False
            try:
                return httpx.get(health, timeout=10).status_code == 200
            except httpx.HTTPError:
                return False

        deadline = time.monotonic() + 300
        while not ready():
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"never ready:\n{log.read_text()}"
            time.sleep(0.3)
        for _ in range(20):
            assert httpx.get(health, timeout=30).status_code == 200
        engine = make_engine(db_env)
        try:
            from api.migrate import current_revision

            assert current_revision(engine) == head_revision()
        finally:
            engine.dispose()
        text = log.read_text()
        assert text.count("Started server process") == 2, text
        assert "GET /api/v1/health" not in text  # --no-access-log
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
