"""Two protocol versions live on one devnet, and the attacks that mixing them allowed.

An upgrade changes the escrow and batch script hashes, so escrows of the old version
(1.0.0, the frozen blueprint under `chain/contracts/releases/`) and of the current one
coexist. The tests deploy both, check the upgrade path (old escrows settle and refund
under their own scripts while new ones lock under the current version), and submit the
attacks issue 14 found accepted: one output paying an old escrow's refund and a new
escrow's remainder, and two batch scripts sharing one remainder output. The current
batch script must refuse both (it refuses any script input it does not settle).

The module owns its devnet (both deployments); tests leave it as they found it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pycardano import Transaction, TransactionOutput, UTxO

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "offchain"))

from protocol_fixtures import NTX_NAME, ProtocolWorld, protocol_world  # noqa: E402

from chain.contracts import types as t  # noqa: E402
from chain.offchain import scripts as S  # noqa: E402
from chain.offchain.builders import assembly as A  # noqa: E402
from chain.offchain.builders.chain_time import ChainClock  # noqa: E402
from chain.offchain.builders.deploy import OracleSetup, deploy  # noqa: E402
from chain.offchain.builders.deployment import Deployment  # noqa: E402
from chain.offchain.builders.lock import lock_escrows  # noqa: E402
from chain.offchain.builders.onchain import escrow_datum_of, out_ref_data  # noqa: E402
from chain.offchain.builders.protocol_utxos import resolve  # noqa: E402
from chain.offchain.builders.refund import build_refund  # noqa: E402
from chain.offchain.builders.settle import (  # noqa: E402
    Settlement,
    SettlePlan,
    plan_settle_batch,
)
from chain.offchain.errors import TransactionRejectedError  # noqa: E402

TRACES = "traces" in inspect.signature(S.protocol_scripts).parameters
ROOT = hashlib.sha256(b"attestations").digest()
OLD = "1.0.0"
SCRIPT_INPUT_REFUSED = "every script input must be an escrow this batch settles"


@dataclass
class TwoVersions:
    world: ProtocolWorld  # the current version, deployed by the fixture
    old: Deployment  # the same oracles and admin, under the 1.0.0 scripts


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoVersions]:
    with protocol_world(tmp_path_factory.mktemp("upgrade"), traces=TRACES) as w:
        w.fund(w.providers[0])
        setup = OracleSetup(tuple(o.pkh for o in w.oracles), w.threshold, (w.admin.pkh,), 1)
        ntx_policy = bytes.fromhex(w.deployment.ntx_policy)
        old = deploy(w.context, w.admin, setup, ntx_policy, NTX_NAME, release=OLD)
        assert old.protocol_version == OLD and w.deployment.protocol_version != OLD
        assert old.escrow_hash != w.deployment.escrow_hash
        yield TwoVersions(w, old)


# --- helpers ---------------------------------------------------------------------------


def lock(v: TwoVersions, deployment: Deployment, *budgets: int, **kw: Any) -> list[UTxO]:
    w = v.world
    jobs = [w.job(b, **kw) for b in budgets]
    # Seconds may pass between reading chain time for the deadline and building the lock.
    margin = max(1_000, kw.get("deadline_in_ms", 60_000) - 5_000)
    result = lock_escrows(w.context, deployment, jobs, w.submitter, min_margin_ms=margin)
    w.devnet.wait_for_tx(result.tx_id)
    return w.utxos_of(result.tx_id, deployment.escrow_address, len(jobs))


def expired(v: TwoVersions, deployment: Deployment, budget: int) -> UTxO:
    (escrow,) = lock(v, deployment, budget, deadline_in_ms=6_000)
    v.world.wait_until_chain_ms(escrow_datum_of(escrow).deadline + 1_000)
    return escrow


def settle_plan(
    v: TwoVersions, deployment: Deployment, settlements: Sequence[Settlement]
) -> SettlePlan:
    q = v.world.oracle_quorum
    return plan_settle_batch(
        v.world.context, deployment, settlements, ROOT, b"upgrade", [o.pkh for o in q], q[0].address
    )


def pay(v: TwoVersions, escrow: UTxO, provider: int, amount: int) -> Settlement:
    return Settlement(escrow, ((v.world.providers[provider].address, amount),))


def quorum_keys(v: TwoVersions) -> list[Any]:
    return [o.signing_key for o in v.world.oracle_quorum]


def submit_signed(v: TwoVersions, plan: A.TxPlan) -> str:
    payer = v.world.oracle_quorum[0]
    built = A.finalize(v.world.context, plan, payer.utxos(v.world.context))
    return v.world.submit(A.sign(built, quorum_keys(v)))


def rejected_by_batch(v: TwoVersions, plan: A.TxPlan) -> str:
    """Balance `plan` though its scripts fail, submit it, and see the ledger refuse it in
    phase 2 with a batch (reward) script failing; with traces, the current batch's check."""
    w = v.world
    payer = w.oracle_quorum[0]
    built = A.finalize(
        w.context,
        plan,
        payer.utxos(w.context),
        on_script_failure=A.declare_share_of_max(w.context),
    )
    tx: Transaction = A.sign(built, quorum_keys(v))
    with pytest.raises(TransactionRejectedError) as info:
        w.submit(tx)
    reason = info.value.reason
    assert "400" in reason and "ScriptFailure" in reason and "reward #" in reason, reason
    if TRACES:
        assert SCRIPT_INPUT_REFUSED in reason, reason
    return reason


