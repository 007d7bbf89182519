"""Execution-unit and size budgets of the validators (regression guards, measured numbers).

Measured with uplc 1.3.3 (Plutus V3 cost model) on the ledger-shaped contexts of
contracts_harness, one payout per escrow: forwarding spend 92,900 mem / 20.7M steps;
batch script about 0.47M mem / 0.14G steps per escrow; 24 settlements fit the devnet's
14M-memory transaction budget.
"""

from __future__ import annotations

from contracts_harness import evaluate, make_batch

from chain.contracts import types as T
from chain.offchain import scripts as S

MAX_TX_MEM = 14_000_000
MAX_TX_STEPS = 10_000_000_000


def test_forwarding_spend_is_cheap(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    b = make_batch(deployment, oracles, admins, 1)
    r = evaluate(deployment.escrow, b.tx.spend(b.escrows[0][0], T.Settle()))
    assert r.ok
    assert r.mem <= 100_000 and r.cpu <= 25_000_000, (r.mem, r.cpu)


def test_batch_cost_is_linear_in_escrows(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    small = evaluate(deployment.batch_settle, make_batch(deployment, oracles, admins, 4).context())
    large = evaluate(deployment.batch_settle, make_batch(deployment, oracles, admins, 12).context())
    assert small.ok and large.ok
    per_escrow = (large.mem - small.mem) / 8
    assert per_escrow <= 500_000, per_escrow


def test_twenty_four_settlements_fit_one_transaction(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    n = 24
    b = make_batch(deployment, oracles, admins, n)
    batch = evaluate(deployment.batch_settle, b.context())
    spend = evaluate(deployment.escrow, b.tx.spend(b.escrows[0][0], T.Settle()))
    assert batch.ok and spend.ok
    assert batch.mem + n * spend.mem <= MAX_TX_MEM
    assert batch.cpu + n * spend.cpu <= MAX_TX_STEPS


def test_script_sizes() -> None:
    sizes = {name: len(bytes(S.unapplied(name))) for name in S.SCRIPT_NAMES}
    assert sizes["escrow"] <= 3_000 and sizes["batch_settle"] <= 4_500, sizes
