"""Settle a batch of escrows in one transaction (withdraw-zero + indexer redeemer).

Each escrow input is spent with `Settle`; the batch script runs once, on a zero
withdrawal from its stake credential, with a `BatchSettle` redeemer naming every escrow
input (ledger order) and, per escrow, its payout outputs and its remainder output. The
transaction carries the oracle quorum as required signers, the config NFT UTxO and the
reference scripts as reference inputs, an upper validity bound no later than any settled
escrow's deadline, and the audit metadata (CIP-20 memo, Merkle root, bundle hash).

`build_settle_batch` builds exactly the given settlements; `pack_settle_batch` settles as
many of them (in the given priority order) as fit one transaction, measured: it evaluates
real transactions through the backend and shrinks or grows until the largest one within
the size and execution limits is found.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pycardano import (
    Address,
    ChainContext,
    MultiAsset,
    ScriptHash,
    TransactionOutput,
    UTxO,
    Value,
    VerificationKeyHash,
)

from chain.contracts import types as t
from chain.offchain.builders import assembly as A
from chain.offchain.builders.chain_time import ChainClock, tip_slot
from chain.offchain.builders.deployment import FIRST_PROTOCOL, Deployment
from chain.offchain.builders.errors import (
    BuilderError,
    ScriptEvaluationError,
    TransactionTooLarge,
)
from chain.offchain.builders.onchain import (
    address_from_data,
    escrow_datum_of,
    out_ref_text,
)
from chain.offchain.builders.protocol_utxos import ProtocolUtxos, resolve
from chain.offchain.oracle_set import of_config

MEMO_LABEL = 674
MAX_METADATA_BYTES = 64
# Validity window when no deadline is closer (slots).
DEFAULT_HORIZON_SLOTS = 600


@dataclass(frozen=True)
class Settlement:
    """One escrow and what it pays: (provider full address, NTX amount) per payout."""

    escrow: UTxO
    payouts: tuple[tuple[Address, int], ...]

    @property
    def paid(self) -> int:
        return sum(a for _, a in self.payouts)


@dataclass(frozen=True)
class BatchTx:
    built: A.BuiltTx
    settled: tuple[Settlement, ...]  # in ledger input order (= redeemer entry order)
    left_out: tuple[Settlement, ...]
    redeemer: t.BatchSettle

    @property
    def tx_id(self) -> str:
        return self.built.tx_id


def batch_metadata(
    batch_id: bytes, merkle_root: bytes, bundle_hash: bytes, count: int
) -> dict[int, Any]:
    """CIP-20 memo plus the values auditors need (each at most 64 bytes)."""
    meta: dict[int, Any] = {
        MEMO_LABEL: {
            "msg": [
                "proofnet settlement",
                f"batch {batch_id.hex()[:32]} settles {count} escrows",
            ],
            "root": merkle_root,
            "bundle": bundle_hash,
            "batch": batch_id,
        }
    }
    check_metadata(meta)
    return meta


def check_metadata(meta: Any) -> None:
    """Every text or bytes value at most 64 bytes (the ledger's metadata rule)."""
    if isinstance(meta, str | bytes):
        size = len(meta.encode() if isinstance(meta, str) else meta)
        if size > MAX_METADATA_BYTES:
            raise BuilderError(f"metadata value of {size} bytes exceeds {MAX_METADATA_BYTES}")
    elif isinstance(meta, dict):
        for k, v in meta.items():
            check_metadata(k)
            check_metadata(v)
    elif isinstance(meta, list | tuple):
        for v in meta:
            check_metadata(v)


def _ntx_of(value: Value, policy: bytes, name: bytes) -> int:
    for p, assets in value.multi_asset.items():
        if p.payload == policy:
            for n, q in assets.items():
                if n.payload == name:
                    return int(q)
    return 0


def _check_settlement(
    deployment: Deployment,
    s: Settlement,
    now_slot: int,
    clock: ChainClock,
    oracle_set: bytes | None,
) -> t.EscrowDatum:
    ref = out_ref_text(s.escrow.input)
    if s.escrow.output.address.payment_part != ScriptHash(bytes.fromhex(deployment.escrow_hash)):
        raise BuilderError(f"{ref} is not at the escrow script")
    datum = escrow_datum_of(s.escrow)
    if not deployment.trusts(datum):
        raise BuilderError(f"{ref} does not trust this deployment's batch script and config")
    if oracle_set is not None and datum.oracle_set != oracle_set:
        raise BuilderError(pinned_elsewhere(ref))
    value = s.escrow.output.amount
    policy, name = bytes.fromhex(deployment.ntx_policy), bytes.fromhex(deployment.ntx_name)
    held = _ntx_of(value, policy, name)
    tokens = sum(len(a) for a in value.multi_asset.values())
    if tokens != 1 or held <= 0:
        # The batch script refuses these; they stay refundable in full.
        raise BuilderError(f"{ref} holds tokens other than its NTX; refund it instead")
    if not s.payouts:
        raise BuilderError(f"{ref}: a settlement needs at least one payout (cancel instead)")
    for address, amount in s.payouts:
        if not isinstance(amount, int) or amount <= 0:
            raise BuilderError(f"{ref}: payout amounts must be positive integers")
        if address.network != deployment.pycardano_network:
            raise BuilderError(f"{ref}: payout address {address} is on another network")
    if s.paid > datum.budget or s.paid > held:
        raise BuilderError(f"{ref}: payouts {s.paid} exceed budget {datum.budget} / held {held}")
    if clock.slot_at_or_before(datum.deadline) <= now_slot:
        raise BuilderError(f"{ref}: deadline {datum.deadline} has passed (refund it instead)")
    return datum


def pinned_elsewhere(ref: str) -> str:
    return (
        f"{ref} was locked under another oracle set than the configuration holds now: it "
        "settles only if that set is restored, and refunds after its deadline"
    )


def current_oracle_set(deployment: Deployment, protocol: ProtocolUtxos) -> bytes | None:
    """The set escrows must pin to settle or cancel now; None for 1.0.0 deployments (their
    escrows pin none)."""
    if deployment.protocol_version == FIRST_PROTOCOL:
        return None
    return of_config(protocol.config_datum)


@dataclass(frozen=True)
class SettlePlan:
    """A batch before balancing: the plan, the escrows in ledger order and the redeemer
    as a function of the final input order."""

    plan: A.TxPlan
    ordered: tuple[Settlement, ...]
    redeemer: Any  # IndexView -> t.BatchSettle
    protocol: ProtocolUtxos


def build_settle_batch(
    context: ChainContext,
    deployment: Deployment,
    settlements: Sequence[Settlement],
    merkle_root: bytes,
    batch_id: bytes,
    oracle_signers: Sequence[VerificationKeyHash],
    payer: Address,
    payer_utxos: Sequence[UTxO] | None = None,
    **kwargs: Any,
) -> BatchTx:
    """The unsigned batch transaction settling exactly `settlements`. `oracle_signers`
    (a quorum of the config's oracles) become required signers; sign with their keys
    (`assembly.sign`) or collect their witnesses (`assembly.add_witnesses`). `payer` pays
    the fee and provides collateral (and must sign too). Keyword arguments go to
    `plan_settle_batch`."""
    sp = plan_settle_batch(
        context, deployment, settlements, merkle_root, batch_id, oracle_signers, payer, **kwargs
    )
    utxos = list(context.utxos(payer)) if payer_utxos is None else list(payer_utxos)
    built = A.finalize(context, sp.plan, utxos)
    final = sp.redeemer(
        A.IndexView(
            A._sorted_refs(built.tx.transaction_body.inputs),
            A._sorted_refs(built.tx.transaction_body.reference_inputs or []),
        )
    )
    return BatchTx(built, sp.ordered, (), final)


def plan_settle_batch(
    context: ChainContext,
    deployment: Deployment,
    settlements: Sequence[Settlement],
    merkle_root: bytes,
    batch_id: bytes,
    oracle_signers: Sequence[VerificationKeyHash],
    payer: Address,
    *,
    bundle_hash: bytes = b"",
    metadata: dict[int, Any] | None = None,
    protocol: ProtocolUtxos | None = None,
    horizon_slots: int = DEFAULT_HORIZON_SLOTS,
    checked: bool = True,
) -> SettlePlan:
    """The batch's plan (see `build_settle_batch`). `checked=False` skips the off-chain
    refusals (foreign or expired escrows, stray tokens, missing quorum) so the validators'
    own checks can be exercised; never use it to build a transaction meant to succeed."""
    if not settlements:
        raise BuilderError("nothing to settle")
    if len(merkle_root) != 32:
        raise BuilderError("the Merkle root must be 32 bytes")
    if not batch_id or len(batch_id) > MAX_METADATA_BYTES:
        raise BuilderError(f"batch id must be 1..{MAX_METADATA_BYTES} bytes")
    refs = [s.escrow.input for s in settlements]
    if len(set(refs)) != len(refs):
        raise BuilderError("an escrow appears twice in the batch")
    protocol = protocol or resolve(context, deployment)
    clock = ChainClock.of(context)
    now = tip_slot(context)
    if checked:
        protocol.check_oracle_quorum(list(oracle_signers))
        pin = current_oracle_set(deployment, protocol)
        datums = {
            s.escrow.input: _check_settlement(deployment, s, now, clock, pin) for s in settlements
        }
    else:
        datums = {s.escrow.input: escrow_datum_of(s.escrow) for s in settlements}
    ttl = min(
        [now + horizon_slots] + [clock.slot_at_or_before(d.deadline) for d in datums.values()]
    )
    # Relative order of escrow inputs is fixed by their out-refs; fee inputs chosen later
    # only shift absolute indices, which the redeemer function fills in.
    ordered = sorted(
        settlements, key=lambda s: (s.escrow.input.transaction_id.payload, s.escrow.input.index)
    )
    policy, name = bytes.fromhex(deployment.ntx_policy), bytes.fromhex(deployment.ntx_name)
    outputs: list[TransactionOutput] = []
    layout: list[tuple[Settlement, list[int], int]] = []
    for s in ordered:
        datum = datums[s.escrow.input]
        payout_idx = []
        payout_ada = 0
        for address, amount in s.payouts:
            out = A.output_with_min_ada(
                context, address, MultiAsset.from_primitive({policy: {name: amount}})
            )
            payout_idx.append(len(outputs))
            outputs.append(out)
            payout_ada += out.amount.coin
        escrow_value = s.escrow.output.amount
        remaining = _ntx_of(escrow_value, policy, name) - s.paid
        rest_assets = (
            MultiAsset.from_primitive({policy: {name: remaining}}) if remaining > 0 else None
        )
        submitter = address_from_data(datum.submitter, deployment.pycardano_network)
        rest = A.output_with_min_ada(
            context, submitter, rest_assets, at_least=max(escrow_value.coin - payout_ada, 0)
        )
        layout.append((s, payout_idx, len(outputs)))
        outputs.append(rest)

    def redeemer(view: A.IndexView) -> t.BatchSettle:
        entries = [
            t.SettleEntry(
                view.input_index(s.escrow.input),
                idx,
                rest_idx,
            )
            for s, idx, rest_idx in layout
        ]
        return t.BatchSettle(
            view.reference_index(protocol.config.input), entries, merkle_root, batch_id
        )

    meta = (
        metadata
        if metadata is not None
        else batch_metadata(batch_id, merkle_root, bundle_hash or bytes(32), len(settlements))
    )
    check_metadata(meta)
    plan = A.TxPlan(
        change_address=payer,
        script_inputs=[A.ScriptInput(s.escrow, t.Settle()) for s in ordered],
        outputs=outputs,
        reference_inputs=[protocol.config, protocol.escrow_script, protocol.batch_script],
        withdrawals=[(deployment.batch_stake_address, 0, redeemer)],
        required_signers=list(oracle_signers),
        ttl=ttl,
        metadata=meta,
    )
    return SettlePlan(plan, tuple(ordered), redeemer, protocol)


def fits(context: ChainContext, built: A.BuiltTx) -> bool:
    pp = context.protocol_param
    return (
        built.size <= int(pp.max_tx_size)
        and built.mem <= int(pp.max_tx_ex_mem)
        and built.steps <= int(pp.max_tx_ex_steps)
    )


def binding_limit(context: ChainContext, built: A.BuiltTx) -> str:
    """Which limit the transaction is closest to (as a share of each maximum)."""
    pp = context.protocol_param
    shares = {
        "tx_size": built.size / int(pp.max_tx_size),
        "mem": built.mem / int(pp.max_tx_ex_mem),
        "steps": built.steps / int(pp.max_tx_ex_steps),
    }
    return max(shares, key=lambda k: shares[k])


def pack_settle_batch(
    context: ChainContext,
    deployment: Deployment,
    candidates: Sequence[Settlement],
    merkle_root: bytes,
    batch_id: bytes,
    oracle_signers: Sequence[VerificationKeyHash],
    payer: Address,
    payer_utxos: Sequence[UTxO] | None = None,
    **kwargs: Any,
) -> BatchTx:
    """Settle the longest prefix of `candidates` that fits one transaction.

    Measured, not guessed: two small batches are built and evaluated to get the size and
    units per escrow, the prefix length is extrapolated, then real transactions are
    evaluated while shrinking (or growing) by one until the largest that fits is found."""
    if not candidates:
        raise BuilderError("nothing to settle")
    protocol = kwargs.pop("protocol", None) or resolve(context, deployment)
    utxos = list(context.utxos(payer)) if payer_utxos is None else list(payer_utxos)

    cache: dict[int, BatchTx | None] = {}

    def attempt(n: int) -> BatchTx | None:
        if n not in cache:
            try:
                batch = build_settle_batch(
                    context,
                    deployment,
                    candidates[:n],
                    merkle_root,
                    batch_id,
                    oracle_signers,
                    payer,
                    utxos,
                    protocol=protocol,
                    **kwargs,
                )
                cache[n] = batch if fits(context, batch.built) else None
            except TransactionTooLarge:
                cache[n] = None  # over the size limit before evaluation: too many escrows
            except ScriptEvaluationError as exc:
                # Over the per-script budget: too many escrows. Anything else is a real
                # failure the caller must see.
                if "budget" not in exc.failures:
                    raise
                cache[n] = None
        return cache[n]

    total = len(candidates)
    first = attempt(1)
    if first is None:
        raise BuilderError("even a single settlement does not fit one transaction")
    n = 1
    if total > 1:
        probe = min(total, 4)
        second = attempt(probe)
        if second is None:
            n = 1
            while n + 1 <= probe and attempt(n + 1) is not None:
                n += 1
        else:
            n = min(total, _extrapolate(context, first.built, second.built, probe))
            while n > probe and attempt(n) is None:
                n -= 1
            n = max(n, probe)
            while n < total and attempt(n + 1) is not None:
                n += 1
    best = attempt(n)
    assert best is not None
    chosen = set(id(s) for s in candidates[:n])
    left = tuple(s for s in candidates if id(s) not in chosen)
    return BatchTx(best.built, best.settled, left, best.redeemer)


def _extrapolate(context: ChainContext, one: A.BuiltTx, many: A.BuiltTx, k: int) -> int:
    """Largest n with every measured quantity, linear in n, within its limit."""
    pp = context.protocol_param
    best = 10**6
    for limit, a, b in (
        (int(pp.max_tx_size), one.size, many.size),
        (int(pp.max_tx_ex_mem), one.mem, many.mem),
        (int(pp.max_tx_ex_steps), one.steps, many.steps),
    ):
        per = (b - a) / (k - 1)
        if per > 0:
            best = min(best, 1 + int((limit - a) / per))
    return max(best, 1)
