"""The `proofnet` command (the demo's end-to-end run is tests/proofnet/test_demo_loop.py)."""

from __future__ import annotations

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
