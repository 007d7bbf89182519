"""What one batch settlement transaction costs: size, execution units and fee.

`batch_costs(n)` builds a realistic settlement transaction of `n` escrows as pycardano
objects (escrow inputs with inline datums, the config reference input, the escrow and batch
scripts as reference scripts, one payout and one refund output per escrow, the zero
withdrawal, the oracle quorum as required signers and vkey witnesses, collateral,
a CIP-20 memo) and runs every redeemer through the devnet's phase-2 evaluator
(`chain.devnet.phase2`, the ledger's script contexts and cost model). No chain is needed,
so it runs in tests; `max_settlements` searches the largest batch within the protocol
limits. The builders' `pack_settle_batch` answers the same question on a live chain.

    python -m chain.offchain.measure            # the table recorded in docs/protocol.md
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pycardano import (
    Address,
    AuxiliaryData,
    ExecutionUnits,
    Metadata,
    MultiAsset,
    Network,
    Redeemer,
    RedeemerTag,
    Transaction,
    TransactionBody,
    TransactionId,
    TransactionInput,
    TransactionOutput,
    TransactionWitnessSet,
    Value,
    VerificationKeyHash,
    VerificationKeyWitness,
    Withdrawals,
    script_data_hash,
)
from pycardano.key import PaymentSigningKey, PaymentVerificationKey

from chain.contracts import types as t
from chain.deep_stack import deep_recursion
from chain.devnet.cost_models import default_cost_models
from chain.devnet.fees import min_fee
from chain.devnet.params import ProtocolParams
from chain.devnet.phase2 import SlotConfig, evaluate_redeemers
from chain.offchain import scripts as S
from chain.offchain.oracle_set import of_config

NTX_POLICY = bytes.fromhex("88b60b51a3dcd3a6134bb1c0fdd2837d8cc87abd27dbd0c3a494869f")
NTX_NAME = b"NTX"
BUDGET = 1_000
PAY = 600
ESCROW_LOVELACE = 3_000_000
PAYOUT_LOVELACE = 1_300_000
ORACLES = 3
THRESHOLD = 2
SLOT = SlotConfig(zero_time_ms=1_700_000_000_000, zero_slot=0, slot_length_ms=1_000)
VALID_FROM_SLOT = 1_000
VALID_TO_SLOT = 2_000
DEADLINE_MS = SLOT.posix_ms(VALID_TO_SLOT) + 3_600_000


class MeasureError(ValueError):
    """The measured transaction does not evaluate (a bug in the scripts or in this file)."""


class OutOfBudget(MeasureError):
    """A script alone needs more than the whole transaction's execution budget."""


@dataclass(frozen=True)
class BatchCost:
    """One settlement transaction of `n` escrows. `fee` is the Conway minimum fee
    (size, execution units, reference scripts); `per_settlement` is `fee / n`."""

    n: int
    size: int
    mem: int
    steps: int
    fee: int
    ref_script_bytes: int

    @property
    def per_settlement(self) -> float:
        return self.fee / self.n if self.n else float(self.fee)

    def fits(self, params: ProtocolParams | None = None) -> bool:
        p = params or ProtocolParams()
        return (
            self.size <= p.max_tx_size
            and self.mem <= p.max_tx_ex_mem
            and self.steps <= p.max_tx_ex_steps
        )

    def binding_limit(self, params: ProtocolParams | None = None) -> str:
        """The limit this transaction is closest to, as a share of it."""
        p = params or ProtocolParams()
        shares = {
            "size": self.size / p.max_tx_size,
            "memory": self.mem / p.max_tx_ex_mem,
            "steps": self.steps / p.max_tx_ex_steps,
        }
        return max(shares, key=lambda k: shares[k])


def _h(tag: str, size: int) -> bytes:
    return hashlib.blake2b(tag.encode(), digest_size=size).digest()


def _ref(tag: str, index: int = 0) -> TransactionInput:
    return TransactionInput(TransactionId(_h(tag, 32)), index)


