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

from pycardano import UTxO
from sqlmodel import Session, select

from api.errors import ApiError, BadRequest, Conflict, NotFound
from api.models import JobEscrow, User
from api.services.escrow_tx import (
    MAX_FEE_LOVELACE,
    EscrowUnavailable,
    _payer,
    parse_wallet_utxos,
)
from api.services.jobs import get_job
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


def _escrow_row(session: Session, owner: User, job_id: str) -> JobEscrow:
    job = get_job(session, owner, job_id)  # 404 for anyone but the owner
    row = session.exec(select(JobEscrow).where(JobEscrow.job_id == job.id)).first()
    if row is None:
        raise NotFound(f"job {job_id} has no recorded escrow to refund")
    return row


def _escrow_utxo(context: Any, deployment: Any, row: JobEscrow) -> UTxO:
    try:
        utxos = list(context.utxos(deployment.escrow_address))
    except Exception as exc:
        raise EscrowUnavailable(f"chain backend unavailable: {type(exc).__name__}: {exc}") from exc
    for u in utxos:
        if str(u.input.transaction_id) == row.tx_id and u.input.index == row.output_index:
            return u
    raise Conflict(
        f"escrow {row.tx_id}#{row.output_index} is no longer on chain: it was settled, "
        "cancelled or refunded already"
    )


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

    row = _escrow_row(session, owner, job_id)
    payer = _payer(owner, change_address, deployment)
    escrow = _escrow_utxo(context, deployment, row)
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
    from chain.offchain.builders import BuilderError, assemble, submit
    from chain.offchain.errors import TransactionRejectedError

    row = _escrow_row(session, owner, job_id)
    try:
        tx = assemble(tx_cbor, witness_set)
    except BuilderError as exc:
        raise BadRequest(f"refused: {exc}") from exc
    spent = {(str(i.transaction_id), i.index) for i in tx.transaction_body.inputs}
    if (row.tx_id, row.output_index) not in spent:
        raise BadRequest(f"the transaction does not spend job {job_id}'s escrow")
    try:
        return str(submit(context, tx))
    except TransactionRejectedError as exc:
        raise BadRequest(f"the chain refused the transaction: {exc.reason}") from exc
    except Exception as exc:
        raise EscrowUnavailable(f"chain backend unavailable: {type(exc).__name__}: {exc}") from exc
