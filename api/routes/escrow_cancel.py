"""`POST /jobs/{id}/escrow/cancel/build` and `/cancel/submit`: a job no provider ever leased
gets its whole escrow back at once, co-signed by an oracle quorum (see
api.services.escrow_cancel)."""

from __future__ import annotations

import threading
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from api.deps import CurrentUser, NowDep, SessionDep
from api.routes.escrow_tx import ChainDep, DeploymentDep, EscrowBuild, EscrowSubmit
from api.schemas.common import PublicBody
from api.services import escrow_cancel as service
from api.services.cancel_quorum import CancelQuorum, HttpCancelQuorum

router = APIRouter(tags=["escrow"])
_quorum_lock = threading.Lock()


def get_cancel_quorum(request: Request) -> CancelQuorum:
    """`app.state.cancel_quorum`, else the oracles the config lists (made once)."""
    state = request.app.state
    quorum = getattr(state, "cancel_quorum", None)
    if quorum is None:
        with _quorum_lock:
            quorum = getattr(state, "cancel_quorum", None)
            if quorum is None:
                quorum = state.cancel_quorum = HttpCancelQuorum(state.config.cancel_oracle_urls)
    return quorum  # type: ignore[no-any-return]


QuorumDep = Annotated[CancelQuorum, Depends(get_cancel_quorum)]


class CancelTxPublic(PublicBody):
    job_id: str
    # Hand to CIP-30 `api.signTx(tx_cbor, true)`: the wallet signs its fee inputs and, as
    # the escrow's submitter, the cancel.
    tx_cbor: str
    tx_id: str
    escrow: str
    returned_to: str
    fee_lovelace: int
    # The oracles that will be asked to co-sign once the wallet has signed.
    oracles: list[str]
    required_signers: list[str]


class CancelSubmitted(PublicBody):
    job_id: str
    tx_id: str


@router.post(
    "/jobs/{job_id}/escrow/cancel/build",
    responses={
        409: {"description": "work started: when, by whom, and when a refund is possible"},
        503: {"description": "too few oracles answer, or the chain backend is down"},
    },
)
def build_cancel(
    job_id: str,
    body: EscrowBuild,
    user: CurrentUser,
    session: SessionDep,
    now: NowDep,
    context: ChainDep,
    deployment: DeploymentDep,
    quorum: QuorumDep,
) -> CancelTxPublic:
    """The unsigned cancel returning the whole escrow to its submitter, while no provider
    has ever leased the job. Nothing changes until it is submitted."""
    built = service.build_cancel_tx(
        session,
        context,
        deployment,
        quorum,
        user,
        job_id,
        now=now,
        change_address=body.change_address,
        wallet_utxos=body.utxos,
    )
    return CancelTxPublic(
        job_id=built.job_id,
        tx_cbor=built.tx_cbor,
        tx_id=built.tx_id,
        escrow=built.escrow,
        returned_to=built.returned_to,
        fee_lovelace=built.fee_lovelace,
        oracles=list(built.oracles),
        required_signers=list(built.required_signers),
    )


@router.post(
    "/jobs/{job_id}/escrow/cancel/submit",
    responses={409: {"description": "work started, or an oracle refused (its reason)"}},
)
def submit_cancel(
    job_id: str,
    body: EscrowSubmit,
    user: CurrentUser,
    session: SessionDep,
    now: NowDep,
    context: ChainDep,
    deployment: DeploymentDep,
    quorum: QuorumDep,
) -> CancelSubmitted:
    """Cancel the job (if it is not already), have the oracles co-sign, and submit."""
    tx_id = service.submit_cancel_tx(
        session,
        context,
        deployment,
        quorum,
        user,
        job_id,
        tx_cbor=body.tx_cbor.lower(),
        witness_set=body.witness_set.lower(),
        now=now,
    )
    return CancelSubmitted(job_id=job_id, tx_id=tx_id)
