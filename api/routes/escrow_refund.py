"""`POST /jobs/{id}/escrow/refund/build` and `/refund/submit`: a wallet takes a job's escrow
back after its deadline (see api.services.escrow_refund; cancel goes through the oracles)."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import ChainDep, CurrentUser, DeploymentDep, SessionDep
from api.routes.escrow_tx import EscrowBuild, EscrowSubmit
from api.schemas.common import PublicBody
from api.services import escrow_refund as service

router = APIRouter(tags=["escrow"])


class RefundTxPublic(PublicBody):
    job_id: str
    # Hand to CIP-30 `api.signTx(tx_cbor, true)`: the wallet signs only its fee inputs.
    tx_cbor: str
    tx_id: str
    escrow: str
    refunded_to: str
    fee_lovelace: int
    deadline_ms: int
    required_signers: list[str]


class RefundSubmitted(PublicBody):
    job_id: str
    tx_id: str


@router.post(
    "/jobs/{job_id}/escrow/refund/build",
    responses={425: {"description": "the escrow's deadline has not passed yet"}},
)
def build_refund(
    job_id: str,
    body: EscrowBuild,
    user: CurrentUser,
    session: SessionDep,
    context: ChainDep,
    deployment: DeploymentDep,
) -> RefundTxPublic:
    """The unsigned refund of the job's escrow to its submitter (after the deadline)."""
    built = service.build_refund_tx(
        session,
        context,
        deployment,
        user,
        job_id,
        change_address=body.change_address,
        wallet_utxos=body.utxos,
    )
    return RefundTxPublic(
        job_id=built.job_id,
        tx_cbor=built.tx_cbor,
        tx_id=built.tx_id,
        escrow=built.escrow,
        refunded_to=built.refunded_to,
        fee_lovelace=built.fee_lovelace,
        deadline_ms=built.deadline_ms,
        required_signers=list(built.required_signers),
    )


@router.post("/jobs/{job_id}/escrow/refund/submit")
def submit_refund(
    job_id: str,
    body: EscrowSubmit,
    user: CurrentUser,
    session: SessionDep,
    context: ChainDep,
    deployment: DeploymentDep,
) -> RefundSubmitted:
    tx_id = service.submit_refund_tx(
        session,
        context,
        deployment,
        user,
        job_id,
        tx_cbor=body.tx_cbor.lower(),
        witness_set=body.witness_set.lower(),
    )
    return RefundSubmitted(job_id=job_id, tx_id=tx_id)
