"""Co-signing escrow cancels: the escrow's Cancel path needs the submitter and an oracle
quorum, and gives a job's whole escrow back at once when no work started.

The API asks each oracle (`POST /api/v1/quorum/cancel`) once the submitter has cancelled the
job and signed the cancel transaction. An oracle trusts nothing it is sent: it decodes the
transaction and applies `CHECKS` in turn, each refusing with its reason, then checks from
its own view that no work started and marks the escrow cancelled (`oracle.storage.cancel_marks`), so
it never pays a later attestation for it, and only then returns its VKey witness.

- the transaction names this oracle a required signer, has a TTL, and mints, certifies,
  withdraws, votes and proposes nothing (the witness would authorise those too);
- no input or collateral is this oracle's own (the witness would spend it);
- every script input is an escrow of this deployment, spent with `Cancel`, whose datum this
  deployment trusts; there is at least one (the escrow script itself checks that each goes
  back whole to its submitter, who must sign);
- per escrow: the API's feed knows the job, names this escrow as its record, reports the
  job cancelled and no lease ever granted (`work_started_at` null);
- per escrow: this oracle's own store holds no attestation for the escrow or its job (a
  worker that finished would have sent one), checked and marked in one transaction.

A lease the API grants after it cancelled the job cannot exist (the API cancels under the
job's row lock before it asks), and an attestation without a lease never verifies, so the
mark only ever refuses payouts no provider earned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pycardano import (
    PaymentSigningKey,
    ScriptHash,
    TransactionOutput,
    VerificationKeyHash,
    VerificationKeyWitness,
)

from chain.contracts import types as t
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.onchain import datum_cbor
from oracle.inputs.feed import ApiFeed, FeedError
from oracle.models import escrow_ref
from oracle.storage import cancel_marks
from proofnet.when import when_text

from .ports import ChainView, OutRef
from .quorum import QuorumRefusal
from .reviewed_tx import ReviewedTx, decode_reviewed, refuse_beyond_scope, refuse_own_funds

log = logging.getLogger("oracle.settlement")

CANCEL_PATH = "/api/v1/quorum/cancel"
IDENTITY_PATH = "/api/v1/quorum/identity"


@dataclass(frozen=True)
class EscrowToCancel:
    ref: OutRef
    datum: t.EscrowDatum

    @property
    def job_id(self) -> str:
        return bytes(self.datum.job_id).hex()


# The cancel as this oracle reviews it.
CancelTx = ReviewedTx


@dataclass(frozen=True)
class CancelContext:
    deployment: Deployment
    key_hash: VerificationKeyHash


Check = Callable[[CancelTx, CancelContext], None]


def check_signer_and_shape(tx: CancelTx, ctx: CancelContext) -> None:
    refuse_beyond_scope(tx, ctx.key_hash, "cancel")


def check_not_own_funds(tx: CancelTx, ctx: CancelContext) -> None:
    refuse_own_funds(tx, ctx.key_hash)


def check_escrow_inputs(tx: CancelTx, ctx: CancelContext) -> None:
    escrow_hash = ScriptHash(bytes.fromhex(ctx.deployment.escrow_hash))
    found = 0
    for index, (ref, out) in enumerate(tx.inputs):
        part = out.address.payment_part
        if not isinstance(part, ScriptHash):
            continue
        if part != escrow_hash:
            raise QuorumRefusal(f"input {ref} is at a script other than this deployment's escrow")
        datum = _escrow_datum(ref, out)
        if not ctx.deployment.trusts(datum):
            raise QuorumRefusal(f"escrow {ref} trusts another oracle configuration")
        try:
            t.Cancel.from_cbor(datum_cbor(tx.spend_redeemers[index]))
        except KeyError:
            raise QuorumRefusal(f"escrow {ref} has no redeemer") from None
        except Exception as exc:  # foreign data: not a Cancel
            raise QuorumRefusal(f"escrow {ref} is not spent with Cancel: {exc}") from exc
        found += 1
    if not found:
        raise QuorumRefusal("the transaction cancels no escrow")


CHECKS: tuple[Check, ...] = (check_signer_and_shape, check_not_own_funds, check_escrow_inputs)


def escrows_of(tx: CancelTx, deployment: Deployment) -> list[EscrowToCancel]:
    escrow_hash = ScriptHash(bytes.fromhex(deployment.escrow_hash))
    return [
        EscrowToCancel(ref, _escrow_datum(ref, out))
        for ref, out in tx.inputs
        if out.address.payment_part == escrow_hash
    ]


def _escrow_datum(ref: OutRef, out: TransactionOutput) -> t.EscrowDatum:
    try:
        return t.EscrowDatum.from_cbor(datum_cbor(out.datum))
    except Exception as exc:  # foreign data
        raise QuorumRefusal(f"escrow {ref} carries no EscrowDatum: {exc}") from exc


def work_refusal(escrow: EscrowToCancel, feed: ApiFeed, now_ms: int) -> str | None:
    """Why the API's feed says this escrow must not be cancelled, or None."""
    try:
        job = feed.job(escrow.job_id)
    except FeedError as exc:
        raise QuorumRefusal(f"cannot ask the API about job {escrow.job_id}: {exc}") from exc
    if job is None:
        return f"the API does not know job {escrow.job_id}"
    ref = escrow.ref
    if job.escrow is None or (job.escrow.tx_id, job.escrow.index) != (ref.tx_id, ref.index):
        return f"escrow {ref} is not job {escrow.job_id}'s recorded escrow"
    if job.status != "cancelled":
        return f"job {escrow.job_id} is {job.status}, not cancelled"
    if not job.work_reported:
        return "the API does not report whether work on the job started"
    if job.work_started_ms is not None:
        return (
            f"work on job {escrow.job_id} started at "
            f"{when_text(job.work_started_ms, now_ms)} (a provider leased it)"
        )
    return None


