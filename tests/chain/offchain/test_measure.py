"""Whole settlement transactions through the devnet's phase-2 evaluator (chain.offchain.measure)."""

from __future__ import annotations

import pytest

from chain.devnet.params import ProtocolParams
from chain.offchain import measure as M


def test_one_settlement_evaluates_and_its_fee_adds_up() -> None:
    c = M.batch_costs(1)
    p = ProtocolParams()
    assert c.n == 1 and c.fits()
    exec_fee = c.fee - p.min_fee_a * c.size - p.min_fee_b - 15 * c.ref_script_bytes
    assert abs(exec_fee - (c.mem * 0.0577 + c.steps * 0.0000721)) <= 2, c
    assert c.ref_script_bytes > 0


def test_costs_grow_linearly() -> None:
    a, b = M.batch_costs(4), M.batch_costs(8)
    c = M.batch_costs(12)
    assert b.mem - a.mem == pytest.approx(c.mem - b.mem, rel=0.02)
    assert b.size > a.size


def test_forty_distinct_settlements_fit_one_transaction() -> None:
    c = M.batch_costs(40, distinct=True, refunds=True)
    assert c.fits(), c
    assert c.binding_limit() == "memory"
    # Regression guard on the measured fee (47,967 lovelace per settlement at 40).
    assert c.per_settlement <= 48_500, c.per_settlement


def test_aggregated_settlements_evaluate() -> None:
    c = M.batch_costs(12, distinct=False, refunds=False, providers=10)
    assert c.fits()


def test_no_settlement_is_refused() -> None:
    with pytest.raises(ValueError):
        M.batch_costs(0)


def test_a_batch_past_the_budget_is_reported_as_such() -> None:
    # Under protocol 11's 16.5M memory the batch script alone still fits at 60 settlements
    # (about 19.3M with the spends); at 90 it alone needs more than the whole budget.
    with pytest.raises(M.OutOfBudget):
        M.batch_costs(90)
