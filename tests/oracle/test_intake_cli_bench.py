"""The oracle CLI (keygen, serve's refusal without a key) and the throughput benchmark."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.oracle import run_oracle_verify_bench
from oracle.cli import app
from oracle.keys import OracleKeyError, load_key


def test_keygen_writes_a_private_key_and_refuses_to_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "oracle.skey"
    result = CliRunner().invoke(app, ["keygen", str(path)])
    assert result.exit_code == 0, result.output
    key = load_key(path)
    assert result.output.splitlines()[0] == f"public key: {key.public_key_hex}"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = CliRunner().invoke(app, ["keygen", str(path)])
    assert again.exit_code != 0 and "refusing to overwrite" in again.output
    os.chmod(path, 0o644)
    with pytest.raises(OracleKeyError, match="readable by others"):
        load_key(path)


def test_serve_without_a_key_says_how_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROOFNET_ORACLE_KEY_FILE", raising=False)
    result = CliRunner().invoke(app, ["serve", "--port", "0"])
    assert result.exit_code != 0
    assert "PROOFNET_ORACLE_KEY_FILE" in result.output


def test_verify_bench_verifies_every_attestation() -> None:
    report = run_oracle_verify_bench(60, processes=1, batch=25)
    assert report["attestations"] == report["verified"] == 60
    assert report["attestations_per_s"] > 0 and report["spot_checks"] == "excluded"
    with pytest.raises(ValueError):
        run_oracle_verify_bench(1, processes=2)