def _key(tag: str) -> PaymentSigningKey:
    return PaymentSigningKey(_h(tag, 32))


def _pkh(tag: str) -> VerificationKeyHash:
    return PaymentVerificationKey.from_signing_key(_key(tag)).hash()


def _ledger_address(addr: Address) -> t.Address:
    """The Plutus form of a key address (payment key, optional stake key)."""
    pay = t.PubKeyCredential(bytes(addr.payment_part.payload))  # type: ignore[union-attr]
    staking: t.SomeStakingCredential | t.NoStakingCredential = t.NoStakingCredential()
    if addr.staking_part is not None:
        stake = t.PubKeyCredential(bytes(addr.staking_part.payload))  # type: ignore[union-attr]
        staking = t.SomeStakingCredential(t.StakingHash(stake))
    return t.Address(pay, staking)


def _ntx_value(lovelace: int, ntx: int) -> Value:
    if ntx <= 0:
        return Value(lovelace)
    return Value(lovelace, MultiAsset.from_primitive({NTX_POLICY: {NTX_NAME: ntx}}))


@functools.lru_cache(maxsize=2)
def _deployment(traces: bool = False) -> S.ProtocolScripts:
    return S.protocol_scripts(_ref("measure-seed"), Network.TESTNET, traces=traces)


@dataclass(frozen=True)
class _Escrow:
    ref: TransactionInput
    output: TransactionOutput
    submitter: Address
    provider: Address


def _escrows(
    ps: S.ProtocolScripts, n: int, *, distinct: bool, providers: int, oracle_set: bytes
) -> list[_Escrow]:
    escrows = []
    for i in range(n):
        who = f"sub{i}" if distinct else "sub"
        submitter = Address(_pkh(who), _pkh(f"stake-{who}"), network=ps.network)
        provider_tag = f"prov{i}" if distinct else f"prov{i % providers}"
        provider = Address(_pkh(provider_tag), network=ps.network)
        datum = t.EscrowDatum(
            batch_credential=ps.batch_hash.payload,
            job_id=_h(f"job{i}", 32),
            submitter=_ledger_address(submitter),
            submitter_pkh=bytes(_pkh(who).payload),
            budget=BUDGET,
            ntx_policy=NTX_POLICY,
            ntx_name=NTX_NAME,
            deadline=DEADLINE_MS,
            config_policy=ps.config_policy.payload,
            config_name=t.CONFIG_NFT_NAME,
            cancel_allowed_until=t.NoPosixTime(),
            nonce=i,
            oracle_set=oracle_set,
        )
        out = TransactionOutput(
            ps.escrow_address(), _ntx_value(ESCROW_LOVELACE, BUDGET), datum=datum
        )
        escrows.append(_Escrow(_ref(f"escrow{i}"), out, submitter, provider))
    return sorted(escrows, key=lambda e: (e.ref.transaction_id.payload, e.ref.index))


