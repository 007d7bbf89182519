"""The browser-wallet escrow flow: build the job's unsigned lock transaction, then take the
wallet's witness set, submit, and record the escrow exactly as `POST /jobs/{id}/escrow` does.

The server builds (it knows the deployment, the job's budget and the chain time); the wallet
only signs. Everything a client sends back is rechecked: the witnesses must verify over the
body, and the transaction must lock an escrow of this deployment for this very job.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pycardano import Address, Transaction, UTxO, VerificationKeyHash
from sqlmodel import Session, select
from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_fixed

from api.config import ApiConfig
from api.errors import ApiError, BadRequest, Conflict
from api.models import Job, JobEscrow, User
from api.models.job import TERMINAL_STATUSES
from api.services import oracle_feed, payable_escrow
from api.services.escrow_deadline import escrow_deadline_ms
from api.services.jobs import get_job
from proofnet.messages.jobspec import JobSpec

# What a transaction may cost before the API refuses to build it (a sanity bound, 50 ADA).
MAX_FEE_LOVELACE = 50_000_000
MAX_WALLET_UTXOS = 500


class EscrowUnavailable(ApiError):
    """The chain backend or the deployment is not available (retry later)."""

    status_code = 503


@dataclass(frozen=True)
class BuiltEscrowTx:
    """An unsigned lock transaction for one job, and what a CIP-30 wallet needs to sign it."""

    job_id: str
    tx_cbor: str
    tx_id: str
    escrow_index: int
    escrow_address: str
    budget: int
    deadline_ms: int
    fee_lovelace: int
    locked_lovelace: int
    ntx_unit: str
    signing_inputs: tuple[str, ...]
    required_signers: tuple[str, ...]


@dataclass(frozen=True)
class SubmittedEscrowTx:
    job_id: str
    tx_id: str
    escrow_index: int
    # None while the chain has not confirmed the transaction yet: record it later with
    # `POST /jobs/{id}/escrow {tx_id, index}`.
    recorded: JobEscrow | None


def _open_job(session: Session, owner: User, job_id: str) -> Job:
    job = get_job(session, owner, job_id)  # 404 for anyone but the owner
    if job.status in TERMINAL_STATUSES:
        raise Conflict(f"job {job_id} is {job.status}; it needs no escrow")
    return job


def _payer(owner: User, change_address: str | None, deployment: Any) -> Address:
    text = change_address or owner.address
    try:
        address = Address.from_primitive(text)
    except Exception as exc:  # pycardano raises assorted errors on a bad address
        raise BadRequest(f"change_address is not a Cardano address: {text[:24]!r}") from exc
    if address.network != deployment.pycardano_network:
        raise BadRequest(
            f"change_address is not on the deployment's network ({deployment.network})"
        )
    if not isinstance(address.payment_part, VerificationKeyHash):
        raise BadRequest("change_address must have a key payment credential (a wallet address)")
    return address


def parse_wallet_utxos(utxos: Sequence[str]) -> list[UTxO]:
    """CIP-30 `getUtxos()` answers: CBOR hex of TransactionUnspentOutput."""
    if len(utxos) > MAX_WALLET_UTXOS:
        raise BadRequest(f"at most {MAX_WALLET_UTXOS} wallet UTxOs")
    parsed = []
    for i, raw in enumerate(utxos):
        try:
            parsed.append(UTxO.from_cbor(bytes.fromhex(raw)))
        except Exception as exc:  # pycardano raises assorted errors on bad CBOR
            raise BadRequest(f"utxos[{i}] is not a CBOR TransactionUnspentOutput") from exc
    return parsed


def build_escrow_tx(
    session: Session,
    config: ApiConfig,
    context: Any,
    deployment: Any,
    owner: User,
    job_id: str,
    *,
    change_address: str | None = None,
    wallet_utxos: Sequence[str] | None = None,
) -> BuiltEscrowTx:
    """The unsigned transaction locking the job's budget in escrow, paid from the wallet."""
    from chain.offchain.builders import BuilderError, EscrowJob, build_lock_unsigned
    from chain.offchain.builders.chain_time import tip_posix_ms

    job = _open_job(session, owner, job_id)
    recorded = session.exec(select(JobEscrow).where(JobEscrow.job_id == job.id)).first()
    if recorded is not None:
        raise Conflict(
            f"job {job_id} already has an escrow ({recorded.tx_id}#{recorded.output_index}); "
            "locking another would tie up the budget twice"
        )
    spec = JobSpec.from_dict(job.spec)
    submitter = _payer(owner, None, deployment)
    payer = _payer(owner, change_address, deployment)
    utxos = None if wallet_utxos is None else parse_wallet_utxos(wallet_utxos)
    try:
        now_ms = tip_posix_ms(context)
        deadline = escrow_deadline_ms(now_ms, spec, config.max_attempts, config.settlement_window_s)
        unsigned = build_lock_unsigned(
            context,
            deployment,
            [EscrowJob(bytes.fromhex(job_id), spec.max_amount, deadline, submitter)],
            payer,
            utxos,
        )
    except BuilderError as exc:  # not enough NTX or ADA, malformed values: the caller's to fix
        raise BadRequest(f"cannot build the escrow transaction: {exc}") from exc
    except ApiError:
        raise
    except Exception as exc:  # the backend is down or answered nonsense
        raise EscrowUnavailable(f"chain backend unavailable: {type(exc).__name__}: {exc}") from exc
    built = unsigned.result.built
    if built.fee > MAX_FEE_LOVELACE:
        raise BadRequest(f"the escrow transaction would cost {built.fee} lovelace in fees")
    escrow_out = built.tx.transaction_body.outputs[0]
    return BuiltEscrowTx(
        job_id=job_id,
        tx_cbor=unsigned.tx_cbor_hex,
        tx_id=built.tx_id,
        escrow_index=0,
        escrow_address=str(deployment.escrow_address),
        budget=spec.max_amount,
        deadline_ms=deadline,
        fee_lovelace=built.fee,
        locked_lovelace=escrow_out.amount.coin,
        ntx_unit=deployment.ntx_unit,
        signing_inputs=unsigned.signing_inputs,
        required_signers=unsigned.required_key_hashes,
    )


