"""The vulnerability classes of docs/protocol.md, attacked on a running devnet.

Every test builds the malicious transaction with the project's builders (then tampers with
it), SUBMITS it, and checks that the ledger refuses it in phase 2 with the script and
redeemer meant to catch it (and its trace message when the deployed scripts keep traces);
then submits the matching honest transaction and sees it accepted, so the refusal proves
the attack, not a broken builder. A few defences are the ledger's own (consumed inputs,
signatures over the body): those tests assert the ledger rule instead.

One deployment is shared by the module (tests leave it as they found it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from cbor2 import CBORTag
from pycardano import (
    Address,
    MultiAsset,
    RawPlutusData,
    ScriptHash,
    StakeCredential,
    StakeDeregistrationConway,
    StakeRegistrationConway,
    Transaction,
    TransactionOutput,
    UTxO,
    Value,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "offchain"))

from protocol_fixtures import ProtocolWorld, protocol_world, wallet  # noqa: E402

from chain.contracts import types as t  # noqa: E402
from chain.offchain import scripts as S  # noqa: E402
from chain.offchain.builders import assembly as A  # noqa: E402
from chain.offchain.builders.chain_time import ChainClock, tip_slot  # noqa: E402
from chain.offchain.builders.errors import BuilderError  # noqa: E402
from chain.offchain.builders.lock import escrow_datum  # noqa: E402
from chain.offchain.builders.onchain import (  # noqa: E402
    address_data,
    escrow_datum_of,
    out_ref_data,
)
from chain.offchain.builders.protocol_utxos import resolve  # noqa: E402
from chain.offchain.builders.refund import build_cancel, build_refund  # noqa: E402
from chain.offchain.builders.settle import (  # noqa: E402
    Settlement,
    SettlePlan,
    build_settle_batch,
    plan_settle_batch,
)
from chain.offchain.errors import TransactionRejectedError  # noqa: E402

TRACES = "traces" in inspect.signature(S.protocol_scripts).parameters
ROOT = hashlib.sha256(b"attestations").digest()


# The lock of a short-deadline escrow needs its deadline this far after chain time: the
# job's deadline is read from chain time before the lock is built, and on a busy machine
# seconds pass in between (a margin near the deadline itself made those locks flake).
LOCK_MARGIN_MS = 1_000


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProtocolWorld]:
    with protocol_world(tmp_path_factory.mktemp("attacks"), traces=TRACES) as w:
        w.fund(w.providers[0])
        yield w


# --- helpers ---------------------------------------------------------------------------


def rejected(world: ProtocolWorld, tx: Transaction, *, rule: str) -> str:
    with pytest.raises(TransactionRejectedError) as info:
        world.submit(tx)
    reason = info.value.reason
    assert "400" in reason and rule in reason, reason
    return reason


def rejected_by_script(
    world: ProtocolWorld, tx: Transaction, *, purpose: str, trace: str, index: int | None = None
) -> str:
    """Phase 2 refused `tx` because the script of redeemer `purpose` (#index) failed, not
    because of any phase-1 rule; with traced scripts, with the `trace` message."""
    reason = rejected(world, tx, rule="ScriptFailure")
    where = f"{purpose} #{index if index is not None else ''}"
    assert where in reason, reason
    if TRACES:
        assert trace in reason, reason
    return reason


def malicious(
    world: ProtocolWorld, plan: A.TxPlan, payer: Any, extra_signers: Sequence[Any] = ()
) -> A.BuiltTx:
    """Balance and price a transaction whose scripts are expected to fail: units that the
    evaluator cannot measure are declared anyway so the ledger itself must refuse it."""
    return A.finalize(
        world.context,
        plan,
        payer.utxos(world.context),
        extra_signers=extra_signers,
        on_script_failure=A.declare_share_of_max(world.context),
    )


def honest(world: ProtocolWorld, plan: A.TxPlan, payer: Any) -> A.BuiltTx:
    return A.finalize(world.context, plan, payer.utxos(world.context))


def spend_index(built: A.BuiltTx, utxo: UTxO) -> int:
    return list(built.tx.transaction_body.inputs).index(utxo.input)


def quorum_keys(world: ProtocolWorld) -> list[Any]:
    return [o.signing_key for o in world.oracle_quorum]


def settle_plan(world: ProtocolWorld, settlements: Sequence[Settlement], **kw: Any) -> SettlePlan:
    q = world.oracle_quorum
    return plan_settle_batch(
        world.context,
        world.deployment,
        settlements,
        ROOT,
        b"attack",
        [o.pkh for o in q],
        q[0].address,
        **kw,
    )


def with_redeemer(
    sp: SettlePlan, tamper: Callable[[t.BatchSettle, A.IndexView], t.BatchSettle]
) -> A.TxPlan:
    plan = dataclasses.replace(sp.plan)
    address, amount, _ = plan.withdrawals[0]
    plan.withdrawals = [(address, amount, lambda view: tamper(sp.redeemer(view), view))]
    return plan


def settle(world: ProtocolWorld, plan: A.TxPlan, *, expect: str | None = None) -> Any:
    """Finish a batch plan (quorum signs; the first oracle pays). With `expect`, assert the
    batch script refuses it with that message; otherwise submit it honestly."""
    payer = world.oracle_quorum[0]
    if expect is None:
        return world.submit(A.sign(honest(world, plan, payer), quorum_keys(world)))
    built = malicious(world, plan, payer)
    return rejected_by_script(
        world, A.sign(built, quorum_keys(world)), purpose="reward", index=0, trace=expect
    )


def pay(world: ProtocolWorld, escrow: UTxO, *payouts: tuple[int, int]) -> Settlement:
    return Settlement(escrow, tuple((world.providers[p].address, a) for p, a in payouts))


def send_to_escrow_address(
    world: ProtocolWorld, value: Value, datum: Any, by: Any = None, count: int = 1
) -> list[UTxO]:
    """Outputs at the escrow script made by hand (what the builders never write)."""
    w = by or world.submitter
    outputs = [
        TransactionOutput(world.deployment.escrow_address, value, datum=datum) for _ in range(count)
    ]
    plan = A.TxPlan(change_address=w.address, outputs=outputs)
    tx_id = world.submit(A.sign(honest(world, plan, w), [w.signing_key]))
    return world.utxos_of(tx_id, world.deployment.escrow_address, count)


def ntx_value(
    world: ProtocolWorld, lovelace: int, amount: int, extra: MultiAsset | None = None
) -> Value:
    ma = MultiAsset.from_primitive(
        {
            bytes.fromhex(world.deployment.ntx_policy): {
                bytes.fromhex(world.deployment.ntx_name): amount
            }
        }
    )
    return Value(lovelace, ma + extra if extra is not None else ma)


def payback_plan(
    world: ProtocolWorld,
    escrows: Sequence[UTxO],
    *,
    payer: Any,
    validity_start: int | None,
    outputs: list[TransactionOutput] | None = None,
    redeemers: Sequence[Any] | None = None,
) -> A.TxPlan:
    """A Refund transaction written by hand (works for any datum, even a malformed one)."""
    live = resolve(world.context, world.deployment)
    if outputs is None:
        outputs = [
            TransactionOutput(world.submitter.address, u.output.amount, datum=out_ref_data(u.input))
            for u in escrows
        ]
    reds = redeemers if redeemers is not None else [t.Refund(i) for i in range(len(escrows))]
    return A.TxPlan(
        change_address=payer.address,
        script_inputs=[A.ScriptInput(u, r) for u, r in zip(escrows, reds, strict=True)],
        outputs=outputs,
        reference_inputs=[live.escrow_script],
        validity_start=validity_start,
    )


def expired(world: ProtocolWorld, budget: int = 300, **kw: Any) -> UTxO:
    """A fresh escrow whose deadline has already passed (chain time)."""
    (escrow,) = world.lock(
        [world.job(budget, deadline_in_ms=6_000, **kw)], min_margin_ms=LOCK_MARGIN_MS
    )
    world.wait_until_chain_ms(escrow_datum_of(escrow).deadline + 1_000)
    return escrow


def refund_start(world: ProtocolWorld, escrows: Sequence[UTxO]) -> int:
    clock = ChainClock.of(world.context)
    return max(clock.slot_after(escrow_datum_of(u).deadline) for u in escrows)


def stranger_address(world: ProtocolWorld, payment_of: Address) -> Address:
    """`payment_of`'s payment credential with an attacker's stake credential."""
    attacker = wallet(666, staked=True)
    assert attacker.stake_key is not None
    return Address(
        payment_of.payment_part,
        attacker.stake_key.to_verification_key().hash(),
        network=payment_of.network,
    )


# --- double satisfaction ---------------------------------------------------------------


def test_attack_double_satisfaction_one_payout_for_two_escrows(world: ProtocolWorld) -> None:
    e1, e2 = world.lock([world.job(500), world.job(500)])
    sp = settle_plan(world, [pay(world, e1, (0, 500)), pay(world, e2, (0, 500))])

    def share_first_payout(r: t.BatchSettle, _: A.IndexView) -> t.BatchSettle:
        first, second = r.entries
        shared = t.SettleEntry(second.input_index, [first.payouts[0]], second.refund_index)
        return dataclasses.replace(r, entries=[first, shared])

    plan = with_redeemer(sp, share_first_payout)
    # The second payout output goes to the attacker's change instead.
    plan.outputs = [o for i, o in enumerate(plan.outputs) if i != 2]
    plan.outputs.insert(2, TransactionOutput(world.providers[0].address, Value(2_000_000)))
    settle(world, plan, expect="output indices must strictly increase")
    settle(world, sp.plan)


def test_attack_double_satisfaction_swapped_payouts(world: ProtocolWorld) -> None:
    e1, e2 = world.lock([world.job(300), world.job(700)])
    sp = settle_plan(world, [pay(world, e1, (0, 300)), pay(world, e2, (1, 700))])
    plan = dataclasses.replace(sp.plan)
    outs = list(plan.outputs)
    outs[0], outs[2] = outs[2], outs[0]  # each job's payout output now pays the other job
    plan.outputs = outs
    # The redeemer names outputs only: the first job's payout output now pays 700 NTX,
    # more than its budget of 300 allows.
    settle(world, plan, expect="payouts exceed the budget")
    settle(world, sp.plan)


def test_attack_double_satisfaction_one_refund_output_for_two_escrows(
    world: ProtocolWorld,
) -> None:
    a, b = (expired(world, 100), expired(world, 100))
    payer = world.providers[0]
    start = refund_start(world, [a, b])
    both_to_one = payback_plan(
        world, [a, b], payer=payer, validity_start=start, redeemers=[t.Refund(0), t.Refund(0)]
    )
    both_to_one.outputs = both_to_one.outputs[:1]
    built = malicious(world, both_to_one, payer)
    rejected_by_script(
        world, A.sign(built, [payer.signing_key]), purpose="spend", trace="refund output tagged"
    )
    ok = build_refund(world.context, world.deployment, [a, b], payer.address)
    world.submit(A.sign(ok.built, [payer.signing_key]))


# --- fake escrow / missing authentication ----------------------------------------------


def test_attack_fake_escrow_fake_config_reference(world: ProtocolWorld) -> None:
    attacker = wallet(667)
    world.fund(attacker)
    fake_cfg = t.OracleConfigDatum(
        [attacker.pkh.payload],
        1,
        [attacker.pkh.payload],
        1,
        bytes.fromhex(world.deployment.batch_hash),
    )
    plan = A.TxPlan(
        change_address=attacker.address,
        outputs=[
            TransactionOutput(world.deployment.config_address, Value(3_000_000), datum=fake_cfg)
        ],
    )
    tx_id = world.submit(A.sign(honest(world, plan, attacker), [attacker.signing_key]))
    fake = next(
        u
        for u in world.context.utxos(world.deployment.config_address)
        if str(u.input.transaction_id) == tx_id
    )
    (escrow,) = world.lock([world.job(900)])
    sp = settle_plan(world, [pay(world, escrow, (1, 900))])

    def use_fake(r: t.BatchSettle, view: A.IndexView) -> t.BatchSettle:
        return dataclasses.replace(r, config_ref_index=view.reference_index(fake.input))

    forged = with_redeemer(sp, use_fake)
    forged.reference_inputs = [*forged.reference_inputs, fake]
    forged.required_signers = [attacker.pkh]
    built = malicious(world, forged, attacker)
    rejected_by_script(
        world,
        A.sign(built, [attacker.signing_key]),
        purpose="reward",
        index=0,
        trace="reference input lacks config NFT",
    )
    settle(world, sp.plan)


def test_attack_fake_escrow_entry_names_a_key_input(world: ProtocolWorld) -> None:
    (escrow,) = world.lock([world.job(400)])
    sp = settle_plan(world, [pay(world, escrow, (2, 400))])
    escrow_ref = escrow.input

    def name_fee_input(r: t.BatchSettle, view: A.IndexView) -> t.BatchSettle:
        other = next(i for i, ref in enumerate(view.inputs) if ref != escrow_ref)
        (entry,) = r.entries
        return dataclasses.replace(r, entries=[dataclasses.replace(entry, input_index=other)])

    settle(world, with_redeemer(sp, name_fee_input), expect="entry is not an escrow input")
    settle(world, sp.plan)


def test_attack_fake_escrow_trusting_another_batch_script(world: ProtocolWorld) -> None:
    good = escrow_datum(world.deployment, world.job(100), world.oracle_set)
    foreign = dataclasses.replace(
        good, batch_credential=hashlib.blake2b(b"x", digest_size=28).digest()
    )
    (fake,) = send_to_escrow_address(world, ntx_value(world, 3_000_000, 100), foreign)
    (real,) = world.lock([world.job(100)])
    sp = settle_plan(world, [pay(world, real, (0, 100)), pay(world, fake, (1, 100))], checked=False)
    built = malicious(world, sp.plan, world.oracle_quorum[0])
    rejected_by_script(
        world,
        A.sign(built, quorum_keys(world)),
        purpose="spend",
        index=spend_index(built, fake),
        trace="batch not invoked",
    )
    with pytest.raises(BuilderError, match="does not trust"):
        settle_plan(world, [pay(world, fake, (1, 100))])
    settle(world, settle_plan(world, [pay(world, real, (0, 100))]).plan)


# --- malformed datum -----------------------------------------------------------------------


def test_attack_malformed_datum_is_refused_by_the_batch_but_stays_refundable(
    world: ProtocolWorld,
) -> None:
    clock = ChainClock.of(world.context)
    deadline = clock.posix_ms(tip_slot(world.context)) + 6_000
    submitter = address_data(world.submitter.address)
    # Right in the three fields Refund reads (0, 2, 7); junk everywhere else.
    fields: list[Any] = [bytes.fromhex(world.deployment.batch_hash), 7, submitter, 7, b"", 7, 7]
    fields += [deadline, 7, 7, 7, 7]
    raw = RawPlutusData(
        CBORTag(121, [f if not hasattr(f, "to_primitive") else f.to_primitive() for f in fields])
    )
    (bad,) = send_to_escrow_address(world, ntx_value(world, 3_000_000, 50), raw)
    (real,) = world.lock([world.job(50)])
    sp = settle_plan(world, [pay(world, real, (0, 50))])
    plan = dataclasses.replace(sp.plan)
    plan.script_inputs = [*plan.script_inputs, A.ScriptInput(bad, t.Settle())]
    plan.outputs = [
        *plan.outputs,
        TransactionOutput(world.providers[1].address, ntx_value(world, 2_000_000, 50)),
    ]

    def name_bad_too(r: t.BatchSettle, view: A.IndexView) -> t.BatchSettle:
        entry = t.SettleEntry(
            view.input_index(bad.input),
            [2],
            3,
        )
        entries = sorted([*r.entries, entry], key=lambda e: e.input_index)
        return dataclasses.replace(r, entries=entries)

    plan = with_redeemer(dataclasses.replace(sp, plan=plan), name_bad_too)
    settle(world, plan, expect="")
    with pytest.raises(BuilderError, match="EscrowDatum"):
        settle_plan(world, [pay(world, bad, (1, 50))])
    settle(world, sp.plan)
    # Still refundable after its deadline, by anyone, whatever the other fields hold.
    world.wait_until_chain_ms(deadline + 1_000)
    payer = world.providers[0]
    plan = payback_plan(world, [bad], payer=payer, validity_start=clock.slot_after(deadline))
    world.submit(A.sign(honest(world, plan, payer), [payer.signing_key]))


def test_attack_malformed_datum_oversized_is_refused_at_lock_and_stays_refundable(
    world: ProtocolWorld,
) -> None:
    from chain.offchain.builders.lock import check_escrow_datum

    job = world.job(10, deadline_in_ms=6_000)
    with pytest.raises(BuilderError, match="32-byte"):
        escrow_datum(
            world.deployment, dataclasses.replace(job, job_id=b"\x00" * 600), world.oracle_set
        )
    good = escrow_datum(world.deployment, job, world.oracle_set)
    with pytest.raises(BuilderError):
        check_escrow_datum(dataclasses.replace(good, submitter_pkh=b"\x00" * 5))
    # Written by hand anyway (the datum padded with 60 extra fields), the escrow is not
    # stuck: anyone refunds it whole after the deadline.
    fields = list(good.to_primitive().value) + [bytes(28)] * 60
    big = RawPlutusData(CBORTag(121, fields))
    (bad,) = send_to_escrow_address(world, ntx_value(world, 12_000_000, 10), big)
    assert len(datum_cbor_of(bad)) > 600
    world.wait_until_chain_ms(job.deadline + 1_000)
    payer = world.providers[0]
    plan = payback_plan(world, [bad], payer=payer, validity_start=refund_start_of(world, job))
    tx_id = world.submit(A.sign(honest(world, plan, payer), [payer.signing_key]))
    (back,) = [u for u in world.utxos_of(tx_id, world.submitter.address) if u.output.datum]
    assert back.output.amount == bad.output.amount


def datum_cbor_of(utxo: UTxO) -> bytes:
    from chain.offchain.builders.onchain import datum_cbor

    return datum_cbor(utxo.output.datum)


def refund_start_of(world: ProtocolWorld, job: Any) -> int:
    return ChainClock.of(world.context).slot_after(job.deadline)


# --- token dust --------------------------------------------------------------------------


def test_attack_token_dust_escrow_is_refused_by_the_batch_and_refunded_whole(
    world: ProtocolWorld,
) -> None:
    names = {f"d{i:03d}".encode().hex(): 1 for i in range(200)}
    world.devnet.wait_for_tx(
        world.devnet.fund(str(world.submitter.address), lovelace=20_000_000, assets=names)
    )
    faucet_policy = bytes.fromhex(world.devnet.admin_status()["faucet_policy_id"])
    junk = MultiAsset.from_primitive({faucet_policy: {bytes.fromhex(n): 1 for n in names}})
    # Room for building and evaluating a 200-token batch before the deadline, even when the
    # machine is busy (chain time runs ahead of the wall clock on fast devnet blocks): at
    # 30 s a loaded CI run once saw the batch expire (OutsideValidityIntervalUTxO) before
    # the script could refuse it.
    job = world.job(100, deadline_in_ms=60_000)
    (dusty,) = send_to_escrow_address(
        world,
        ntx_value(world, 15_000_000, 100, junk),
        escrow_datum(world.deployment, job, world.oracle_set),
    )
    with pytest.raises(BuilderError, match="other than its NTX"):
        settle_plan(world, [pay(world, dusty, (0, 100))])
    sp = settle_plan(world, [pay(world, dusty, (0, 100))], checked=False)
    settle(world, sp.plan, expect="escrow holds other tokens")
    world.wait_until_chain_ms(job.deadline + 1_000, timeout=120.0)
    payer = world.providers[0]
    refund = build_refund(world.context, world.deployment, [dusty], payer.address)
    tx_id = world.submit(A.sign(refund.built, [payer.signing_key]))
    (back,) = [u for u in world.utxos_of(tx_id, world.submitter.address) if u.output.datum]
    assert back.output.amount == dusty.output.amount


# --- other redeemer ----------------------------------------------------------------------


def test_attack_other_redeemer_refund_before_the_deadline(world: ProtocolWorld) -> None:
    (escrow,) = world.lock([world.job(100)])
    payer = world.providers[0]
    plan = payback_plan(world, [escrow], payer=payer, validity_start=tip_slot(world.context))
    built = malicious(world, plan, payer)
    rejected_by_script(
        world, A.sign(built, [payer.signing_key]), purpose="spend", trace="deadline not passed"
    )
    settle(world, settle_plan(world, [pay(world, escrow, (0, 100))]).plan)


def test_attack_other_redeemer_batch_admin_for_a_withdrawal(world: ProtocolWorld) -> None:
    (escrow,) = world.lock([world.job(100)])
    sp = settle_plan(world, [pay(world, escrow, (0, 100))])
    plan = dataclasses.replace(sp.plan)
    address, amount, _ = plan.withdrawals[0]
    plan.withdrawals = [
        (address, amount, lambda view: t.BatchAdmin(view.reference_index(sp.protocol.config.input)))
    ]
    settle(world, plan, expect="withdrawal needs a BatchSettle redeemer")
    settle(world, sp.plan)


def test_attack_other_redeemer_unknown_escrow_redeemer(world: ProtocolWorld) -> None:
    escrow = expired(world, 100)
    payer = world.providers[0]
    start = refund_start(world, [escrow])
    plan = payback_plan(
        world,
        [escrow],
        payer=payer,
        validity_start=start,
        redeemers=[RawPlutusData(CBORTag(128, [0]))],
    )
    built = malicious(world, plan, payer)
    rejected_by_script(world, A.sign(built, [payer.signing_key]), purpose="spend", trace="")
    plan = payback_plan(world, [escrow], payer=payer, validity_start=start)
    world.submit(A.sign(honest(world, plan, payer), [payer.signing_key]))


def test_attack_other_redeemer_refund_next_to_a_batch(world: ProtocolWorld) -> None:
    old = expired(world, 100)
    (live,) = world.lock([world.job(100)])
    sp = settle_plan(world, [pay(world, live, (0, 100))])
    plan = dataclasses.replace(sp.plan)
    plan.script_inputs = [*plan.script_inputs, A.ScriptInput(old, t.Refund(len(plan.outputs)))]
    plan.outputs = [
        *plan.outputs,
        TransactionOutput(
            world.submitter.address, old.output.amount, datum=out_ref_data(old.input)
        ),
    ]
    plan.validity_start = refund_start(world, [old])
    built = malicious(world, plan, world.oracle_quorum[0])
    rejected_by_script(
        world,
        A.sign(built, quorum_keys(world)),
        purpose="spend",
        index=spend_index(built, old),
        trace="no withdrawal beside a refund or cancel",
    )
    settle(world, sp.plan)
    payer = world.providers[0]
    refund = build_refund(world.context, world.deployment, [old], payer.address)
    world.submit(A.sign(refund.built, [payer.signing_key]))


def test_attack_other_redeemer_cancel_without_oracle_quorum(world: ProtocolWorld) -> None:
    (escrow,) = world.lock([world.job(100)])
    ok = build_cancel(
        world.context,
        world.deployment,
        [escrow],
        [o.pkh for o in world.oracle_quorum],
        world.submitter.address,
    )
    live = resolve(world.context, world.deployment)
    plan = A.TxPlan(
        change_address=world.submitter.address,
        script_inputs=[
            A.ScriptInput(escrow, lambda v: t.Cancel(v.reference_index(live.config.input), 0))
        ],
        outputs=[ok.built.tx.transaction_body.outputs[0]],
        reference_inputs=[live.config, live.escrow_script],
        required_signers=[world.submitter.pkh],
        ttl=ok.built.tx.transaction_body.ttl,
    )
    built = malicious(world, plan, world.submitter)
    rejected_by_script(
        world, A.sign(built, [world.submitter.signing_key]), purpose="spend", trace="oracle quorum"
    )
    keys = [world.submitter.signing_key, *quorum_keys(world)]
    world.submit(A.sign(ok.built, keys))


# --- other token name / infinite mint ----------------------------------------------------


def _config_mint_plan(
    world: ProtocolWorld,
    seed: UTxO,
    names: dict[bytes, int],
    with_seed: bool,
    to: Address | None = None,
) -> A.TxPlan:
    """Mint under the config policy of `seed` (the oracle-config script of that seed) into
    that script's own address, or `to`."""
    policy = S.apply_params("oracle_config", S.out_ref(seed.input), traces=TRACES)
    policy_id = S.script_hash(policy)
    own = Address(policy_id, network=world.deployment.pycardano_network)
    cfg = t.OracleConfigDatum(
        sorted(o.pkh.payload for o in world.oracles),
        1,
        [world.admin.pkh.payload],
        1,
        bytes.fromhex(world.deployment.batch_hash),
    )
    assets = MultiAsset.from_primitive({policy_id.payload: dict(names)})
    return A.TxPlan(
        change_address=world.admin.address,
        key_inputs=[seed] if with_seed else [],
        outputs=[A.output_with_min_ada(world.context, to or own, assets, datum=cfg)],
        mints=[A.ScriptMint(policy, dict(names), t.MintConfigNft(0))],
        scripts=[policy],
    )


def test_attack_extra_mint_second_config_nft_or_other_name(world: ProtocolWorld) -> None:
    admin = world.admin
    world.fund(admin, 50_000_000)
    seed = max(
        admin.utxos(world.context),
        key=lambda u: (not u.output.amount.multi_asset, u.output.amount.coin),
    )
    for names in ({S.CONFIG_NFT_NAME: 2}, {S.CONFIG_NFT_NAME: 1, b"proofnet-config2": 1}):
        built = malicious(world, _config_mint_plan(world, seed, names, True), admin)
        rejected_by_script(
            world, A.sign(built, [admin.signing_key]), purpose="mint", trace="mint exactly one NFT"
        )
    # The one honest mint of this (unrelated) policy is accepted, once.
    built = honest(world, _config_mint_plan(world, seed, {S.CONFIG_NFT_NAME: 1}, True), admin)
    world.submit(A.sign(built, [admin.signing_key]))


def _fresh_seed(world: ProtocolWorld) -> UTxO:
    admin = world.admin
    world.fund(admin, 50_000_000)
    return max(
        admin.utxos(world.context),
        key=lambda u: (
            not u.output.amount.multi_asset,
            u.output.script is None,
            u.output.amount.coin,
        ),
    )


@pytest.mark.parametrize("where", ["key wallet", "another script"])
def test_attack_config_nft_minted_outside_the_config_script(
    world: ProtocolWorld, where: str
) -> None:
    """Mint a config NFT (seed spent, valid datum) into the attacker's key wallet, or to a
    script of its own, where readers trusting the NFT alone would take it for the config."""
    admin = world.admin
    seed = _fresh_seed(world)
    away = (
        admin.address
        if where == "key wallet"
        else Address(ScriptHash(bytes(28)), network=world.deployment.pycardano_network)
    )
    one = {S.CONFIG_NFT_NAME: 1}
    built = malicious(world, _config_mint_plan(world, seed, one, True, to=away), admin)
    rejected_by_script(
        world,
        A.sign(built, [admin.signing_key]),
        purpose="mint",
        trace="config NFT must land at the config script",
    )
    # The honest twin: the same mint into the policy's own script is accepted.
    world.submit(
        A.sign(honest(world, _config_mint_plan(world, seed, one, True), admin), [admin.signing_key])
    )


def test_attack_extra_mint_config_nft_again_without_the_seed(world: ProtocolWorld) -> None:
    seed_ref = world.deployment.ref("seed")
    seed = UTxO(seed_ref, TransactionOutput(world.admin.address, Value(1)))
    built = malicious(
        world, _config_mint_plan(world, seed, {S.CONFIG_NFT_NAME: 1}, False), world.admin
    )
    rejected_by_script(
        world, A.sign(built, [world.admin.signing_key]), purpose="mint", trace="seed UTxO not spent"
    )
    assert len(resolve(world.context, world.deployment).config.output.amount.multi_asset) == 1


def test_attack_extra_mint_test_ntx_without_the_admin(world: ProtocolWorld) -> None:
    attacker = world.providers[0]
    policy = S.ntx_test_policy(world.admin.pkh, traces=TRACES)
    policy_id = S.script_hash(policy)
    assets = MultiAsset.from_primitive({policy_id.payload: {b"NTX": 10**9}})
    plan = A.TxPlan(
        change_address=attacker.address,
        outputs=[A.output_with_min_ada(world.context, attacker.address, assets)],
        mints=[A.ScriptMint(policy, {b"NTX": 10**9}, t.MintTestNtx())],
        scripts=[policy],
    )
    built = malicious(world, plan, attacker)
    rejected_by_script(
        world,
        A.sign(built, [attacker.signing_key]),
        purpose="mint",
        trace="minting needs the admin",
    )
    plan.required_signers = [world.admin.pkh]
    world.submit(
        A.sign(honest(world, plan, attacker), [attacker.signing_key, world.admin.signing_key])
    )


# --- reference scripts parked on refunds ---------------------------------------------------


def test_attack_reference_script_parked_on_the_refund_output(world: ProtocolWorld) -> None:
    """Anyone may refund after the deadline; the attacker attaches a reference script to the
    submitter's refund output, so every later spend of those funds pays the ledger's
    reference-script fee (and builders that skipped such UTxOs saw no funds)."""
    job = dataclasses.replace(world.job(100, deadline_in_ms=6_000), extra_lovelace=5_000_000)
    (escrow,) = world.lock([job], min_margin_ms=LOCK_MARGIN_MS)
    world.wait_until_chain_ms(escrow_datum_of(escrow).deadline + 1_000)
    payer = world.providers[0]
    start = refund_start(world, [escrow])
    parked = S.ntx_test_policy(world.admin.pkh)
    outputs = [
        TransactionOutput(
            world.submitter.address,
            escrow.output.amount,
            datum=out_ref_data(escrow.input),
            script=parked,
        )
    ]
    assert escrow.output.amount.coin >= A.min_ada_of(world.context, outputs[0])
    plan = payback_plan(world, [escrow], payer=payer, validity_start=start, outputs=outputs)
    built = malicious(world, plan, payer)
    rejected_by_script(
        world,
        A.sign(built, [payer.signing_key]),
        purpose="spend",
        trace="refund output carries a reference script",
    )
    ok = build_refund(world.context, world.deployment, [escrow], payer.address)
    tx_id = world.submit(A.sign(ok.built, [payer.signing_key]))
    back = [u for u in world.utxos_of(tx_id, world.submitter.address) if u.output.datum]
    assert len(back) == 1 and back[0].output.script is None


# --- staking credential hijack -----------------------------------------------------------


def test_attack_stake_hijack_remainder_output(world: ProtocolWorld) -> None:
    (escrow,) = world.lock([world.job(1_000)])
    sp = settle_plan(world, [pay(world, escrow, (0, 400))])
    plan = dataclasses.replace(sp.plan)
    rest = plan.outputs[1]
    hijacked = stranger_address(world, world.submitter.address)
    plan.outputs = [plan.outputs[0], TransactionOutput(hijacked, rest.amount), *plan.outputs[2:]]
    settle(world, plan, expect="remainder must go to the submitter's full address")
    settle(world, sp.plan)


def test_attack_stake_hijack_payout_output(world: ProtocolWorld) -> None:
    """Payees are the oracle quorum's choice: the redeemer names no address, so the script
    cannot tell a hijacked payout address from the attested one (the quorum's co-signers
    and auditors check payees against the attestations: tests/oracle, auditor.audit).
    Without the quorum's signatures, no payout address can be chosen at all."""
    (escrow,) = world.lock([world.job(1_000)])
    sp = settle_plan(world, [pay(world, escrow, (1, 1_000))])
    plan = dataclasses.replace(sp.plan)
    out = plan.outputs[0]
    plan.outputs = [
        TransactionOutput(stranger_address(world, world.providers[1].address), out.amount),
        *plan.outputs[1:],
    ]
    payer = world.oracle_quorum[0]
    plan.required_signers = [payer.pkh]  # one oracle short of the quorum
    built = malicious(world, plan, payer)
    rejected_by_script(
        world,
        A.sign(built, quorum_keys(world)[:1]),
        purpose="reward",
        index=0,
        trace="no oracle quorum",
    )
    settle(world, sp.plan)


def test_attack_stake_hijack_refund_output(world: ProtocolWorld) -> None:
    escrow = expired(world, 100)
    payer = world.providers[0]
    start = refund_start(world, [escrow])
    hijacked = stranger_address(world, world.submitter.address)
    outputs = [TransactionOutput(hijacked, escrow.output.amount, datum=out_ref_data(escrow.input))]
    plan = payback_plan(world, [escrow], payer=payer, validity_start=start, outputs=outputs)
    built = malicious(world, plan, payer)
    rejected_by_script(
        world,
        A.sign(built, [payer.signing_key]),
        purpose="spend",
        trace="refund must go to the submitter",
    )
    world.submit(
        A.sign(
            honest(world, payback_plan(world, [escrow], payer=payer, validity_start=start), payer),
            [payer.signing_key],
        )
    )


# --- time handling -----------------------------------------------------------------------


def test_attack_time_bounds_settle_after_the_deadline(world: ProtocolWorld) -> None:
    (escrow,) = world.lock([world.job(100, deadline_in_ms=120_000)], min_margin_ms=LOCK_MARGIN_MS)
    sp = settle_plan(world, [pay(world, escrow, (0, 100))])
    clock = ChainClock.of(world.context)
    plan = dataclasses.replace(sp.plan)
    plan.ttl = clock.slot_at_or_before(escrow_datum_of(escrow).deadline) + 30
    settle(world, plan, expect="escrow deadline passed")
    settle(world, sp.plan)


def test_attack_time_bounds_settle_without_upper_bound(world: ProtocolWorld) -> None:
    (escrow,) = world.lock([world.job(100)])
    sp = settle_plan(world, [pay(world, escrow, (0, 100))])
    plan = dataclasses.replace(sp.plan)
    plan.ttl = None
    settle(world, plan, expect="finite upper bound")
    settle(world, sp.plan)


def test_attack_time_bounds_refund_without_or_before_lower_bound(world: ProtocolWorld) -> None:
    escrow = expired(world, 100)
    payer = world.providers[0]
    clock = ChainClock.of(world.context)
    deadline = escrow_datum_of(escrow).deadline
    for start, trace in (
        (None, "finite lower bound"),
        (clock.slot_at_or_before(deadline), "deadline not passed"),
    ):
        built = malicious(
            world, payback_plan(world, [escrow], payer=payer, validity_start=start), payer
        )
        rejected_by_script(world, A.sign(built, [payer.signing_key]), purpose="spend", trace=trace)
    ok = build_refund(world.context, world.deployment, [escrow], payer.address)
    world.submit(A.sign(ok.built, [payer.signing_key]))


def test_attack_time_bounds_cancel_after_its_window(world: ProtocolWorld) -> None:
    (escrow,) = world.lock([world.job(100, cancel_until_in_ms=600_000)])
    signers = [o.pkh for o in world.oracle_quorum]
    ok = build_cancel(world.context, world.deployment, [escrow], signers, world.submitter.address)
    keys = [world.submitter.signing_key, *quorum_keys(world)]
    late = build_cancel(
        world.context,
        world.deployment,
        [escrow],
        signers,
        world.submitter.address,
        horizon_slots=10_000,
    )
    assert late.built.tx.transaction_body.ttl == ok.built.tx.transaction_body.ttl  # clamped
    until = escrow_datum_of(escrow).cancel_allowed_until
    assert isinstance(until, t.SomePosixTime)
    body_plan = A.TxPlan(
        change_address=world.submitter.address,
        script_inputs=[
            A.ScriptInput(
                escrow,
                lambda v: t.Cancel(
                    v.reference_index(resolve(world.context, world.deployment).config.input), 0
                ),
            )
        ],
        outputs=[ok.built.tx.transaction_body.outputs[0]],
        reference_inputs=[
            resolve(world.context, world.deployment).config,
            resolve(world.context, world.deployment).escrow_script,
        ],
        required_signers=list(ok.built.tx.transaction_body.required_signers or []),
        ttl=ChainClock.of(world.context).slot_at_or_before(until.time) + 30,
    )
    built = malicious(world, body_plan, world.submitter)
    rejected_by_script(world, A.sign(built, keys), purpose="spend", trace="cancel window closed")
    world.submit(A.sign(ok.built, keys))


# --- signature replay / domain separation ---------------------------------------------------


def test_attack_replay_a_settled_batch(world: ProtocolWorld) -> None:
    (escrow,) = world.lock([world.job(100)])
    q = world.oracle_quorum
    batch = build_settle_batch(
        world.context,
        world.deployment,
        [pay(world, escrow, (0, 100))],
        ROOT,
        b"replay",
        [o.pkh for o in q],
        q[0].address,
    )
    signed = A.sign(batch.built, quorum_keys(world))
    world.submit(signed)
    # The ledger's own defence: the escrow is consumed, the approval cannot run twice.
    rejected(world, signed, rule="BadInputsUTxO")


def test_attack_replay_oracle_signatures_on_another_body(world: ProtocolWorld) -> None:
    e1, e2 = world.lock([world.job(100), world.job(100)])
    q = world.oracle_quorum
    approved = build_settle_batch(
        world.context,
        world.deployment,
        [pay(world, e1, (0, 100))],
        ROOT,
        b"approved",
        [o.pkh for o in q],
        q[0].address,
    )
    approvals = A.sign(approved.built, quorum_keys(world)).transaction_witness_set.vkey_witnesses
    other = build_settle_batch(
        world.context,
        world.deployment,
        [pay(world, e2, (3, 100))],
        ROOT,
        b"approved",
        [o.pkh for o in q],
        q[0].address,
    )
    replayed = A.add_witnesses(other.built.tx, list(approvals or []))
    rejected(world, replayed, rule="InvalidWitnessesUTXOW")
    world.submit(A.sign(other.built, quorum_keys(world)))


def test_attack_replay_signatures_not_declared_as_signers(world: ProtocolWorld) -> None:
    (escrow,) = world.lock([world.job(100)])
    sp = settle_plan(world, [pay(world, escrow, (0, 100))])
    plan = dataclasses.replace(sp.plan)
    # Oracle witnesses that are not required signers are invisible to scripts.
    plan.required_signers = []
    payer = world.oracle_quorum[0]
    built = malicious(world, plan, payer, [o.pkh for o in world.oracle_quorum])
    tx = A.sign(built, quorum_keys(world))
    rejected_by_script(world, tx, purpose="reward", index=0, trace="no oracle quorum")
    settle(world, sp.plan)


# --- certificate deregistration ------------------------------------------------------------


def _dereg_plan(world: ProtocolWorld, redeemer: Any, signers: list[Any], payer: Any) -> A.TxPlan:
    live = resolve(world.context, world.deployment)
    deposit = int(world.context.protocol_param.key_deposit)
    cred = StakeCredential(ScriptHash(bytes.fromhex(world.deployment.batch_hash)))
    return A.TxPlan(
        change_address=payer.address,
        reference_inputs=[live.config, live.batch_script],
        certificates=[(StakeDeregistrationConway(cred, deposit), redeemer)],
        required_signers=[s.pkh for s in signers],
        refunds=deposit,
    )


def test_attack_deregistration_of_the_batch_credential(world: ProtocolWorld) -> None:
    attacker = world.providers[0]
    config = resolve(world.context, world.deployment).config.input
    admin_red = lambda v: t.BatchAdmin(v.reference_index(config))  # noqa: E731
    settle_red = lambda v: t.BatchSettle(v.reference_index(config), [], ROOT, b"x")  # noqa: E731
    for redeemer, trace in ((admin_red, "no admins"), (settle_red, "needs a BatchAdmin redeemer")):
        built = malicious(world, _dereg_plan(world, redeemer, [], attacker), attacker)
        rejected_by_script(
            world, A.sign(built, [attacker.signing_key]), purpose="cert", index=0, trace=trace
        )
    # The admin quorum may; anyone may register it again (the deployment is restored).
    admin = world.admin
    built = honest(world, _dereg_plan(world, admin_red, [admin], admin), admin)
    world.submit(A.sign(built, [admin.signing_key]))
    deposit = int(world.context.protocol_param.key_deposit)
    cred = StakeCredential(ScriptHash(bytes.fromhex(world.deployment.batch_hash)))
    plan = A.TxPlan(
        change_address=attacker.address,
        reference_inputs=[resolve(world.context, world.deployment).batch_script],
        certificates=[(StakeRegistrationConway(cred, deposit), t.BatchAdmin(0))],
        deposits=deposit,
    )
    world.submit(A.sign(honest(world, plan, attacker), [attacker.signing_key]))


# --- missed input / bad indices --------------------------------------------------------------


@pytest.mark.parametrize(
    "tamper,trace",
    [
        ("omit", "every script input must be an escrow this batch settles"),
        ("repeat", "escrow input indices must strictly increase"),
        ("reorder", "escrow input indices must strictly increase"),
    ],
)
def test_attack_bad_indices(world: ProtocolWorld, tamper: str, trace: str) -> None:
    e1, e2 = world.lock([world.job(100), world.job(100)])
    sp = settle_plan(world, [pay(world, e1, (0, 100)), pay(world, e2, (1, 100))])

    def bad(r: t.BatchSettle, _: A.IndexView) -> t.BatchSettle:
        a, b = r.entries
        if tamper == "omit":
            return dataclasses.replace(r, entries=[a])
        if tamper == "repeat":
            return dataclasses.replace(
                r, entries=[a, dataclasses.replace(b, input_index=a.input_index)]
            )
        return dataclasses.replace(r, entries=[b, a])

    settle(world, with_redeemer(sp, bad), expect=trace)
    settle(world, sp.plan)


# --- contention / spam ---------------------------------------------------------------------


def test_attack_spam_junk_at_the_escrow_address_does_not_stop_batches(world: ProtocolWorld) -> None:
    spammer = world.providers[0]
    junk = send_to_escrow_address(world, Value(1_500_000), None, by=spammer, count=20)
    tiny = world.lock([world.job(1) for _ in range(5)])
    real = world.lock([world.job(500), world.job(500)])
    with pytest.raises(BuilderError):
        settle_plan(world, [pay(world, junk[0], (0, 1))])
    sp = settle_plan(world, [pay(world, e, (i, 500)) for i, e in enumerate(real)])
    plan = dataclasses.replace(sp.plan)
    plan.script_inputs = [*plan.script_inputs, A.ScriptInput(junk[0], t.Settle())]
    built = malicious(world, plan, world.oracle_quorum[0])
    rejected_by_script(
        world,
        A.sign(built, quorum_keys(world)),
        purpose="spend",
        index=spend_index(built, junk[0]),
        trace="",
    )
    # The builder chooses what to settle: the real escrows go through, tiny ones later.
    settle(world, sp.plan)
    settle(world, settle_plan(world, [pay(world, e, (2, 1)) for e in tiny]).plan)


# --- locked value / min-ADA ------------------------------------------------------------------


def test_attack_locked_value_ntx_remainder_kept_back(world: ProtocolWorld) -> None:
    (escrow,) = world.lock([world.job(1_000)])
    sp = settle_plan(world, [pay(world, escrow, (0, 100))])
    plan = dataclasses.replace(sp.plan)
    rest = plan.outputs[1]
    short = ntx_value(world, rest.amount.coin, 899)
    plan.outputs = [plan.outputs[0], TransactionOutput(rest.address, short), *plan.outputs[2:]]
    settle(world, plan, expect="NTX remainder")
    settle(world, sp.plan)


def test_attack_locked_value_ada_remainder_kept_back(world: ProtocolWorld) -> None:
    job = dataclasses.replace(world.job(1_000), extra_lovelace=10_000_000)
    (escrow,) = world.lock([job])
    sp = settle_plan(world, [pay(world, escrow, (0, 100))])
    plan = dataclasses.replace(sp.plan)
    rest = plan.outputs[1]
    assert rest.amount.coin > 10_000_000
    plan.outputs = [
        plan.outputs[0],
        TransactionOutput(rest.address, rest.amount - Value(8_000_000)),
        *plan.outputs[2:],
    ]
    settle(world, plan, expect="ADA remainder")
    settle(world, sp.plan)


def test_attack_locked_value_partial_refund(world: ProtocolWorld) -> None:
    job = dataclasses.replace(world.job(300, deadline_in_ms=6_000), extra_lovelace=3_000_000)
    (escrow,) = world.lock([job], min_margin_ms=LOCK_MARGIN_MS)
    world.wait_until_chain_ms(job.deadline + 1_000)
    payer = world.providers[0]
    start = refund_start(world, [escrow])
    partial = [
        TransactionOutput(
            world.submitter.address,
            escrow.output.amount - Value(2_000_000),
            datum=out_ref_data(escrow.input),
        )
    ]
    built = malicious(
        world,
        payback_plan(world, [escrow], payer=payer, validity_start=start, outputs=partial),
        payer,
    )
    rejected_by_script(
        world, A.sign(built, [payer.signing_key]), purpose="spend", trace="whole escrow value"
    )
    ok = build_refund(world.context, world.deployment, [escrow], payer.address)
    world.submit(A.sign(ok.built, [payer.signing_key]))
