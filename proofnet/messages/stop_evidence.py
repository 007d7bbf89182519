"""The evidence a settlement carries for a lease stopped for the job's fault, and the rule
that re-derives the stopped lease's share from it.

A lease the oracle quorum stopped for the job's fault (`proofnet.messages.job_fault`) is paid
for the segments it committed, at most those committed when it stopped plus the grace
(`proofnet.messages.segment_share.stopped_share`). Its attestation says so
(`Attestation.stop`, signed by the provider: the segments committed at the stop, as its
heartbeat answer told it). The oracles check that claim against the API's record of the
stop when they verify the attestation; the settlement then publishes, beside the
attestation in its bundle (`oracle.settlement.bundle`, version 4), what justifies it:

- `verdicts`: the quorum's signed job-fault verdicts that stopped that very lease (job,
  nonce, attempt), at least the deployment's threshold of distinct oracle keys of its set;
- `spec`: the job's canonical spec, which must hash to the attested job id: its schedule
  (how many segments the whole job has) and its pricing (the most the compute may cost);
- `segments`: the segments committed when the lease was stopped (the API's record, the
  same number the attestation claims).

An auditor with the bundle alone re-derives the most the attestation may be paid
(`stopped_cap`: the stopped share of the spec's compute price) and checks the evidence
(`stop_refusal`), so a quorum that overpays a stopped lease, or pays a stopped lease's
attestation with no, forged or another lease's stop evidence, is named. One definition,
applied by the oracle that publishes the evidence and by every auditor alike.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any

from pydantic import Field, ValidationError

from proofnet.messages.attestation import Attestation
from proofnet.messages.fields import Frozen, TupleOf
from proofnet.messages.job_fault import JobFaultError, JobFaultVerdict, quorum_reached
from proofnet.messages.jobspec import JobSpec, JobSpecError, job_id_of
from proofnet.messages.segment_share import stopped_share
from proofnet.messages.verification_fee import oracle_key_hash

# The most verdicts one stop carries (one per oracle of the set).
MAX_VERDICTS = 32
MAX_SPEC_CHARS = 200_000


class StopEvidenceError(ValueError):
    """A stop's evidence is malformed."""


class StopEvidence(Frozen):
    spec: Annotated[str, Field(min_length=2, max_length=MAX_SPEC_CHARS)]
    segments: Annotated[int, Field(ge=1, le=2**31 - 1)]
    verdicts: Annotated[TupleOf[JobFaultVerdict], Field(min_length=1, max_length=MAX_VERDICTS)]

    @classmethod
    def from_json(cls, obj: object) -> StopEvidence:
        try:
            return cls.model_validate(obj)
        except ValidationError as e:
            raise StopEvidenceError(f"the stop evidence is malformed: {e}") from e

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @property
    def job_id(self) -> str:
        return job_id_of(self.spec.encode("utf-8"))

    def job_spec(self) -> JobSpec:
        try:
            return JobSpec.from_canonical(self.spec.encode("utf-8"))
        except JobSpecError as e:
            raise StopEvidenceError(f"the stop evidence's spec: {e}") from e


def stop_refusal(
    att: Attestation,
    evidence: StopEvidence | None,
    *,
    oracle_key_hashes: Collection[str],
    threshold: int,
) -> str | None:
    """Why `evidence` does not justify paying `att` as a stopped lease, or None (also None
    when neither claims a stop). `oracle_key_hashes` and `threshold` are the deployment's
    oracle set and quorum: the verdicts must be signed by `threshold` distinct keys of it."""
    if att.stop is None:
        return None if evidence is None else "stop evidence beside an attestation of no stop"
    if evidence is None:
        return (
            f"the attestation claims a stopped lease's share ({att.stop.segments} segment(s) "
            "committed at the stop) and the bundle carries no stop evidence"
        )
    if evidence.job_id != att.job_id:
        return f"the stop evidence's spec is job {evidence.job_id}'s, not {att.job_id}'s"
    try:
        evidence.job_spec()
    except StopEvidenceError as exc:
        return str(exc)
    if evidence.segments != att.stop.segments:
        return (
            f"the stop evidence records {evidence.segments} segment(s) committed at the stop; "
            f"the attestation claims {att.stop.segments}"
        )
    for verdict in evidence.verdicts:
        if verdict.job_id != att.job_id or verdict.nonce != att.nonce:
            return (
                f"a verdict stops job {verdict.job_id}'s lease {verdict.nonce}, not the "
                "attested one"
            )
        if att.segments is not None and verdict.attempt != att.segments.attempt:
            return f"a verdict stops attempt {verdict.attempt}, not {att.segments.attempt}"
        if oracle_key_hash(verdict.oracle_key) not in oracle_key_hashes:
            return f"a verdict is signed by {verdict.oracle_key[:16]}..., not an oracle of the set"
        try:
            verdict.verify([verdict.oracle_key])
        except JobFaultError as exc:
            return str(exc)
    if not quorum_reached(evidence.verdicts, threshold):
        signers = len({v.oracle_key for v in evidence.verdicts})
        return f"the stop is signed by {signers} oracle(s) of one lease; the quorum is {threshold}"
    return None


def stopped_cap(att: Attestation, evidence: StopEvidence) -> int:
    """The most `att` may be paid as the stopped lease `evidence` shows: the stopped share
    of the spec's compute price (its fixed price; a rate card's or an auction's cap, which
    the metered or cleared price does not exceed) for the segments from the attempt's first."""
    spec = evidence.job_spec()
    first = 1 if att.segments is None else att.segments.first
    return stopped_share(spec, spec.compute_amount, first, evidence.segments)


def bundle_stops(obj: Any, count: int) -> tuple[StopEvidence | None, ...]:
    """The stop evidence of a settlement bundle's JSON per attestation position (None where
    none; all None before version 4). Raises StopEvidenceError when an entry is malformed,
    names no attestation of the bundle, or a second one names the same."""
    raw = obj.get("stops", []) if isinstance(obj, dict) else []
    if not isinstance(raw, list):
        raise StopEvidenceError("stops is a list")
    per: list[StopEvidence | None] = [None] * count
    for entry in raw:
        if not isinstance(entry, dict):
            raise StopEvidenceError("a stop entry is an object")
        position = entry.get("attestation")
        if not isinstance(position, int) or isinstance(position, bool):
            raise StopEvidenceError("a stop entry names its attestation by position")
        if not 0 <= position < count:
            raise StopEvidenceError(f"stop entry for attestation {position} of {count}")
        if per[position] is not None:
            raise StopEvidenceError(f"attestation {position} has two stop entries")
        per[position] = StopEvidence.from_json(
            {k: v for k, v in entry.items() if k != "attestation"}
        )
    return tuple(per)
