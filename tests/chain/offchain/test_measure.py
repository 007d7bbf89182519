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


def test_fifty_distinct_settlements_fit_and_size_binds() -> None:
    """Issue 14.6: at least 50 distinct settlements (a payout and a refund each) in one
    transaction, size the binding limit, at most 30,000 lovelace each."""
    c = M.batch_costs(50, distinct=True, refunds=True)
    assert c.fits(), c
    assert c.binding_limit() == "size", c
    # Memory and steps far from their limits: size ends the batch, not execution.
    p = ProtocolParams()
    assert c.mem <= 0.5 * p.max_tx_ex_mem and c.steps <= 0.5 * p.max_tx_ex_steps, c
    assert c.per_settlement <= 30_000, c.per_settlement
    over = M.batch_costs(66, distinct=True, refunds=True)
    assert over.size > p.max_tx_size and over.mem <= p.max_tx_ex_mem, over


def test_aggregated_settlements_evaluate() -> None:
    c = M.batch_costs(12, distinct=False, refunds=False, providers=10)
    assert c.fits()


def test_no_settlement_is_refused() -> None:
    with pytest.raises(ValueError):
        M.batch_costs(0)


def test_a_batch_past_the_budget_is_reported_as_such() -> None:
    # The batch script alone needs about 110k + 83k per escrow memory units: within the
    # 16.5M of protocol 11 up to about 197 escrows (a size no transaction reaches).
    with pytest.raises(M.OutOfBudget):
        M.batch_costs(205)


def test_memory_breakdown_adds_up() -> None:
    b = M.memory_breakdown(2, 4)
    for part in ("escrow_settle_spend", "batch_script_per_escrow"):
        shape = b[part]
        assert shape["cek_steps"] + shape["builtins"] == pytest.approx(shape["total"], abs=2)
        assert sum(shape["cek_steps_by_term"].values()) == pytest.approx(shape["cek_steps"], abs=2)
        assert shape["cek_steps"] > shape["builtins"] > 0
    # The escrow's Settle spend is what the contract harness measures (test_costs).
    assert 20_000 <= b["escrow_settle_spend"]["total"] <= 22_000, b
    assert b["total"] == b["escrow_settle_spend"]["total"] + b["batch_script_per_escrow"]["total"]
    assert b["total"] <= 110_000, b
