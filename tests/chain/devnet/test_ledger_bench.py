"""The devnet benchmark runs end to end on a small workload and reports sane numbers."""

from __future__ import annotations

import json

import pytest

from benchmarks.devnet import run_devnet_bench


def test_bench_reports_throughput_and_memory(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_devnet_bench(payments=5, plutus=2, utxos=2_000, json_out=True)
    printed = json.loads(capsys.readouterr().out.strip())
    assert printed == result
    assert result["payment_tx_per_s"] > 0 and result["plutus_tx_per_s"] > 0
    # an entry is a 34-byte key, an output's CBOR and a dict slot: tens of MB per 100k at most
    assert 5_000_000 < result["utxo_index_bytes_per_100k"] < 60_000_000


def test_bench_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        run_devnet_bench(payments=0, plutus=0, utxos=10, json_out=True)