def _build(
    n: int, *, distinct: bool, refunds: bool, providers: int, traces: bool
) -> tuple[Transaction, dict[TransactionInput, TransactionOutput], int]:
    ps = _deployment(traces)
    net = ps.network
    oracle_tags = [f"oracle{i}" for i in range(ORACLES)]
    oracles = sorted(bytes(_pkh(o).payload) for o in oracle_tags)
    admins = sorted(_h(f"admin{i}", 28) for i in range(3))
    cfg = t.OracleConfigDatum(oracles, THRESHOLD, admins, 2, ps.batch_hash.payload)
    nft = MultiAsset.from_primitive({ps.config_policy.payload: {t.CONFIG_NFT_NAME: 1}})
    config_ref = _ref("config-utxo")
    config_out = TransactionOutput(ps.config_address, Value(2_000_000, nft), datum=cfg)
    holder = Address(_pkh("ref-script-holder"), network=net)
    escrow_script_ref = _ref("escrow-script")
    batch_script_ref = _ref("batch-script")
    escrow_script_out = TransactionOutput(holder, 20_000_000, script=ps.escrow)
    batch_script_out = TransactionOutput(holder, 20_000_000, script=ps.batch_settle)
    payer = Address(_pkh("batcher"), network=net)
    fee_ref = _ref("batcher-funds")
    fee_out = TransactionOutput(payer, 50_000_000)

    escrows = _escrows(ps, n, distinct=distinct, providers=providers, oracle_set=of_config(cfg))
    resolved: dict[TransactionInput, TransactionOutput] = {
        config_ref: config_out,
        escrow_script_ref: escrow_script_out,
        batch_script_ref: batch_script_out,
        fee_ref: fee_out,
    }
    for e in escrows:
        resolved[e.ref] = e.output
    inputs = sorted(
        [fee_ref, *(e.ref for e in escrows)], key=lambda r: (r.transaction_id.payload, r.index)
    )
    ref_inputs = sorted(
        [config_ref, escrow_script_ref, batch_script_ref],
        key=lambda r: (r.transaction_id.payload, r.index),
    )

    outputs: list[TransactionOutput] = []
    entries = []
    pay = PAY if refunds else BUDGET
    for e in escrows:
        outputs.append(TransactionOutput(e.provider, _ntx_value(PAYOUT_LOVELACE, pay)))
        payout = len(outputs) - 1
        # The contract always wants the escrow's ADA remainder back; with refunds it also
        # carries the unspent NTX.
        rest = TransactionOutput(
            e.submitter, _ntx_value(ESCROW_LOVELACE - PAYOUT_LOVELACE, BUDGET - pay)
        )
        outputs.append(rest)
        entries.append(t.SettleEntry(inputs.index(e.ref), [payout], len(outputs) - 1))
    outputs.append(TransactionOutput(payer, 40_000_000))  # change

    batch_redeemer = t.BatchSettle(
        ref_inputs.index(config_ref), entries, _h("merkle", 32), _h("batch-id", 32)
    )
    redeemers = [Redeemer(t.Settle(), ExecutionUnits(0, 0)) for _ in escrows] + [
        Redeemer(batch_redeemer, ExecutionUnits(0, 0))
    ]
    for r, e in zip(redeemers, escrows, strict=False):
        r.tag = RedeemerTag.SPEND
        r.index = inputs.index(e.ref)
    redeemers[-1].tag = RedeemerTag.WITHDRAWAL
    redeemers[-1].index = 0

    signers = [_pkh(o) for o in oracle_tags[:THRESHOLD]]
    memo = Metadata({674: {"msg": [f"proofnet batch of {n}", _h("merkle", 32).hex()[:60]]}})
    aux = AuxiliaryData(memo)
    body = TransactionBody(
        inputs=inputs,
        outputs=outputs,
        fee=2_000_000,
        ttl=VALID_TO_SLOT,
        validity_start=VALID_FROM_SLOT,
        withdraws=Withdrawals({bytes(ps.batch_stake_address.to_primitive()): 0}),
        reference_inputs=ref_inputs,
        required_signers=signers,
        collateral=[fee_ref],
        collateral_return=TransactionOutput(payer, 45_000_000),
        total_collateral=5_000_000,
        auxiliary_data_hash=aux.hash(),
    )
    keys = [_key("batcher"), *(_key(o) for o in oracle_tags[:THRESHOLD])]
    ref_bytes = len(bytes(ps.escrow)) + len(bytes(ps.batch_settle))
    tx = _with_units(body, redeemers, keys, aux)
    return tx, resolved, ref_bytes


def _with_units(
    body: TransactionBody,
    redeemers: Sequence[Redeemer],
    keys: Sequence[PaymentSigningKey],
    aux: AuxiliaryData,
) -> Transaction:
    body.script_data_hash = script_data_hash(list(redeemers), [])
    witnesses = TransactionWitnessSet(
        vkey_witnesses=[
            VerificationKeyWitness(PaymentVerificationKey.from_signing_key(k), k.sign(body.hash()))
            for k in keys
        ],
        redeemer=list(redeemers),
    )
    return Transaction(body, witnesses, auxiliary_data=aux)


