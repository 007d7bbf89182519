"""Turn a transaction plan into a balanced, evaluated, correctly-priced transaction.

Every builder describes WHAT it wants (`TxPlan`: script inputs with their redeemers,
outputs in order, reference inputs, mints, withdrawals, certificates, signers, validity,
metadata) and `finalize` does the rest the same way for all of them:

- picks fee/collateral inputs from the paying wallet and returns the rest as change;
- numbers redeemers the ledger's way (spends by the sorted input set, mints by sorted
  policy, certificates by position, withdrawals by the ledger's reward-account order);
- asks the backend to evaluate the scripts and declares exactly the measured units;
- prices the transaction with the ledger's formula (size with one witness per required
  key, execution units, tiered reference-script fee) and iterates to a fixed point.

The result is unsigned; `sign` adds key witnesses and `add_witnesses` merges witnesses
made elsewhere (co-signing oracles, CIP-30 wallets) without touching the body.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pycardano import (
    Address,
    AlonzoMetadata,
    AuxiliaryData,
    ChainContext,
    CostModels,
    ExecutionUnits,
    Metadata,
    MultiAsset,
    PaymentSigningKey,
    PlutusData,
    PlutusV3Script,
    Redeemer,
    RedeemerKey,
    RedeemerMap,
    RedeemerTag,
    RedeemerValue,
    ScriptHash,
    Transaction,
    TransactionBody,
    TransactionFailedException,
    TransactionInput,
    TransactionOutput,
    TransactionWitnessSet,
    UTxO,
    Value,
    VerificationKey,
    VerificationKeyHash,
    VerificationKeyWitness,
    Withdrawals,
    script_data_hash,
)
from pycardano.certificate import Certificate
from pycardano.serialization import NonEmptyOrderedSet

from chain.offchain.builders import fees
from chain.offchain.builders.errors import (
    BuilderError,
    InsufficientFundsError,
    ScriptEvaluationError,
    TransactionTooLarge,
)
from chain.offchain.errors import TransactionRejectedError

# Collateral is taken from one ADA-only UTxO of the payer holding at least this much, so a
# transaction never risks the payer's tokens and the collateral covers any fee we build.
MIN_COLLATERAL_LOVELACE = 5_000_000
# Fee headroom used only while choosing inputs (the real fee is computed exactly later).
SELECTION_FEE_HEADROOM = 3_000_000


@dataclass(frozen=True)
class IndexView:
    """Where the ledger puts inputs: scripts see inputs and reference inputs sorted by
    (tx id, index), whatever order the builder listed them in."""

    inputs: tuple[TransactionInput, ...]
    reference_inputs: tuple[TransactionInput, ...]

    def input_index(self, ref: TransactionInput) -> int:
        return self.inputs.index(ref)

    def reference_index(self, ref: TransactionInput) -> int:
        return self.reference_inputs.index(ref)


# A redeemer, or a function of the final input order (for redeemers that carry indices:
# fee inputs are chosen late and shift every index).
RedeemerSpec: TypeAlias = PlutusData | Callable[[IndexView], PlutusData]


def _sorted_refs(refs: Iterable[TransactionInput]) -> tuple[TransactionInput, ...]:
    return tuple(sorted(set(refs), key=lambda i: (i.transaction_id.payload, i.index)))


def _resolve(spec: RedeemerSpec, view: IndexView) -> PlutusData:
    return spec(view) if callable(spec) else spec


@dataclass
class ScriptInput:
    """An input locked by a Plutus script; its script comes from a reference input or
    `TxPlan.scripts`."""

    utxo: UTxO
    redeemer: RedeemerSpec


@dataclass
class ScriptMint:
    policy: PlutusV3Script
    assets: dict[bytes, int]
    redeemer: RedeemerSpec
    # The policy travels in the witness set unless a reference input carries it.
    by_reference: bool = False


@dataclass
class TxPlan:
    """What a transaction must contain. Outputs keep this order; `change_address` gets the
    balance after them."""

    change_address: Address
    script_inputs: list[ScriptInput] = field(default_factory=list)
    key_inputs: list[UTxO] = field(default_factory=list)
    outputs: list[TransactionOutput] = field(default_factory=list)
    reference_inputs: list[UTxO] = field(default_factory=list)
    mints: list[ScriptMint] = field(default_factory=list)
    # (reward address, amount, redeemer); the redeemer is None for key-hash accounts.
    withdrawals: list[tuple[Address, int, RedeemerSpec | None]] = field(default_factory=list)
    certificates: list[tuple[Certificate, RedeemerSpec | None]] = field(default_factory=list)
    # Scripts carried in the witness set (those not available by reference).
    scripts: list[PlutusV3Script] = field(default_factory=list)
    required_signers: list[VerificationKeyHash] = field(default_factory=list)
    validity_start: int | None = None
    ttl: int | None = None
    metadata: dict[int, Any] | None = None
    # Deposits paid by certificates (lovelace leaving the transaction's balance) and
    # deposits refunded by deregistrations (lovelace entering it).
    deposits: int = 0
    refunds: int = 0


@dataclass(frozen=True)
class BuiltTx:
    """An unsigned, balanced transaction and what it costs."""

    tx: Transaction
    fee: int
    size: int  # bytes once every required key has signed
    ex_units: tuple[tuple[str, int, int], ...]  # (redeemer "tag:index", mem, steps)
    signers: tuple[VerificationKeyHash, ...]  # every key that must sign
    ref_script_size: int

    @property
    def mem(self) -> int:
        return sum(m for _, m, _ in self.ex_units)

    @property
    def steps(self) -> int:
        return sum(s for _, _, s in self.ex_units)

    @property
    def tx_id(self) -> str:
        return str(self.tx.transaction_body.hash().hex())

    @property
    def cbor_hex(self) -> str:
        return str(self.tx.to_cbor_hex())


# What to declare for a redeemer the evaluator refuses: None raises ScriptEvaluationError;
# a callable gets (tag_index, redeemer count) and returns the units to declare anyway (used
# to submit deliberately failing transactions and see the ledger's phase-2 verdict).
FailurePolicy: TypeAlias = Callable[[str, int], ExecutionUnits] | None


def declare_share_of_max(context: ChainContext) -> Callable[[str, int], ExecutionUnits]:
    pp = context.protocol_param

    def declare(_: str, count: int) -> ExecutionUnits:
        return ExecutionUnits(int(pp.max_tx_ex_mem) // count, int(pp.max_tx_ex_steps) // count)

    return declare


def finalize(
    context: ChainContext,
    plan: TxPlan,
    payer_utxos: Sequence[UTxO],
    *,
    extra_signers: Iterable[VerificationKeyHash] = (),
    on_script_failure: FailurePolicy = None,
) -> BuiltTx:
    """Balance `plan` with `payer_utxos` (fee, collateral, missing value), evaluate it and
    price it exactly. `extra_signers` are keys that will sign without being required
    signers (they count for the size)."""
    pp = context.protocol_param
    plan = copy.copy(plan)
    has_scripts = bool(plan.script_inputs or plan.mints or _script_redeemers(plan))
    collateral = _pick_collateral(payer_utxos) if has_scripts else None
    fee_inputs = _select_inputs(context, plan, payer_utxos)
    inputs = _unique([*(s.utxo for s in plan.script_inputs), *plan.key_inputs, *fee_inputs])
    signers = _signers(plan, inputs, collateral, extra_signers)
    ref_size = _ref_script_size(inputs, plan.reference_inputs)

    count = _redeemer_count(plan)
    units: dict[str, ExecutionUnits] = {}
    if count:
        # The first draft declares no units: evaluators run every redeemer under the
        # protocol's maximum whatever it declares, and the draft is then as small as the
        # transaction can be, which the size check below relies on.
        units = {k: ExecutionUnits(0, 0) for k in _redeemer_keys(plan, inputs)}
    fee = 2_000_000
    built: Transaction | None = None
    for _ in range(4):
        fee, built = _settle_fee(context, plan, inputs, collateral, units, signers, ref_size, fee)
        if not count:
            break
        draft_size = len(_with_fake_witnesses(built, len(signers)).to_cbor())
        if draft_size > int(pp.max_tx_size):
            # Declaring the measured units only makes it larger: no ledger takes it, so it
            # is not sent to the evaluator (whose request limit it may exceed as well).
            raise TransactionTooLarge(draft_size, int(pp.max_tx_size))
        measured = _evaluate(context, built, count, on_script_failure)
        if measured == units:
            break
        units = measured
    else:
        fee, built = _settle_fee(context, plan, inputs, collateral, units, signers, ref_size, fee)
    assert built is not None
    size = len(_with_fake_witnesses(built, len(signers)).to_cbor())
    return BuiltTx(
        tx=built,
        fee=fee,
        size=size,
        ex_units=tuple((k, u.mem, u.steps) for k, u in sorted(units.items())),
        signers=tuple(sorted(signers, key=lambda h: h.payload)),
        ref_script_size=ref_size,
    )


def sign(built: BuiltTx | Transaction, keys: Iterable[PaymentSigningKey]) -> Transaction:
    """`built` with a vkey witness from each of `keys` added (body unchanged)."""
    tx = built.tx if isinstance(built, BuiltTx) else built
    body_hash = tx.transaction_body.hash()
    witnesses = [VerificationKeyWitness(k.to_verification_key(), k.sign(body_hash)) for k in keys]
    return add_witnesses(tx, witnesses)


def add_witnesses(tx: Transaction, witnesses: Iterable[VerificationKeyWitness]) -> Transaction:
    """A copy of `tx` with `witnesses` merged into its witness set (duplicates dropped)."""
    out = copy.deepcopy(tx)
    existing = list(out.transaction_witness_set.vkey_witnesses or [])
    seen = {bytes(w.vkey.payload) for w in existing}
    for w in witnesses:
        key = bytes(w.vkey.payload)
        if key not in seen:
            existing.append(w)
            seen.add(key)
    out.transaction_witness_set.vkey_witnesses = NonEmptyOrderedSet(existing) if existing else None
    return out


def submit(context: ChainContext, tx: Transaction) -> str:
    """Submit `tx`; a refusal becomes `TransactionRejectedError` with the backend's reason."""
    try:
        return str(context.submit_tx(tx))
    except TransactionFailedException as exc:
        raise TransactionRejectedError(str(exc)) from exc


