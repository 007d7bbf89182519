"""Execution-unit and size budgets of the validators (regression guards, measured numbers).

Measured with uplc 1.3.3 (Plutus V3 cost model) on the ledger-shaped contexts of
contracts_harness, one payout per escrow, since the hand-written cores
(`chain.contracts.settle_core`, issue 14.6): escrow Settle 21,024 mem / 8.0M steps (71,480
compiled from OpShin); batch script about 86k mem / 39M steps per escrow (0.26M / 64M from
OpShin, 0.48M before the single forward pass). The whole-transaction numbers (real pycardano transactions through the devnet's phase-2
evaluator) are in tests/chain/offchain/test_measure.py and docs/protocol.md.
"""

from __future__ import annotations

from contracts_harness import evaluate, make_batch

from chain.contracts import types as T
from chain.devnet.profiles import DEFAULT_PROFILE, profile_params
from chain.offchain import scripts as S

# The per-transaction limits of the devnet's default profile (today's mainnet), so the
# bound tracks the parameters the devnet and the settlement bench run under.
_DEFAULT = profile_params(DEFAULT_PROFILE)
MAX_TX_MEM = _DEFAULT.max_tx_ex_mem
MAX_TX_STEPS = _DEFAULT.max_tx_ex_steps


def test_forwarding_spend_is_cheap(core_deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    b = make_batch(core_deployment, oracles, admins, 1)
    r = evaluate(core_deployment.escrow, b.tx.spend(b.escrows[0][0], T.Settle()))
    assert r.ok
    # 21,024 memory units with the hand-written Settle path (71,480 from OpShin); the
    # ceiling keeps it there.
    assert r.mem <= 22_000 and r.cpu <= 8_500_000, (r.mem, r.cpu)


def test_batch_cost_is_linear_in_escrows(core_deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    # Positional indexing made each escrow cost more the later it came (O(N^2) overall);
    # the forward pass keeps the marginal cost flat.
    runs = {
        n: evaluate(
            core_deployment.batch_settle, make_batch(core_deployment, oracles, admins, n).context()
        )
        for n in (4, 12, 20)
    }
    assert all(r.ok for r in runs.values())
    first = (runs[12].mem - runs[4].mem) / 8
    second = (runs[20].mem - runs[12].mem) / 8
    assert first <= 88_000 and second <= 88_000, (first, second)
    assert abs(second - first) <= 1_000, (first, second)


def test_forty_settlements_fit_the_execution_budget(core_deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    n = 40
    b = make_batch(core_deployment, oracles, admins, n)
    batch = evaluate(core_deployment.batch_settle, b.context())
    spend = evaluate(core_deployment.escrow, b.tx.spend(b.escrows[0][0], T.Settle()))
    assert batch.ok and spend.ok
    assert batch.mem + n * spend.mem <= MAX_TX_MEM
    assert batch.cpu + n * spend.cpu <= MAX_TX_STEPS


def test_script_sizes() -> None:
    # Pattern compression is off (cheaper to run, about twice the size); the scripts are
    # used as reference scripts, so size only enters the per-transaction reference fee.
    # The hand-written cores add about 0.2 KB (escrow) and 1.5 KB (batch).
    sizes = {name: len(bytes(S.unapplied(name))) for name in S.SCRIPT_NAMES}
    assert sizes["escrow"] <= 5_600 and sizes["batch_settle"] <= 7_000, sizes