def _evaluate(
    tx: Transaction, resolved: dict[TransactionInput, TransactionOutput]
) -> list[tuple[int, int]]:
    params = ProtocolParams()
    with deep_recursion():
        results = evaluate_redeemers(
            tx.to_cbor(),
            resolved,
            slot_config=SLOT,
            cost_models=default_cost_models(),
            budget=(params.max_tx_ex_mem, params.max_tx_ex_steps),
        )
    failed = [r for r in results if not r.ok]
    if failed:
        first = failed[0]
        kind = OutOfBudget if "out of budget" in (first.error or "") else MeasureError
        raise kind(f"{len(failed)} redeemer(s) failed, first: {first}")
    return [(r.mem, r.steps) for r in results]


def batch_costs(
    n: int,
    *,
    distinct: bool = True,
    refunds: bool = True,
    providers: int = 10,
    traces: bool = False,
) -> BatchCost:
    """Size, execution units and minimum fee of settling `n` escrows in one transaction.

    `distinct`: every escrow has its own submitter and provider; otherwise payouts rotate
    over `providers` providers. `refunds`: each escrow pays part of its budget and returns
    the NTX rest; otherwise it pays its whole budget (the ADA remainder still goes back).
    """
    if n < 1:
        raise ValueError("a batch settles at least one escrow")
    tx, resolved, ref_bytes = _build(
        n, distinct=distinct, refunds=refunds, providers=providers, traces=traces
    )
    units = _evaluate(tx, resolved)
    # Declare what was measured, so the size counts the real execution-unit fields.
    for r, (mem, steps) in zip(tx.transaction_witness_set.redeemer or [], units, strict=True):
        r.ex_units = ExecutionUnits(mem, steps)
    keys = [_key("batcher"), *(_key(f"oracle{i}") for i in range(THRESHOLD))]
    aux = tx.auxiliary_data
    assert aux is not None
    final = _with_units(tx.transaction_body, tx.transaction_witness_set.redeemer or [], keys, aux)
    size = len(final.to_cbor())
    mem = sum(m for m, _ in units)
    steps = sum(s for _, s in units)
    params = ProtocolParams()
    fee = min_fee(params, size, units, ref_bytes)
    return BatchCost(n, size, mem, steps, fee, ref_bytes)


