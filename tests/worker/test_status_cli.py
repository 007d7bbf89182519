"""`proofnet worker status` without an API: how it reads an answer, and what it says when
it cannot get one (the end-to-end run is in tests/api/test_chain_watch.py)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from worker.cli import app
from worker.identity import create_key
from worker.status_cli import render

EMPTY = {
    "worker_key": "ab" * 32,
    "payout_address": "addr_test1vq",
    "earned": {"lovelace": 0, "ntx": 0, "note": ""},
    "pending_settlement": {"lovelace": None, "ntx": None, "note": "unknown: oracle down"},
    "slashed": {"lovelace": None, "ntx": 0, "note": ""},
    "payouts": [],
    "recorded_to_block": None,
    "tip_block": None,
    "recorded_at": None,
}


def test_a_worker_nothing_was_recorded_for_says_so() -> None:
    lines = render(EMPTY, "http://api")
    assert "earned           0 NTX" in lines
    assert "pending          unknown (unknown: oracle down)" in lines
    assert any("not started" in line for line in lines)
    assert lines[-1] == "payouts          none yet"
    assert not any(line.startswith("slashed") for line in lines)


def test_payouts_are_listed_with_their_transaction_and_depth() -> None:
    payout = {
        "amount": 1_500,
        "job_id": "cd" * 32,
        "tx_hash": "ef" * 32,
        "block_height": 42,
        "confirmations": 3,
        "confirmed_at": "2025-01-02T03:04:05+00:00",
        "explorer": {"cardanoscan": "https://preprod.cardanoscan.io/transaction/" + "ef" * 32},
    }
    body = dict(
        EMPTY,
        payouts=[payout],
        slashed={"ntx": 7},
        recorded_to_block=44,
        tip_block=44,
        recorded_at="2025-01-02T03:05:00+00:00",
    )
    lines = render(body, "http://api")
    assert "slashed          7 NTX" in lines
    assert "chain record     up to block 44 (tip 44), as of 2025-01-02 03:05:00Z" in lines
    assert any("1,500 NTX  job cdcdcdcdcdcd  block 42, 3 confirmation(s)" in x for x in lines)
    assert f"    tx {'ef' * 32}" in lines
    assert any(x.startswith("    cardanoscan: https://preprod.cardanoscan.io/") for x in lines)


def test_an_unreachable_api_is_one_line_and_exit_2(tmp_path: Path) -> None:
    key = create_key(tmp_path / "worker.skey")
    result = CliRunner().invoke(
        app,
        ["status", "--api-url", "http://127.0.0.1:9", "--key-file", str(key.path)],
    )
    assert result.exit_code == 2
    assert "worker status unavailable: cannot reach the API at http://127.0.0.1:9" in (
        result.output
    )
    assert "Traceback" not in result.output


def test_gpus_the_api_does_not_offer_are_shown_with_the_reason() -> None:
    checks = {
        "gpus": [
            {
                "index": 0,
                "uuid": "GPU-a",
                "model": "NVIDIA H100 80GB HBM3",
                "offered": False,
                "why": "too slow for a NVIDIA H100 80GB HBM3: the commitment came 9.00 s after",
            },
            {"index": 1, "uuid": "GPU-b", "model": "L4", "offered": True, "why": "passed"},
        ]
    }
    lines = render(dict(EMPTY, gpu_checks=checks), "http://api")
    assert "  0  NVIDIA H100 80GB HBM3  GPU-a  NOT offered" in lines
    assert any(line.strip().startswith("too slow for a NVIDIA H100") for line in lines)
    assert "  1  L4  GPU-b  offered" in lines