# --- internals -------------------------------------------------------------------------


def _unique(utxos: Iterable[UTxO]) -> list[UTxO]:
    seen: set[Any] = set()
    out = []
    for u in utxos:
        if u.input not in seen:
            seen.add(u.input)
            out.append(u)
    return out


def _script_redeemers(plan: TxPlan) -> int:
    return sum(1 for *_, r in plan.withdrawals if r is not None) + sum(
        1 for _, r in plan.certificates if r is not None
    )


def _redeemer_count(plan: TxPlan) -> int:
    return len(plan.script_inputs) + len(plan.mints) + _script_redeemers(plan)


def _is_ada_only(u: UTxO) -> bool:
    return not u.output.amount.multi_asset and u.output.script is None and u.output.datum is None


def _pick_collateral(payer_utxos: Sequence[UTxO]) -> UTxO:
    """The smallest key-locked UTxO with enough ADA, ADA-only ones first. Tokens in it are
    safe: the collateral return gives them back (the ledger requires ADA-only net). One
    carrying a reference script is taken last (the ledger allows it, and collateral inputs
    do not count for the reference-script fee)."""
    candidates = [
        u
        for u in payer_utxos
        if u.output.amount.coin >= MIN_COLLATERAL_LOVELACE
        and isinstance(u.output.address.payment_part, VerificationKeyHash)
    ]
    if not candidates:
        raise InsufficientFundsError(
            f"the payer has no key UTxO of at least {MIN_COLLATERAL_LOVELACE} lovelace "
            "for collateral"
        )
    return min(
        candidates,
        key=lambda u: (_carries_script(u), bool(u.output.amount.multi_asset), u.output.amount.coin),
    )