def max_settlements(
    *, distinct: bool = True, refunds: bool = True, start: int = 10, limit: int = 120
) -> BatchCost:
    """The largest batch that fits the default protocol limits (costs grow with n)."""
    lo = batch_costs(start, distinct=distinct, refunds=refunds)
    if not lo.fits():
        raise MeasureError(f"not even {start} settlements fit: {lo}")
    hi = limit + 1
    low = start
    while hi - low > 1:
        mid = (low + hi) // 2
        try:
            c: BatchCost | None = batch_costs(mid, distinct=distinct, refunds=refunds)
        except OutOfBudget:
            c = None  # one script alone ran past the transaction's budget
        if c is not None and c.fits():
            low, lo = mid, c
        else:
            hi = mid
    return lo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = {}
    for label, distinct, refunds in (("distinct", True, True), ("aggregated", False, False)):
        best = max_settlements(distinct=distinct, refunds=refunds)
        row = asdict(best)
        row["per_settlement"] = round(best.per_settlement)
        row["binding"] = best.binding_limit()
        report[label] = row
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for label, row in report.items():
            print(label, row)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def memory_breakdown(small: int = 10, large: int = 20) -> dict[str, Any]:
    """Where the memory of one more settlement goes: the escrow's Settle spend (one per
    settlement) and the batch script's marginal cost per escrow (its units at `large`
    escrows minus those at `small`, divided by the difference), each split into CEK machine
    steps by kind of term (100 memory units each, Plutus V3 cost model) and builtin calls
    by builtin. Counted by running the real transactions of `batch_costs` through the
    devnet's evaluator with a counting machine."""
    if not 1 <= small < large:
        raise ValueError("need 1 <= small < large")
    runs = {n: _tallies(n) for n in (small, large)}
    escrow = runs[large]["spend"]
    per = {
        key: (runs[large]["reward"].get(key, 0) - runs[small]["reward"].get(key, 0))
        / (large - small)
        for key in set(runs[large]["reward"]) | set(runs[small]["reward"])
    }

    def shape(tally: dict[str, float]) -> dict[str, Any]:
        steps = {k[5:]: round(v) for k, v in tally.items() if k.startswith("step:") and v}
        builtins = {k[8:]: round(v) for k, v in tally.items() if k.startswith("builtin:") and v}
        return {
            "total": round(sum(tally.values())),
            "cek_steps": round(sum(steps.values())),
            "cek_steps_by_term": dict(sorted(steps.items(), key=lambda kv: -kv[1])),
            "builtins": round(sum(builtins.values())),
            "builtins_by_name": dict(sorted(builtins.items(), key=lambda kv: -kv[1])),
        }

    escrow_shape = shape(escrow)
    batch_shape = shape(per)
    return {
        "escrow_settle_spend": escrow_shape,
        "batch_script_per_escrow": batch_shape,
        "total": escrow_shape["total"] + batch_shape["total"],
        "measured_between": [small, large],
    }


def _tallies(n: int) -> dict[str, dict[str, float]]:
    """Memory by category of the first escrow spend ("spend") and of the batch withdrawal
    ("reward") in a settlement of `n` distinct escrows."""
    from uplc.ast import BuiltInFun, BuiltInFunEvalMap
    from uplc.machine import ForcedBuiltIn, budget_cost_of_op_on_model

    from chain.devnet import phase2

    tallies: list[dict[str, float]] = []
    base = phase2.Machine

    class Counting(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.tally: dict[str, float] = {"step:startup": 100}
            tallies.append(self.tally)

        def step_and_maybe_spend(self, term: Any) -> None:
            key = f"step:{type(term).__name__.replace('BoundState', '')}"
            self.tally[key] = self.tally.get(key, 0) + 100
            super().step_and_maybe_spend(term)

        def apply_evaluate(self, context: Any, function: Any, argument: Any) -> Any:
            if isinstance(function, ForcedBuiltIn):
                args = [*function.bound_arguments, argument]
                fun = BuiltInFun(function.builtin)
                if BuiltInFunEvalMap[fun].__code__.co_argcount == len(args):
                    cost = budget_cost_of_op_on_model(
                        self.builtin_cost_model, fun, *(a.ex_mem() for a in args), values=args
                    )
                    key = f"builtin:{fun.name}"
                    self.tally[key] = self.tally.get(key, 0) + cost.memory
            return super().apply_evaluate(context, function, argument)

    tx, resolved, _ = _build(n, distinct=True, refunds=True, providers=10, traces=False)
    phase2.Machine = Counting
    try:
        params = ProtocolParams()
        with deep_recursion():
            results = evaluate_redeemers(
                tx.to_cbor(),
                resolved,
                slot_config=SLOT,
                cost_models=default_cost_models(),
                budget=(params.max_tx_ex_mem, params.max_tx_ex_steps),
            )
    finally:
        phase2.Machine = base
    by_mem: dict[str, dict[str, float]] = {}
    for r in results:
        if not r.ok:
            raise MeasureError(f"redeemer failed while counting: {r}")
        match = [t for t in tallies if round(sum(t.values())) == r.mem]
        if not match:
            raise MeasureError(f"no counted run matches {r.mem} memory units")
        kind = "reward" if r.mem == max(x.mem for x in results) else "spend"
        by_mem.setdefault(kind, match[0])
    return by_mem
