"""The worker benchmark functions run and report consistent figures (tiny sizes here)."""

from __future__ import annotations

import json

import pytest

from benchmarks.pot import (
    measure_attestation_rates,
    measure_pot_overhead,
    run_worker_bench,
)
from pot.examples.numpy_mlp import MLPConfig

TINY = MLPConfig(examples=256, features=16, hidden=32, classes=4, batch_size=32)


def test_pot_overhead_figures_are_consistent() -> None:
    result = measure_pot_overhead(k=10, steps=30, repeats=1, cfg=TINY)
    assert result.parameters == 16 * 32 + 32 + 32 * 4 + 4
    assert result.step_s > 0 and result.step_with_pot_s > 0
    assert 0 < result.recorder_s_per_step < result.step_with_pot_s
    assert result.overhead == pytest.approx(result.recorder_s_per_step / result.step_s)
    # weights + optimizer state (momentum) for float64 parameters, plus headers
    assert result.checkpoint_bytes > 2 * 8 * result.parameters
    with pytest.raises(ValueError):
        measure_pot_overhead(k=10, steps=5, cfg=TINY)


def test_attestation_rates_are_positive() -> None:
    rates = measure_attestation_rates(20)
    assert rates.n == 20 and rates.sign_per_s > 0 and rates.verify_per_s > 0


def test_run_worker_bench_is_json() -> None:
    out = run_worker_bench(k=10, steps=20, repeats=1, attestations=10, cfg=TINY)
    decoded = json.loads(json.dumps(out))
    assert decoded["pot"]["k"] == 10 and decoded["pot"]["target"] == 0.03
    assert isinstance(decoded["pot"]["meets_target"], bool)
    assert decoded["attestation"]["n"] == 10
    assert decoded["attestation"]["verify_target_per_s"] == 2000.0
