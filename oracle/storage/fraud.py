"""Frauds a provider bond pays for, and what the oracle quorum's slash cites.

A fraud is an attestation the provider's key signed whose committed segments the spot
checks (verifier reports) show do not replay: `Reason.SPOT_CHECK_FAILED` (the local demo's
own replay), or `Reason.REFEREED_REPLAY_FAILED` (two verifiers agree, and the provider's
own sandbox replay still claims the commitment: `oracle.verification.referee`), the
provider's fault. A refereed fraud's slash burns (`SlashCase.burns`): the submitter whose
job code departs only on verifiers must not be paid for it. Nothing else is: a bad signature is nobody's attestation, escrow and lease
mismatches are refused without being anyone's proven lie, and a job whose first segment
does not replay is the job's fault. Each case names the job, the proof-of-training root
and the signed COSE bytes that `chain.offchain.builders.bond.citation_of` turns into the
slash redeemer (the bond script re-checks the signature and finds both values in it).

Reads the store (rejected attestations); decides nothing else and never signs: the quorum
builds and signs the slash (`proofnet bond slash`), each oracle after its own verdict.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sqlmodel import col, select

from oracle.models import REJECTED, AttestationRecord
from oracle.storage.store import AttestationStore
from oracle.verification.reasons import Reason
from proofnet.messages.attestation import AttestationError, attestation_of_cose

FRAUD_REASONS: frozenset[str] = frozenset(
    {str(Reason.SPOT_CHECK_FAILED), str(Reason.REFEREED_REPLAY_FAILED)}
)
# Frauds found by the referee of a disputed segment: the submitter's job code may be what
# departed on the verifiers, so the slash never pays the submitter; it burns.
BURNT_REASONS: frozenset[str] = frozenset({str(Reason.REFEREED_REPLAY_FAILED)})


@dataclass(frozen=True)
class SlashCase:
    """One fraud, as a slash cites it."""

    attestation_id: int
    job_id: str
    pot_root: str
    provider: str  # blake2b-224 of the worker key: the bond datum's provider
    escrow_ref: str  # the harmed submitter is that escrow's
    reason: str
    message: str
    cose: bytes

    @property
    def burns(self) -> bool:
        """Whether the slash's share is burnt (`BURNT_REASONS`), not paid to the submitter."""
        return self.reason in BURNT_REASONS


def slash_case(record: AttestationRecord) -> SlashCase | None:
    """The slash case of a stored attestation, or None when it is not a fraud."""
    if record.status != REJECTED or record.reason not in FRAUD_REASONS or record.id is None:
        return None
    try:
        att = attestation_of_cose(bytes(record.cose))
    except AttestationError:
        return None  # not signed by its worker key: nothing the provider can be held to
    if att.job_id != record.job_id or att.worker_key != record.worker_key:
        return None
    return SlashCase(
        attestation_id=record.id,
        job_id=att.job_id,
        pot_root=att.pot_root,
        provider=hashlib.blake2b(bytes.fromhex(att.worker_key), digest_size=28).hexdigest(),
        escrow_ref=record.escrow_ref,
        reason=record.reason,
        message=record.message,
        cose=bytes(record.cose),
    )


def fraud_cases(store: AttestationStore, job_id: str | None = None) -> list[SlashCase]:
    """Every fraud the store holds (of one job when given), oldest first."""
    query = select(AttestationRecord).where(
        AttestationRecord.status == REJECTED, col(AttestationRecord.reason).in_(FRAUD_REASONS)
    )
    if job_id is not None:
        query = query.where(AttestationRecord.job_id == job_id)
    with store.session() as s:
        rows = s.exec(query.order_by(col(AttestationRecord.id))).all()
    return [case for case in (slash_case(r) for r in rows) if case is not None]