def _value_of(utxos: Iterable[UTxO]) -> Value:
    total = Value(0)
    for u in utxos:
        total = total + u.output.amount
    return total


def _mint_value(plan: TxPlan) -> MultiAsset:
    ma = MultiAsset()
    for m in plan.mints:
        ma = ma + _multi_asset(_policy_id(m.policy), m.assets)
    return ma


def _multi_asset(policy: ScriptHash, assets: dict[bytes, int]) -> MultiAsset:
    return MultiAsset.from_primitive({policy.payload: dict(assets)})


def _policy_id(script: PlutusV3Script) -> ScriptHash:
    from pycardano import plutus_script_hash

    return plutus_script_hash(script)


def _surplus(plan: TxPlan, fee: int) -> Value:
    """What the plan brings minus what it spends (outputs + fee + deposits); negative
    entries are what the payer must add."""
    need = Value(fee + plan.deposits)
    for o in plan.outputs:
        need = need + o.amount
    have = _value_of([s.utxo for s in plan.script_inputs] + plan.key_inputs)
    have = have + Value(sum(a for _, a, _ in plan.withdrawals) + plan.refunds, _mint_value(plan))
    return have - need


def _shortfall(surplus: Value) -> Value:
    """The negative part of `surplus`, as positive quantities (what is still missing)."""
    ma = MultiAsset()
    for policy, assets in surplus.multi_asset.items():
        for name, qty in assets.items():
            if qty < 0:
                ma = ma + MultiAsset.from_primitive({policy.payload: {name.payload: -qty}})
    return Value(max(-surplus.coin, 0), ma)


