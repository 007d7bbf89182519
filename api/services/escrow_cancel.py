"""Cancels through the API: a job no provider ever leased gets its whole escrow back at once.

The escrow's Cancel path needs the submitter's signature and an oracle quorum's. The API
builds the unsigned cancel with a quorum of reachable oracles named as required signers
(`build_cancel_tx`); the wallet signs it (its fee inputs and, as the escrow's submitter,
the cancel itself); then `submit_cancel_tx` checks the submitter's witness, cancels the job
under its row lock (so no lease can start after), asks exactly the named oracles to co-sign
(each checks from its own view that no work started, see oracle.settlement.cancel), adds
their witnesses and submits.

Refused, with when and why, as soon as any provider leased the job: "work started at
12:03 UTC (in lease by provider X); refund possible after the deadline 2026-12-03 14:00 UTC
(in 3 h 10 min)". A refund needs no one's consent once the deadline passes
(api.services.escrow_refund).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pycardano import Address, VerificationKeyHash, VerificationKeyWitness
from sqlmodel import Session, select

from api.errors import BadRequest, Conflict
from api.models import Job, JobEscrow, User
from api.models.job import TERMINAL_STATUSES
from api.services import escrow_state
from api.services.cancel_quorum import CancelQuorum, Member, OracleRefused
from api.services.escrow_spend import escrow_row, escrow_utxo, submit_spend, wallet_spend_of
from api.services.escrow_tx import (
    MAX_FEE_LOVELACE,
    EscrowUnavailable,
    _payer,
    parse_wallet_utxos,
)
from api.services.jobs import cancel_job, get_job
from proofnet.redaction import redact_credentials
from proofnet.when import ms_of


class QuorumUnavailable(EscrowUnavailable):
    """Too few oracles answer to co-sign a cancel now (retry later, or refund later)."""


@dataclass(frozen=True)
class BuiltCancelTx:
    job_id: str
    tx_cbor: str
    tx_id: str
    escrow: str
    returned_to: str
    fee_lovelace: int
    oracles: tuple[str, ...]  # the URLs of the oracles the cancel names as signers
    required_signers: tuple[str, ...]


def _refuse_if_work_started(session: Session, job: Job, row: JobEscrow, now: datetime) -> None:
    started = escrow_state.work_started(session, job)
    why = escrow_state.cancel_refusal(job, started, row, ms_of(now))
    if why is not None:
        raise Conflict(f"the escrow of job {job.job_id} cannot be cancelled: {why}")


def _quorum_members(
    context: Any, deployment: Any, quorum: CancelQuorum
) -> tuple[list[Member], Any]:
    """Reachable oracles of the deployment's config, as many as its threshold."""
    from chain.offchain.builders import BuilderError
    from chain.offchain.builders.protocol_utxos import resolve

    try:
        protocol = resolve(context, deployment)
        config = protocol.config_datum
    except BuilderError as exc:
        raise EscrowUnavailable(f"the deployment's oracle config is unusable: {exc}") from exc
    except Exception as exc:  # the backend is down
        raise EscrowUnavailable(f"chain backend unavailable: {type(exc).__name__}: {exc}") from exc
    oracles = {bytes(k).hex() for k in config.oracles}
    members = [m for m in quorum.members() if m.key_hash in oracles]
    members = list({m.key_hash: m for m in members}.values())
    if len(members) < config.threshold:
        raise QuorumUnavailable(
            f"only {len(members)} of the {config.threshold} oracles a cancel needs answer now; "
            "try again later (or refund after the deadline)"
        )
    return members[: config.threshold], protocol


