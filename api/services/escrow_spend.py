"""A wallet's spend of a job's recorded escrow (refund after the deadline, quorum-signed
cancel): the pieces both flows share.

Both find the escrow the API recorded for the owner's job, read its output from the chain,
take the transaction back from the wallet, check that it spends that very escrow, and
submit it, translating the chain backend's failures into the API's errors.
"""

from __future__ import annotations

from typing import Any

from pycardano import Transaction, UTxO
from sqlmodel import Session, select

from api.errors import BadRequest, Conflict, NotFound
from api.models import JobEscrow, User
from api.services.escrow_tx import EscrowUnavailable
from api.services.jobs import get_job


def escrow_row(session: Session, owner: User, job_id: str) -> JobEscrow:
    job = get_job(session, owner, job_id)  # 404 for anyone but the owner
    row = session.exec(select(JobEscrow).where(JobEscrow.job_id == job.id)).first()
    if row is None:
        raise NotFound(f"job {job_id} has no recorded escrow to refund")
    return row


def escrow_utxo(context: Any, deployment: Any, row: JobEscrow) -> UTxO:
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


def wallet_spend_of(row: JobEscrow, job_id: str, tx_cbor: str, witness_set: str) -> Transaction:
    """The wallet's transaction with its witnesses, refused unless it spends `row`'s escrow:
    a wallet must not get the API to submit (or the oracles to co-sign) anything else."""
    from chain.offchain.builders import BuilderError, assemble

    try:
        tx = assemble(tx_cbor, witness_set)
    except BuilderError as exc:
        raise BadRequest(f"refused: {exc}") from exc
    spent = {(str(i.transaction_id), i.index) for i in tx.transaction_body.inputs}
    if (row.tx_id, row.output_index) not in spent:
        raise BadRequest(f"the transaction does not spend job {job_id}'s escrow")
    return tx


def submit_spend(context: Any, tx: Transaction, what: str = "transaction") -> str:
    from chain.offchain.builders import submit
    from chain.offchain.errors import TransactionRejectedError

    try:
        return str(submit(context, tx))
    except TransactionRejectedError as exc:
        raise BadRequest(f"the chain refused the {what}: {exc.reason}") from exc
    except Exception as exc:
        raise EscrowUnavailable(f"chain backend unavailable: {type(exc).__name__}: {exc}") from exc