def refund_start(v: TwoVersions, escrows: Sequence[UTxO]) -> int:
    clock = ChainClock.of(v.world.context)
    return max(clock.slot_after(escrow_datum_of(u).deadline) for u in escrows)


# --- the upgrade path ------------------------------------------------------------------


def test_upgrade_old_escrows_settle_and_refund_under_their_scripts_beside_new_ones(
    both: TwoVersions,
) -> None:
    w = both.world
    old_live, old_second = lock(both, both.old, 300, 200)
    (new_live,) = lock(both, w.deployment, 400)
    old_expired = expired(both, both.old, 100)
    # Old escrows settle through the old batch script, new ones through the current one.
    submit_signed(both, settle_plan(both, both.old, [pay(both, old_live, 0, 300)]).plan)
    submit_signed(both, settle_plan(both, w.deployment, [pay(both, new_live, 1, 150)]).plan)
    # An old escrow refunds under its own escrow script (the old deployment's reference).
    payer = w.providers[0]
    refund = build_refund(w.context, both.old, [old_expired], payer.address)
    w.submit(A.sign(refund.built, [payer.signing_key]))
    # And the old version keeps batching what is left of it.
    submit_signed(both, settle_plan(both, both.old, [pay(both, old_second, 2, 50)]).plan)


# --- one output, two obligations across versions -----------------------------------------


def test_attack_one_output_pays_an_old_refund_and_a_new_remainder(both: TwoVersions) -> None:
    """The old escrow's Refund checks only for its own batch's withdrawal, so it runs beside
    the new batch; the refund output (tagged for the old escrow, to the same submitter, with
    more NTX than the new remainder) doubled as the new escrow's remainder output, and the
    new remainder's NTX went to the batch builder. The new batch refuses the old escrow."""
    w = both.world
    old = expired(both, both.old, 500)
    (new,) = lock(both, w.deployment, 100)
    sp = settle_plan(both, w.deployment, [pay(both, new, 0, 60)])
    plan = dataclasses.replace(sp.plan)
    remainder_index = len(plan.outputs) - 1
    plan.outputs = [
        *plan.outputs[:remainder_index],
        TransactionOutput(w.submitter.address, old.output.amount, datum=out_ref_data(old.input)),
    ]
    plan.script_inputs = [*plan.script_inputs, A.ScriptInput(old, t.Refund(remainder_index))]
    plan.reference_inputs = [*plan.reference_inputs, resolve(w.context, both.old).escrow_script]
    plan.validity_start = refund_start(both, [old])
    rejected_by_batch(both, plan)
    # Honest twins: the new escrow settles, the old one refunds, separately.
    submit_signed(both, sp.plan)
    payer = w.providers[0]
    refund = build_refund(w.context, both.old, [old], payer.address)
    w.submit(A.sign(refund.built, [payer.signing_key]))


def test_attack_two_batch_scripts_share_one_remainder_output(both: TwoVersions) -> None:
    """An old-version batch and the current one in one transaction, each settling its own
    escrow of one submitter and both naming the same remainder output: one remainder's NTX
    would go to the batch builder. The current batch refuses the old escrow beside it."""
    w = both.world
    (old,) = lock(both, both.old, 100)
    (new,) = lock(both, w.deployment, 100)
    old_sp = settle_plan(both, both.old, [pay(both, old, 0, 60)])
    # One provider for both: equal payout outputs leave equal ADA remainders, so the one
    # remainder output satisfies the old batch's ADA check too.
    new_sp = settle_plan(both, w.deployment, [pay(both, new, 0, 60)])
    old_payout, _ = old_sp.plan.outputs
    new_payout, new_rest = new_sp.plan.outputs
    # Payouts 0 (old) and 1 (new), then one remainder (index 2) named by both batches.
    outputs = [old_payout, new_payout, new_rest]

    def entry_for(sp: SettlePlan, escrow: UTxO, payout: int) -> Any:
        def redeemer(view: A.IndexView) -> t.BatchSettle:
            honest = sp.redeemer(view)
            entry = t.SettleEntry(view.input_index(escrow.input), [payout], 2)
            return dataclasses.replace(honest, entries=[entry])

        return redeemer

    (old_w,) = old_sp.plan.withdrawals
    (new_w,) = new_sp.plan.withdrawals
    shared = dataclasses.replace(
        new_sp.plan,
        script_inputs=[*new_sp.plan.script_inputs, *old_sp.plan.script_inputs],
        outputs=outputs,
        reference_inputs=[*new_sp.plan.reference_inputs, *old_sp.plan.reference_inputs],
        withdrawals=[
            (new_w[0], 0, entry_for(new_sp, new, 1)),
            (old_w[0], 0, entry_for(old_sp, old, 0)),
        ],
        metadata=None,
    )
    rejected_by_batch(both, shared)
    submit_signed(both, old_sp.plan)
    submit_signed(both, new_sp.plan)