def build_cancel_tx(
    session: Session,
    context: Any,
    deployment: Any,
    quorum: CancelQuorum,
    owner: User,
    job_id: str,
    *,
    now: datetime,
    change_address: str | None,
    wallet_utxos: Sequence[str] | None,
) -> BuiltCancelTx:
    """The unsigned cancel of the job's escrow (checks only: nothing changes here)."""
    from chain.offchain.builders import BuilderError, build_cancel

    row = escrow_row(session, owner, job_id)
    job = get_job(session, owner, job_id)
    _refuse_if_work_started(session, job, row, now)
    payer = _payer(owner, change_address, deployment)
    escrow = escrow_utxo(context, deployment, row)
    members, protocol = _quorum_members(context, deployment, quorum)
    payer_utxos = None if wallet_utxos is None else parse_wallet_utxos(wallet_utxos)
    signers = [VerificationKeyHash(bytes.fromhex(m.key_hash)) for m in members]
    try:
        built = build_cancel(
            context, deployment, [escrow], signers, payer, payer_utxos, protocol=protocol
        )
    except BuilderError as exc:
        raise BadRequest(f"cannot build the cancel: {exc}") from exc
    if built.built.fee > MAX_FEE_LOVELACE:
        raise BadRequest(f"the cancel would cost {built.built.fee} lovelace; refusing")
    returned_to = built.built.tx.transaction_body.outputs[0].address
    assert isinstance(returned_to, Address)
    return BuiltCancelTx(
        job_id=job_id,
        tx_cbor=built.built.cbor_hex,
        tx_id=built.built.tx_id,
        escrow=f"{row.tx_id}#{row.output_index}",
        returned_to=str(returned_to),
        fee_lovelace=built.built.fee,
        oracles=tuple(m.url for m in members),
        required_signers=tuple(s.payload.hex() for s in built.built.signers),
    )


def submit_cancel_tx(
    session: Session,
    context: Any,
    deployment: Any,
    quorum: CancelQuorum,
    owner: User,
    job_id: str,
    *,
    tx_cbor: str,
    witness_set: str,
    now: datetime,
) -> str:
    """Check the wallet's witnesses, cancel the job, collect the oracles' witnesses, submit."""
    from chain.offchain.builders import BuilderError, add_witnesses, assemble

    row = escrow_row(session, owner, job_id)
    tx = wallet_spend_of(row, job_id, tx_cbor, witness_set)
    body = tx.transaction_body
    signed = {bytes(w.vkey.hash().payload).hex() for w in tx.transaction_witness_set.vkey_witnesses}
    if owner.payment_key_hash not in signed:
        raise BadRequest("the wallet's witnesses do not include the submitter's signature")
    required = [bytes(k.payload).hex() for k in body.required_signers or []]
    members = {m.key_hash: m for m in quorum.members()}
    asked = [members[k] for k in required if k in members and k not in signed]
    missing = [k for k in required if k not in members and k not in signed]
    if missing:
        raise QuorumUnavailable(
            f"oracle(s) {', '.join(missing)} named by this cancel do not answer now; "
            "build the cancel again"
        )

    # From here on no provider can lease the job: it is cancelled under its row lock, and
    # the lease check is made again inside that lock.
    job = session.exec(select(Job).where(Job.id == row.job_id).with_for_update()).one()
    session.refresh(job)
    _refuse_if_work_started(session, job, row, now)
    if job.status not in TERMINAL_STATUSES:
        cancel_job(session, owner, job_id, now)
    else:
        session.commit()

    witnesses = []
    for member in asked:
        try:
            raw = quorum.cosign(member, tx_cbor)
        except OracleRefused as exc:
            raise Conflict(
                f"the oracle at {exc.url} would not co-sign the cancel: {exc.reason}"
            ) from exc
        try:
            witness = VerificationKeyWitness.from_cbor(raw)
        except Exception as exc:  # pycardano raises assorted errors on bad CBOR
            raise Conflict(
                f"the oracle at {redact_credentials(member.url)} answered no witness"
            ) from exc
        witnesses.append(witness)
    try:
        full = assemble(
            tx_cbor,
            add_witnesses(tx, witnesses).transaction_witness_set.to_cbor_hex(),
        )
    except BuilderError as exc:
        raise Conflict(f"an oracle's witness does not verify: {exc}") from exc
    return submit_spend(context, full, "cancel")