def _carries_script(u: UTxO) -> bool:
    return u.output.script is not None


def _select_inputs(context: ChainContext, plan: TxPlan, payer: Sequence[UTxO]) -> list[UTxO]:
    """Fee and value inputs from the payer. A UTxO carrying a reference script (anyone may
    park one on an output to the payer) is spendable like any other: it is chosen after
    the script-free ones, and the fee then counts its script (`_ref_script_size`, the
    ledger's tiered reference-script fee). Spending it once leaves script-free change."""
    taken = {u.input for u in [*(s.utxo for s in plan.script_inputs), *plan.key_inputs]}
    pool = [u for u in payer if u.input not in taken]
    surplus = _surplus(plan, SELECTION_FEE_HEADROOM)
    missing = _shortfall(surplus)
    chosen: list[UTxO] = []
    # Tokens first, from the UTxOs holding them; then ADA, largest first.
    for policy, assets in missing.multi_asset.items():
        for name, qty in assets.items():
            got = sum(c.output.amount.multi_asset.get(policy, {}).get(name, 0) for c in chosen)
            for u in sorted(
                pool,
                key=lambda u: (
                    _carries_script(u),
                    -u.output.amount.multi_asset.get(policy, {}).get(name, 0),
                ),
            ):
                if got >= qty:
                    break
                held = u.output.amount.multi_asset.get(policy, {}).get(name, 0)
                if held and u not in chosen:
                    chosen.append(u)
                    got += held
            if got < qty:
                raise InsufficientFundsError(
                    f"the payer holds {got} of {policy.payload.hex()}.{name.payload.hex()}, "
                    f"needs {qty}"
                )
    # ADA: enough for the outputs, the fee and a change output with its tokens.
    change_reserve = 2_000_000
    ada_pool = sorted(
        (u for u in pool if u not in chosen),
        key=lambda u: (
            _carries_script(u),
            bool(u.output.amount.multi_asset),
            -u.output.amount.coin,
        ),
    )
    wanted = change_reserve - surplus.coin
    got_ada = sum(c.output.amount.coin for c in chosen)
    for u in ada_pool:
        if got_ada >= wanted:
            break
        chosen.append(u)
        got_ada += u.output.amount.coin
    if got_ada < wanted:
        raise InsufficientFundsError(
            f"the payer holds {got_ada} spendable lovelace, needs about {wanted}"
        )
    if not chosen and not plan.key_inputs and not plan.script_inputs:
        raise InsufficientFundsError("the payer has no UTxO to spend")
    return chosen


def _signers(
    plan: TxPlan,
    inputs: Sequence[UTxO],
    collateral: UTxO | None,
    extra: Iterable[VerificationKeyHash],
) -> set[VerificationKeyHash]:
    keys: set[VerificationKeyHash] = set(plan.required_signers) | set(extra)
    for u in [*inputs, *([collateral] if collateral else [])]:
        part = u.output.address.payment_part
        if isinstance(part, VerificationKeyHash):
            keys.add(part)
    for address, _, _ in plan.withdrawals:
        if isinstance(address.staking_part, VerificationKeyHash):
            keys.add(address.staking_part)
    return keys


def _ref_script_size(inputs: Sequence[UTxO], refs: Sequence[UTxO]) -> int:
    total = 0
    seen: set[Any] = set()
    for u in [*inputs, *refs]:
        if u.input in seen:
            continue
        seen.add(u.input)
        script = u.output.script
        if script is not None:
            total += len(bytes(script)) if isinstance(script, bytes) else len(script.to_cbor())
    return total


