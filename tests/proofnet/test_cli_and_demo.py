"""The `proofnet` command (the demo's end-to-end run is tests/proofnet/test_demo_loop.py)."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import typer
from typer.testing import CliRunner

from proofnet import cli


def test_help_lists_every_role() -> None:
    result = CliRunner().invoke(cli.app, ["--help"])
    assert result.exit_code == 0
    for role in ("devnet", "worker", "api", "oracle", "bench", "demo", "audit"):
        assert role in result.output


def test_a_role_that_cannot_load_says_why(monkeypatch) -> None:
    monkeypatch.setattr(
        cli, "ROLES", [*cli.ROLES, ("ghost", "proofnet.no_such_module", "app", "Nothing.")]
    )
    result = CliRunner().invoke(cli.app, ["ghost"])
    assert result.exit_code != 0
    assert "proofnet ghost` cannot load" in result.output + str(result.exception)


def _path_echo_role() -> types.ModuleType:
    """A role whose commands print the paths they were handed."""
    module = types.ModuleType("proofnet_test_path_role")
    app = typer.Typer()

    @app.command()
    def show(
        target: Path,
        key_file: Path | None = typer.Option(None, "--key-file"),
        card: list[Path] = typer.Option([], "--card"),
        name: str = typer.Option("x", "--name"),
    ) -> None:
        typer.echo(json.dumps([str(target), str(key_file), [str(c) for c in card], name]))

    @app.command()
    def other() -> None:
        """A second command keeps `show` a sub-command."""

    module.app = app  # type: ignore[attr-defined]
    return module


def test_every_path_a_role_is_handed_is_absolute(monkeypatch, tmp_path: Path) -> None:
    # Roles hand paths to git (run in job dirs), child processes and containers, where a
    # relative path names something else: the console makes each absolute where it enters.
    monkeypatch.setitem(sys.modules, "proofnet_test_path_role", _path_echo_role())
    monkeypatch.setattr(
        cli, "ROLES", [*cli.ROLES, ("paths", "proofnet_test_path_role", "app", "Paths.")]
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        cli.app,
        ["paths", "show", "jobs/a", "--key-file", "k.skey", "--card", "c1", "--card", "/abs/c2"],
    )
    assert result.exit_code == 0, result.output
    target, key_file, cards, name = json.loads(result.output)
    assert target == str(tmp_path / "jobs" / "a")
    assert key_file == str(tmp_path / "k.skey")
    assert cards == [str(tmp_path / "c1"), "/abs/c2"]
    assert name == "x"  # not a path: untouched
    # Absent options stay absent (the role then takes its absolute default from Settings).
    result = CliRunner().invoke(cli.app, ["paths", "show", "t"])
    assert json.loads(result.output)[1] == "None"


def test_settings_paths_are_absolute_and_default_per_user(monkeypatch, tmp_path: Path) -> None:
    from proofnet.settings import build_settings

    for name in list(os.environ):
        if name.startswith(("PROOFNET_", "XDG_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    defaults = build_settings()
    data = tmp_path / "home" / ".local" / "share" / "proofnet"
    assert defaults.worker_work_dir == data / "worker"
    assert defaults.worker_key_file == data / "worker.skey"
    assert defaults.devnet_data_dir == data / "devnet"
    assert defaults.database_url == f"sqlite:///{data / 'proofnet.db'}"
    assert defaults.git_cache_dir == tmp_path / "home" / ".cache" / "proofnet" / "git"
    # One variable moves everything not named on its own; relative values become absolute.
    monkeypatch.setenv("PROOFNET_DATA_DIR", "srv")
    monkeypatch.setenv("PROOFNET_WORKER_KEY_FILE", "keys/w.skey")
    monkeypatch.setenv("PROOFNET_DATABASE_URL", "sqlite:///db/api.db")
    moved = build_settings()
    assert moved.worker_work_dir == tmp_path / "srv" / "worker"
    assert moved.worker_key_file == tmp_path / "keys" / "w.skey"
    assert moved.database_url == f"sqlite:///{tmp_path / 'db' / 'api.db'}"