def escrow_output_index(tx: Transaction, deployment: Any, job_id: str) -> int:
    """The output of `tx` that is this deployment's escrow for `job_id` (400 if none)."""
    from chain.contracts.types import EscrowDatum

    escrow = deployment.escrow_address
    for index, out in enumerate(tx.transaction_body.outputs):
        if out.address != escrow or out.datum is None:
            continue
        try:
            datum = EscrowDatum.from_cbor(out.datum.to_cbor())
        except Exception:  # some other datum: not ours
            continue
        if bytes(datum.job_id).hex() == job_id and deployment.trusts(datum):
            return index
    raise BadRequest(f"this transaction locks no escrow of this deployment for job {job_id}")


# How often a submitted transaction's escrow output is looked for until it shows.
CONFIRM_POLL_S = 0.25


def await_output(
    lookup: Callable[[], Any], *, confirm_wait_s: float, sleep: Callable[[float], None]
) -> Any:
    """`lookup()` every CONFIRM_POLL_S until it finds something or `confirm_wait_s` is
    spent (counted in polls, so a `sleep` that returns at once ends it as soon); None then.
    A failing backend counts as not found yet: the transaction is submitted already, and
    the client can record its escrow later."""

    def once() -> Any:
        try:
            return lookup()
        except payable_escrow.EscrowBackendError:
            return None

    return Retrying(
        stop=stop_after_attempt(math.ceil(confirm_wait_s / CONFIRM_POLL_S) + 1),
        wait=wait_fixed(CONFIRM_POLL_S),
        retry=retry_if_result(lambda found: found is None),
        sleep=sleep,
        retry_error_callback=lambda _state: None,
    )(once)


def submit_escrow_tx(
    session: Session,
    context: Any,
    deployment: Any,
    owner: User,
    job_id: str,
    *,
    tx_cbor: str,
    witness_set: str,
    now: datetime,
    config: ApiConfig,
    confirm_wait_s: float = 8.0,
    sleep: Callable[[float], None] = time.sleep,
) -> SubmittedEscrowTx:
    """Add the wallet's witnesses, submit, and record the escrow once the chain shows it."""
    from chain.offchain.builders import BuilderError, assemble, submit
    from chain.offchain.errors import TransactionRejectedError

    job = _open_job(session, owner, job_id)
    try:
        tx = assemble(tx_cbor, witness_set)
    except BuilderError as exc:
        raise BadRequest(f"refused: {exc}") from exc
    index = escrow_output_index(tx, deployment, job_id)
    try:
        tx_id = submit(context, tx)
    except TransactionRejectedError as exc:
        raise BadRequest(f"the chain refused the transaction: {exc.reason}") from exc
    except Exception as exc:
        raise EscrowUnavailable(f"chain backend unavailable: {type(exc).__name__}: {exc}") from exc
    found = await_output(
        lambda: payable_escrow.lookup(context, tx_id, index),
        confirm_wait_s=confirm_wait_s,
        sleep=sleep,
    )
    if found is None:
        return SubmittedEscrowTx(job_id, tx_id, index, None)
    terms = payable_escrow.terms_for(job, owner, deployment, config, now)
    checked = payable_escrow.require_payable(found, terms)
    row = oracle_feed.record_escrow(
        session, owner, job_id, tx_id=tx_id, index=index, found=checked, now=now
    )
    return SubmittedEscrowTx(job_id, tx_id, index, row)