def reward_account_order(address: Address) -> tuple[int, int, bytes]:
    """Haskell's Ord on reward accounts: network, then script credentials before keys."""
    raw = bytes(address)
    return (raw[0] & 0x0F, 0 if raw[0] >> 4 == 15 else 1, raw[1:])


def _redeemer_entries(plan: TxPlan, inputs: Sequence[UTxO]) -> list[tuple[str, Redeemer]]:
    entries: list[tuple[str, Redeemer]] = []
    view = IndexView(
        _sorted_refs(u.input for u in inputs), _sorted_refs(u.input for u in plan.reference_inputs)
    )
    order = list(view.inputs)
    for s in plan.script_inputs:
        r = Redeemer(_resolve(s.redeemer, view))
        r.tag = RedeemerTag.SPEND
        r.index = order.index(s.utxo.input)
        entries.append((f"spend:{r.index}", r))
    policies = sorted({_policy_id(m.policy).payload for m in plan.mints})
    for m in plan.mints:
        r = Redeemer(_resolve(m.redeemer, view))
        r.tag = RedeemerTag.MINT
        r.index = policies.index(_policy_id(m.policy).payload)
        entries.append((f"mint:{r.index}", r))
    for i, (_, redeemer) in enumerate(plan.certificates):
        if redeemer is not None:
            r = Redeemer(_resolve(redeemer, view))
            r.tag = RedeemerTag.CERTIFICATE
            r.index = i
            entries.append((f"certificate:{i}", r))
    accounts = sorted((a for a, _, _ in plan.withdrawals), key=reward_account_order)
    for address, _, redeemer in plan.withdrawals:
        if redeemer is not None:
            r = Redeemer(_resolve(redeemer, view))
            r.tag = RedeemerTag.WITHDRAWAL
            r.index = accounts.index(address)
            entries.append((f"withdrawal:{r.index}", r))
    return entries


def _redeemer_keys(plan: TxPlan, inputs: Sequence[UTxO]) -> list[str]:
    return [k for k, _ in _redeemer_entries(plan, inputs)]


def _build(
    context: ChainContext,
    plan: TxPlan,
    inputs: Sequence[UTxO],
    collateral: UTxO | None,
    units: dict[str, ExecutionUnits],
    fee: int,
) -> Transaction:
    pp = context.protocol_param
    entries = _redeemer_entries(plan, inputs)
    redeemers = RedeemerMap()
    for key, r in entries:
        u = units[key]
        assert r.tag is not None
        redeemers[RedeemerKey(r.tag, r.index)] = RedeemerValue(
            r.data, ExecutionUnits(u.mem, u.steps)
        )
    outputs = list(plan.outputs)
    change = _value_of(inputs) + Value(
        sum(a for _, a, _ in plan.withdrawals) + plan.refunds, _mint_value(plan)
    )
    change = change - Value(fee + plan.deposits)
    for o in outputs:
        change = change - o.amount
    if change.coin < 0 or any(q < 0 for a in change.multi_asset.values() for q in a.values()):
        raise InsufficientFundsError(f"inputs do not cover outputs and fee (short by {change})")
    change_out = TransactionOutput(plan.change_address, change)
    if change_out.amount.coin < _min_ada(context, change_out):
        raise InsufficientFundsError(
            f"change of {change.coin} lovelace is below its min-ADA; fund the payer further"
        )
    outputs.append(change_out)
    mint = _mint_value(plan) if plan.mints else None
    withdrawals = (
        Withdrawals(
            {
                bytes(a): amt
                for a, amt, _ in sorted(plan.withdrawals, key=lambda w: reward_account_order(w[0]))
            }
        )
        if plan.withdrawals
        else None
    )
    aux = AuxiliaryData(AlonzoMetadata(metadata=Metadata(plan.metadata))) if plan.metadata else None
    body = TransactionBody(
        inputs=list(_sorted_refs(u.input for u in inputs)),
        outputs=outputs,
        fee=fee,
        ttl=plan.ttl,
        validity_start=plan.validity_start,
        certificates=[c for c, _ in plan.certificates] or None,
        withdraws=withdrawals,
        mint=mint,
        reference_inputs=list(_sorted_refs(u.input for u in plan.reference_inputs)) or None,
        required_signers=list(plan.required_signers) or None,
        auxiliary_data_hash=aux.hash() if aux else None,
    )
    if entries:
        assert collateral is not None
        total = fees.min_collateral(pp, fee)
        body.collateral = [collateral.input]
        ret = TransactionOutput(collateral.output.address, collateral.output.amount - Value(total))
        body.collateral_return = ret
        body.total_collateral = total
        cost_models = CostModels({2: pp.cost_models.get("PlutusV3", {})})
        body.script_data_hash = script_data_hash(redeemers, [], cost_models)
    witness = TransactionWitnessSet(
        plutus_v3_script=list(plan.scripts) or None,
        redeemer=redeemers if entries else None,
    )
    return Transaction(body, witness, True, aux)


