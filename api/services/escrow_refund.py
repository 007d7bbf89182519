"""Refunds through the API: after a job's escrow deadline the wallet takes its budget back.

The escrow's refund path needs no signature but a passed deadline (chain time): the API
builds the unsigned refund with the wallet as fee payer, the wallet signs its fee inputs,
and the API submits. The refund always pays the escrow back to the submitter the datum
names, whoever pays the fee.

Before the deadline, a job no provider ever leased gets its escrow back through the cancel
path instead (submitter and oracle quorum sign: api.services.escrow_cancel).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from api.errors import ApiError, BadRequest
from api.models import User
from api.services.escrow_spend import escrow_row, escrow_utxo, submit_spend, wallet_spend_of
from api.services.escrow_tx import (
    MAX_FEE_LOVELACE,
    _payer,
    parse_wallet_utxos,
)
from proofnet.when import when_text


class TooEarly(ApiError):
    """The escrow's deadline has not passed on chain yet."""

    status_code = 425


@dataclass(frozen=True)
class BuiltRefundTx:
    job_id: str
    tx_cbor: str
    tx_id: str
    escrow: str  # "<tx id>#<index>"
    refunded_to: str
    fee_lovelace: int
    deadline_ms: int
    required_signers: tuple[str, ...]


def build_refund_tx(
    session: Session,
    context: Any,
    deployment: Any,
    owner: User,
    job_id: str,
    *,
    change_address: str | None,
    wallet_utxos: Sequence[str] | None,
) -> BuiltRefundTx:
    from pycardano import Address

    from chain.offchain.builders import BuilderError, build_refund
    from chain.offchain.builders.errors import DeadlineNotPassed
    from chain.offchain.builders.onchain import escrow_datum_of

    row = escrow_row(session, owner, job_id)
    payer = _payer(owner, change_address, deployment)
    escrow = escrow_utxo(context, deployment, row)
    payer_utxos = None if wallet_utxos is None else parse_wallet_utxos(wallet_utxos)
    try:
        built = build_refund(context, deployment, [escrow], payer, payer_utxos)
    except DeadlineNotPassed as exc:
        raise TooEarly(
            f"job {job_id}'s escrow cannot be refunded yet: refund possible after the "
            f"deadline {when_text(exc.refund_from_ms, exc.chain_now_ms)} (chain time)"
        ) from exc
    except BuilderError as exc:
        raise BadRequest(f"cannot build the refund: {exc}") from exc
    if built.built.fee > MAX_FEE_LOVELACE:
        raise BadRequest(f"the refund would cost {built.built.fee} lovelace; refusing")
    datum = escrow_datum_of(escrow)
    refunded_to = built.built.tx.transaction_body.outputs[0].address
    assert isinstance(refunded_to, Address)
    return BuiltRefundTx(
        job_id=job_id,
        tx_cbor=built.built.cbor_hex,
        tx_id=built.built.tx_id,
        escrow=f"{row.tx_id}#{row.output_index}",
        refunded_to=str(refunded_to),
        fee_lovelace=built.built.fee,
        deadline_ms=int(datum.deadline),
        required_signers=tuple(s.payload.hex() for s in built.built.signers),
    )


def submit_refund_tx(
    session: Session,
    context: Any,
    deployment: Any,
    owner: User,
    job_id: str,
    *,
    tx_cbor: str,
    witness_set: str,
) -> str:
    """Add the wallet's witnesses and submit; the transaction must spend this job's escrow."""
    row = escrow_row(session, owner, job_id)
    return submit_spend(context, wallet_spend_of(row, job_id, tx_cbor, witness_set))