@dataclass
class CancelCoSigner:
    """What `POST /api/v1/quorum/cancel` runs."""

    deployment: Deployment
    chain: ChainView
    key: PaymentSigningKey
    feed: ApiFeed
    db: Any  # the oracle's database engine (attestations and cancel marks)
    checks: Sequence[Check] = CHECKS
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    @classmethod
    def for_engine(cls, engine: Any, app: Any) -> CancelCoSigner:
        """Over the settlement engine's deployment, chain and key, the intake's API feed,
        and the attestations' database (the marks are checked against them)."""
        builder = engine.builder
        return cls(
            builder.deployment,
            engine.chain,
            builder.oracle_key,
            app.state.context.feed,
            app.state.engine,
        )

    @property
    def key_hash(self) -> VerificationKeyHash:
        return self.key.to_verification_key().hash()

    def review(self, tx_cbor: bytes) -> bytes:
        """The VKey witness CBOR over the cancel, or `QuorumRefusal`."""
        tx = decode_reviewed(tx_cbor, self.chain)
        ctx = CancelContext(self.deployment, self.key_hash)
        for check in self.checks:
            check(tx, ctx)
        now = self.clock()
        now_ms = int(now.timestamp() * 1000)
        escrows = escrows_of(tx, self.deployment)
        for escrow in escrows:
            why = work_refusal(escrow, self.feed, now_ms)
            if why is not None:
                raise QuorumRefusal(why)
        body_hash = tx.tx.transaction_body.hash()
        for escrow in escrows:
            ref = escrow_ref(escrow.ref.tx_id, escrow.ref.index)
            try:
                cancel_marks.mark(
                    self.db, escrow=ref, job_id=escrow.job_id, cancel_tx_id=body_hash.hex(), now=now
                )
            except cancel_marks.WorkSeen as exc:
                raise QuorumRefusal(str(exc)) from exc
        witness = VerificationKeyWitness(self.key.to_verification_key(), self.key.sign(body_hash))
        log.info(
            "co-signed cancel tx %s of %s",
            body_hash.hex(),
            ", ".join(str(e.ref) for e in escrows),
            extra={"job": "quorum", "tx_id": body_hash.hex()},
        )
        return bytes(witness.to_cbor())
