"""Every console command turns a user's mistake into one line that names the option or
setting and the fix, with exit code 2; `proofnet --debug` shows the traceback instead.

Table-driven over the console's roles: each row is one command with one bad input (a
service that does not answer, a key file in the wrong format, a bad option value, a missing
option, an invalid setting, an unknown chain backend, the devnet not running, Blockfrost
without a project id, Ogmios not answering). Nothing listens on port 9 of this machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from proofnet import cli
from proofnet.cli_errors import explain

NOWHERE = "http://127.0.0.1:9"
HASH = "ab" * 28


@pytest.fixture
def keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    for name in list(__import__("os").environ):
        if name.startswith("PROOFNET_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PROOFNET_DEVNET_URL", NOWHERE)
    monkeypatch.setenv("PROOFNET_DATA_DIR", str(tmp_path / "data"))
    good = tmp_path / "good.skey"
    made = CliRunner().invoke(cli.app, ["chain", "keygen", str(good)])
    assert made.exit_code == 0, made.output
    bad = tmp_path / "bad.skey"
    bad.write_text("not a key\n")
    return {"good": good, "bad": bad, "tmp": tmp_path}


def _deploy(key: str, oracle: str = HASH) -> list[str]:
    return ["chain", "deploy", "--key-file", key, "--oracle", oracle, "--threshold", "1",
            "--admin", HASH, "--admin-threshold", "1", "--ntx-policy", HASH,
            "--out", "d.json"]  # fmt: skip


# (case, argv with {good}/{bad}/{tmp} filled in, environment, what the line must say)
CASES: list[tuple[str, list[str], dict[str, str], str]] = [
    ("devnet not running (chain)", _deploy("{good}"), {},
     "cannot reach http://127.0.0.1:9 (connection refused): check PROOFNET_DEVNET_URL"),
    ("devnet not running (devnet)", ["devnet", "status"], {},
     "cannot reach the devnet at http://127.0.0.1:9"),
    ("devnet not running (node bridge)", ["devnet", "node-bridge"], {},
     "cannot reach http://127.0.0.1:9: (connection refused): check PROOFNET_DEVNET_URL"),
    ("key in the wrong format", _deploy("{bad}"), {}, "Invalid value for --key-file"),
    ("bad hex option", _deploy("{good}", oracle="zz"), {},
     "Invalid value for --oracle: 'zz' is not hex"),
    ("short hash option", _deploy("{good}", oracle="abcd"), {},
     "Invalid value for --oracle: 'abcd' is 2 bytes; expected 28"),
    ("unknown backend", _deploy("{good}"), {"PROOFNET_CHAIN_BACKEND": "nope"},
     "invalid setting PROOFNET_CHAIN_BACKEND"),
    ("no dispute window", ["oracle", "serve", "--port", "9"],
     {"PROOFNET_ORACLE_DISPUTE_WITHIN_S": "0"},
     "invalid setting PROOFNET_ORACLE_DISPUTE_WITHIN_S: Input should be greater than or "
     "equal to 1 (got '0')"),
    ("verifier answer window past a week", ["oracle", "serve", "--port", "9"],
     {"PROOFNET_ORACLE_VERIFIER_ANSWER_WITHIN_S": "1e9"},
     "invalid setting PROOFNET_ORACLE_VERIFIER_ANSWER_WITHIN_S: Input should be less than "
     "or equal to 604800"),
    ("missing Blockfrost project id", _deploy("{good}"),
     {"PROOFNET_CHAIN_BACKEND": "blockfrost", "PROOFNET_NETWORK": "preprod"},
     "blockfrost needs PROOFNET_BLOCKFROST_PROJECT_ID"),
    ("Ogmios not answering", _deploy("{good}"),
     {"PROOFNET_CHAIN_BACKEND": "ogmios", "PROOFNET_OGMIOS_URL": "ws://127.0.0.1:9"},
     "cannot reach ws://127.0.0.1:9 (connection refused): check PROOFNET_OGMIOS_URL"),
    ("missing option", ["job", "status", "j1"], {},
     "Missing option '--key-file' (see `proofnet job status --help`)"),
    ("API not answering (job)", ["job", "status", "j1", "--key-file", "{good}",
                                 "--api-url", NOWHERE], {},
     "cannot reach the API at http://127.0.0.1:9"),
    ("API not answering (approvals)", ["approvals", "list", "--key-file", "{good}",
                                       "--api-url", NOWHERE], {},
     "cannot reach the API at http://127.0.0.1:9"),
    ("missing worker key", ["worker", "status", "--key-file", "{tmp}/none.skey"], {},
     "--key-file"),
    ("missing deployment", ["audit", "--deployment", "{tmp}/none.json", "--tx", "ab"], {},
     "--deployment"),
    ("missing deployment (oracle)", ["oracle", "settle", "--key-file", "{good}",
                                     "--deployment", "{tmp}/none.json"], {},
     "none.json: no such file (check --deployment)"),
    ("slash without a deployment", ["oracle", "slash", "--job", "ab", "--key-file", "{good}"],
     {}, "PROOFNET_SETTLEMENT_DEPLOYMENT_FILE"),
    ("slash with bad co-signers", ["oracle", "slash", "--job", "ab", "--key-file", "{good}"],
     {"PROOFNET_SETTLEMENT_DEPLOYMENT_FILE": "d.json",
      "PROOFNET_SETTLEMENT_COSIGNERS": "[{\"url\": 1}]"},
     "PROOFNET_SETTLEMENT_COSIGNERS"),
    ("slash with a missing deployment", ["oracle", "slash", "--job", "ab", "--key-file", "{good}"],
     {"PROOFNET_SETTLEMENT_DEPLOYMENT_FILE": "none.json"},
     "none.json: no such file (check PROOFNET_SETTLEMENT_DEPLOYMENT_FILE)"),
    ("bad option value", ["api", "serve", "--port", "abc"], {},
     "Invalid value for '--port'"),
    ("unknown devnet profile", ["devnet", "up", "--profile", "nope"], {},
     "unknown parameter profile 'nope'"),
    ("missing deployment (bond)", ["bond", "status", "--deployment", "{tmp}/none.json"], {},
     "none.json"),
    ("Kupo not answering (audit)", ["audit", "--tx", "ab" * 32, "--deployment", "chain"],
     {"PROOFNET_CHAIN_BACKEND": "ogmios", "PROOFNET_KUPO_URL": NOWHERE},
     "start it or set PROOFNET_KUPO_URL"),
    ("audit by job through Ogmios", ["audit", "--job", "ab" * 32, "--deployment", "chain"],
     {"PROOFNET_CHAIN_BACKEND": "ogmios", "PROOFNET_KUPO_URL": NOWHERE},
     "needs a chain index (PROOFNET_CHAIN_BACKEND=blockfrost or devnet)"),
    ("database not answering", ["api", "migrate"],
     {"PROOFNET_DATABASE_URL": "postgresql+psycopg://u:p@127.0.0.1:9/x"},
     "cannot reach 127.0.0.1:9 (connection refused): check PROOFNET_DATABASE_URL"),
]  # fmt: skip


def _fill(argv: list[str], keys: dict[str, Path]) -> list[str]:
    return [a.format(**{k: str(v) for k, v in keys.items()}) for a in argv]


@pytest.mark.parametrize(("argv", "env", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_mistake_is_one_line_naming_the_fix(
    keys: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    env: dict[str, str],
    says: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli.app, _fill(argv, keys), prog_name="proofnet")
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.output
    assert says in lines[0], lines[0]


def test_debug_shows_the_traceback(keys: dict[str, Path]) -> None:
    """The honest twin: with --debug the same failure comes with its traceback."""
    result = CliRunner().invoke(cli.app, ["--debug", *_fill(_deploy("{good}"), keys)])
    assert result.exit_code not in (0, 2)
    assert result.exception is not None and not isinstance(result.exception, SystemExit)


def test_a_bug_keeps_its_traceback() -> None:
    """Only expected failures are translated: an unknown error is a bug, told in full."""
    assert explain(KeyError("x")) is None
    assert explain(ZeroDivisionError()) is None
