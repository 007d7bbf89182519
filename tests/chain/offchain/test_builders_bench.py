"""`proofnet bench settle` end to end on a small candidate set (the full run measures 80)."""

from __future__ import annotations

import json

import pytest

from benchmarks.settle import run_settle_bench

KEYS = {
    "max_settlements_per_tx_distinct",
    "max_settlements_per_tx_aggregated",
    "fee_per_settlement_lovelace",
    "baseline_fee_lovelace",
    "tx_size_bytes",
    "mem_units",
    "steps",
    "binding_limit",
    "memory_per_settlement",
    "profile",
}


@pytest.mark.slow
def test_settle_bench_reports_submitted_batches(capsys: pytest.CaptureFixture[str]) -> None:
    report = run_settle_bench(True, candidates=6)
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == report and set(report) >= KEYS
    # Six fit easily: every candidate was settled, so the counts are lower bounds.
    assert report["max_settlements_per_tx_distinct"] == 6
    assert report["max_settlements_per_tx_aggregated"] == 6
    assert report["binding_limit"] == "candidates"
    # Batching amortises the fixed part of the fee.
    assert report["fee_per_settlement_lovelace"] < report["baseline_fee_lovelace"]
    limits = report["limits"]
    assert report["tx_size_bytes"] <= limits["max_tx_size"]
    assert report["mem_units"] <= limits["max_tx_ex_mem"]
    assert report["steps"] <= limits["max_tx_ex_steps"]


def test_settle_bench_refuses_too_few_candidates() -> None:
    with pytest.raises(ValueError):
        run_settle_bench(False, candidates=1)


def test_settle_bench_refuses_an_unknown_profile_before_starting_a_devnet() -> None:
    from chain.devnet.profiles import UnknownProfile

    with pytest.raises(UnknownProfile):
        run_settle_bench(False, profile="mainnet-2019")
