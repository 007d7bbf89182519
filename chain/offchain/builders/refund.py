"""Return escrows to their submitters: Refund after the deadline (anyone may submit) and
Cancel before it (submitter and oracle quorum sign).

Both pay each escrow's whole value to its submitter's full address, in its own output,
tagged with the escrow's out-ref as inline datum (so one output never pays back two
escrows), and never share a transaction with a batch withdrawal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pycardano import (
    Address,
    ChainContext,
    ScriptHash,
    TransactionOutput,
    UTxO,
    VerificationKeyHash,
)

from chain.contracts import types as t
from chain.offchain.builders import assembly as A
from chain.offchain.builders.chain_time import ChainClock, tip_slot
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.errors import BuilderError, DeadlineNotPassed
from chain.offchain.builders.onchain import (
    address_from_data,
    escrow_datum_of,
    out_ref_data,
    out_ref_text,
)
from chain.offchain.builders.protocol_utxos import ProtocolUtxos, resolve
from chain.offchain.builders.settle import current_oracle_set, pinned_elsewhere
from proofnet.when import when_text

DEFAULT_HORIZON_SLOTS = 600


@dataclass(frozen=True)
class ReturnTx:
    """An unsigned refund or cancel: escrow i is paid back in output i."""

    built: A.BuiltTx
    escrows: tuple[UTxO, ...]
    datums: tuple[t.EscrowDatum, ...]

    @property
    def tx_id(self) -> str:
        return self.built.tx_id


def _payback_outputs(
    deployment: Deployment, escrows: Sequence[UTxO]
) -> tuple[list[TransactionOutput], list[t.EscrowDatum]]:
    if not escrows:
        raise BuilderError("no escrow to return")
    if len({u.input for u in escrows}) != len(escrows):
        raise BuilderError("an escrow appears twice")
    escrow_hash = ScriptHash(bytes.fromhex(deployment.escrow_hash))
    outputs, datums = [], []
    for u in escrows:
        if u.output.address.payment_part != escrow_hash:
            raise BuilderError(f"{out_ref_text(u.input)} is not at the escrow script")
        datum = escrow_datum_of(u)
        submitter = address_from_data(datum.submitter, deployment.pycardano_network)
        # Exactly the escrow's value: the script compares whole values.
        outputs.append(TransactionOutput(submitter, u.output.amount, datum=out_ref_data(u.input)))
        datums.append(datum)
    return outputs, datums


def build_refund(
    context: ChainContext,
    deployment: Deployment,
    escrows: Sequence[UTxO],
    payer: Address,
    payer_utxos: Sequence[UTxO] | None = None,
) -> ReturnTx:
    """Refund escrows whose deadline has passed (chain time). Anyone may be the payer."""
    outputs, datums = _payback_outputs(deployment, escrows)
    clock = ChainClock.of(context)
    now = tip_slot(context)
    start = max(clock.slot_after(d.deadline) for d in datums)
    if start > now:
        raise DeadlineNotPassed(clock.posix_ms(start), clock.posix_ms(now))
    plan = A.TxPlan(
        change_address=payer,
        script_inputs=[A.ScriptInput(u, t.Refund(i)) for i, u in enumerate(escrows)],
        outputs=outputs,
        reference_inputs=[resolve_escrow_script(context, deployment)],
        validity_start=start,
    )
    utxos = list(context.utxos(payer)) if payer_utxos is None else list(payer_utxos)
    return ReturnTx(A.finalize(context, plan, utxos), tuple(escrows), tuple(datums))


def build_cancel(
    context: ChainContext,
    deployment: Deployment,
    escrows: Sequence[UTxO],
    oracle_signers: Sequence[VerificationKeyHash],
    payer: Address,
    payer_utxos: Sequence[UTxO] | None = None,
    *,
    protocol: ProtocolUtxos | None = None,
    horizon_slots: int = DEFAULT_HORIZON_SLOTS,
) -> ReturnTx:
    """Cancel escrows: each submitter and an oracle quorum must sign (required signers)."""
    outputs, datums = _payback_outputs(deployment, escrows)
    protocol = protocol or resolve(context, deployment)
    protocol.check_oracle_quorum(list(oracle_signers))
    pin = current_oracle_set(deployment, protocol)
    for u, d in zip(escrows, datums, strict=True):
        if pin is not None and d.oracle_set != pin:
            raise BuilderError(pinned_elsewhere(out_ref_text(u.input)))
    clock = ChainClock.of(context)
    now = tip_slot(context)
    ttl = now + horizon_slots
    for d in datums:
        if isinstance(d.cancel_allowed_until, t.SomePosixTime):
            ttl = min(ttl, clock.slot_at_or_before(d.cancel_allowed_until.time))
    if ttl <= now:
        raise BuilderError(
            f"the cancel window of an escrow closed at {when_text(clock.posix_ms(ttl), clock.posix_ms(now))}"
        )
    submitters = [VerificationKeyHash(d.submitter_pkh) for d in datums]
    signers = list(dict.fromkeys([*submitters, *oracle_signers]))
    config_ref = protocol.config.input
    plan = A.TxPlan(
        change_address=payer,
        script_inputs=[
            A.ScriptInput(u, _cancel_redeemer(config_ref, i)) for i, u in enumerate(escrows)
        ],
        outputs=outputs,
        reference_inputs=[protocol.config, protocol.escrow_script],
        required_signers=signers,
        ttl=ttl,
    )
    utxos = list(context.utxos(payer)) if payer_utxos is None else list(payer_utxos)
    return ReturnTx(A.finalize(context, plan, utxos), tuple(escrows), tuple(datums))


def _cancel_redeemer(config_ref: object, output_index: int) -> A.RedeemerSpec:
    def make(view: A.IndexView) -> t.Cancel:
        return t.Cancel(view.reference_index(config_ref), output_index)  # type: ignore[arg-type]

    return make


def resolve_escrow_script(context: ChainContext, deployment: Deployment) -> UTxO:
    return resolve(context, deployment).escrow_script
