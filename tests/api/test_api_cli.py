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
