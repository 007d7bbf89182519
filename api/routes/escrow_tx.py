"""Escrow transactions for browser wallets: `POST /jobs/{id}/escrow/build` hands the owner an
unsigned lock transaction to `signTx`; `POST /jobs/{id}/escrow/submit` takes the witness set,
submits and records the escrow."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request
from pydantic import Field

from api.deps import ChainDep, ConfigDep, CurrentUser, DeploymentDep, NowDep, SessionDep
from api.routes.oracle_feed import EscrowPublic
from api.schemas.common import PublicBody, RequestBody
from api.services import escrow_tx as service

router = APIRouter(tags=["escrow"])

_HEX = r"^(?:[0-9a-fA-F]{2})+$"
# A lock transaction is a few kB; a CIP-30 witness set a few hundred bytes per key.
_MAX_TX_HEX = 64_000


class EscrowBuild(RequestBody):
    # The wallet's `getChangeAddress()` (bech32); the signed-in address when absent.
    change_address: str | None = Field(default=None, min_length=20, max_length=200)
    # The wallet's `getUtxos()` (CBOR hex); the change address's UTxOs on chain when absent.
    utxos: list[Annotated[str, Field(pattern=_HEX, max_length=20_000)]] | None = Field(
        default=None, max_length=service.MAX_WALLET_UTXOS
    )


class EscrowTxPublic(PublicBody):
    job_id: str
    # Hand to CIP-30 `api.signTx(tx_cbor, true)`.
    tx_cbor: str
    tx_id: str
    escrow_index: int
    escrow_address: str
    budget: int
    deadline_ms: int
    fee_lovelace: int
    locked_lovelace: int
    ntx_unit: str
    signing_inputs: list[str]
    required_signers: list[str]


class EscrowSubmit(RequestBody):
    tx_cbor: str = Field(pattern=_HEX, max_length=_MAX_TX_HEX)
    # What `api.signTx` answered: a CBOR transaction_witness_set, hex.
    witness_set: str = Field(pattern=_HEX, max_length=_MAX_TX_HEX)


class EscrowSubmitted(PublicBody):
    job_id: str
    tx_id: str
    escrow_index: int
    # False until the chain confirms: then POST /jobs/{id}/escrow {tx_id, index}.
    recorded: bool
    escrow: EscrowPublic | None


@router.post("/jobs/{job_id}/escrow/build")
def build_escrow(
    job_id: str,
    body: EscrowBuild,
    user: CurrentUser,
    session: SessionDep,
    config: ConfigDep,
    context: ChainDep,
    deployment: DeploymentDep,
) -> EscrowTxPublic:
    """The unsigned transaction locking the job's budget (NTX) in escrow until its deadline."""
    built = service.build_escrow_tx(
        session,
        config,
        context,
        deployment,
        user,
        job_id,
        change_address=body.change_address,
        wallet_utxos=body.utxos,
    )
    return EscrowTxPublic(
        job_id=built.job_id,
        tx_cbor=built.tx_cbor,
        tx_id=built.tx_id,
        escrow_index=built.escrow_index,
        escrow_address=built.escrow_address,
        budget=built.budget,
        deadline_ms=built.deadline_ms,
        fee_lovelace=built.fee_lovelace,
        locked_lovelace=built.locked_lovelace,
        ntx_unit=built.ntx_unit,
        signing_inputs=list(built.signing_inputs),
        required_signers=list(built.required_signers),
    )


@router.post("/jobs/{job_id}/escrow/submit")
def submit_escrow(
    job_id: str,
    body: EscrowSubmit,
    request: Request,
    user: CurrentUser,
    session: SessionDep,
    now: NowDep,
    config: ConfigDep,
    context: ChainDep,
    deployment: DeploymentDep,
) -> EscrowSubmitted:
    """Add the wallet's witnesses, submit, and record the escrow once the chain shows it."""
    wait = float(getattr(request.app.state, "escrow_confirm_wait_s", 8.0))
    done = service.submit_escrow_tx(
        session,
        context,
        deployment,
        user,
        job_id,
        tx_cbor=body.tx_cbor.lower(),
        witness_set=body.witness_set.lower(),
        now=now,
        config=config,
        confirm_wait_s=wait,
    )
    row = done.recorded
    return EscrowSubmitted(
        job_id=job_id,
        tx_id=done.tx_id,
        escrow_index=done.escrow_index,
        recorded=row is not None,
        escrow=None
        if row is None
        else EscrowPublic(
            job_id=job_id,
            tx_id=row.tx_id,
            index=row.output_index,
            budget=row.budget,
            deadline_ms=row.deadline_ms,
        ),
    )