def _min_ada(context: ChainContext, output: TransactionOutput) -> int:
    return fees.min_ada(context.protocol_param, len(output.to_cbor()))


def _with_fake_witnesses(tx: Transaction, count: int) -> Transaction:
    fake = copy.deepcopy(tx)
    witnesses = [
        VerificationKeyWitness(VerificationKey.from_primitive(i.to_bytes(32, "big")), bytes(64))
        for i in range(count)
    ]
    fake.transaction_witness_set.vkey_witnesses = (
        NonEmptyOrderedSet(witnesses) if witnesses else None
    )
    return fake


def _settle_fee(
    context: ChainContext,
    plan: TxPlan,
    inputs: Sequence[UTxO],
    collateral: UTxO | None,
    units: dict[str, ExecutionUnits],
    signers: set[VerificationKeyHash],
    ref_size: int,
    start: int,
) -> tuple[int, Transaction]:
    pp = context.protocol_param
    unit_pairs = [(u.mem, u.steps) for u in units.values()]
    fee = start
    for _ in range(8):
        tx = _build(context, plan, inputs, collateral, units, fee)
        size = len(_with_fake_witnesses(tx, len(signers)).to_cbor())
        needed = fees.min_fee(pp, size, unit_pairs, ref_size)
        if needed == fee:
            return fee, tx
        if needed < fee and fee - needed <= 2 * int(pp.min_fee_coefficient):
            # The fee field's own size can oscillate by a byte; a few lovelace over is fine.
            return fee, tx
        fee = needed
    fee += 4 * int(pp.min_fee_coefficient)
    return fee, _build(context, plan, inputs, collateral, units, fee)


def _evaluate(
    context: ChainContext, tx: Transaction, count: int, on_failure: FailurePolicy
) -> dict[str, ExecutionUnits]:
    keys = [f"{RedeemerTag(k.tag).name.lower()}:{k.index}" for k in _redeemer_map(tx)]
    try:
        result = context.evaluate_tx(tx)
    except TransactionFailedException as exc:
        if on_failure is None:
            raise ScriptEvaluationError(
                "the backend's evaluator refused the transaction", str(exc)
            ) from exc
        return {k: on_failure(k, count) for k in keys}
    missing = [k for k in keys if k not in result]
    if missing:
        raise BuilderError(f"the evaluator did not report redeemers {missing}: {result}")
    return {k: ExecutionUnits(int(result[k].mem), int(result[k].steps)) for k in keys}


def _redeemer_map(tx: Transaction) -> list[RedeemerKey]:
    redeemers = tx.transaction_witness_set.redeemer
    if isinstance(redeemers, RedeemerMap):
        return list(redeemers.keys())
    return []


def output_with_min_ada(
    context: ChainContext,
    address: Address,
    assets: MultiAsset | None = None,
    *,
    datum: PlutusData | None = None,
    script: PlutusV3Script | None = None,
    at_least: int = 0,
) -> TransactionOutput:
    """An output holding `assets` and exactly its min-ADA (or `at_least`, if more)."""
    coin = max(at_least, 1_000_000)
    for _ in range(5):
        out = TransactionOutput(
            address, Value(coin, assets or MultiAsset()), datum=datum, script=script
        )
        needed = max(at_least, _min_ada(context, out))
        if needed == coin:
            return out
        coin = needed
    return TransactionOutput(
        address, Value(coin, assets or MultiAsset()), datum=datum, script=script
    )


def min_ada_of(context: ChainContext, output: TransactionOutput) -> int:
    return _min_ada(context, output)


def merge_keys(keys: Sequence[PaymentSigningKey]) -> list[PaymentSigningKey]:
    """`keys` without repeats (by verification key)."""
    seen: set[bytes] = set()
    out = []
    for k in keys:
        vk = bytes(k.to_verification_key().payload)
        if vk not in seen:
            seen.add(vk)
            out.append(k)
    return out
