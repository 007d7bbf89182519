"""The `proofnet` command and the demo it runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from pycardano import Transaction
from typer.testing import CliRunner

from chain.devnet.ledger import Ledger
from proofnet import cli


def test_help_lists_every_role() -> None:
    result = CliRunner().invoke(cli.app, ["--help"])
    assert result.exit_code == 0
    for role in ("devnet", "worker", "api", "oracle", "bench", "demo"):
        assert role in result.output


def test_a_role_that_cannot_load_says_why(monkeypatch) -> None:
    monkeypatch.setattr(
        cli, "ROLES", [*cli.ROLES, ("ghost", "proofnet.no_such_module", "app", "Nothing.")]
    )
    result = CliRunner().invoke(cli.app, ["ghost"])
    assert result.exit_code != 0
    assert "proofnet ghost` cannot load" in result.output + str(result.exception)


def test_demo_pays_test_ntx_on_a_fresh_devnet(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "proofnet.cli", "demo", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    match = re.search(r"transfer tx: ([0-9a-f]{64})", completed.stdout)
    assert match, completed.stdout
    tx_hash = match.group(1)

    # The devnet has stopped; its data dir holds the confirmed transfer.
    ledger = Ledger.open(tmp_path / "devnet")
    try:
        record = ledger.transaction(tx_hash)
        assert record is not None and record.valid_contract
        tx = Transaction.from_cbor(record.cbor)
        policy = ledger.faucet_policy_id()
        paid = [
            out
            for out in tx.transaction_body.outputs
            if out.amount.multi_asset
            and any(p.payload.hex() == policy for p in out.amount.multi_asset)
        ]
        quantities = sorted(
            qty
            for out in paid
            for assets in out.amount.multi_asset.values()
            for qty in assets.values()
        )
        assert quantities == [250_000, 750_000]  # provider's payment and the submitter's change
    finally:
        ledger.close()
