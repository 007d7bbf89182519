"""A co-signer's refusal that names the segments of an attestation its own verifier draw
showed do not replay, with the signed task and report as evidence.

Without it a co-signer's refusal is only its word: the proposer puts the co-signer on
cooldown and asks the next one, so a cheat is paid when the proposer's draw and any one
co-signer's draw miss it ("co-signer shopping"). With it the refusal is checkable: the task
the co-signer signed for its drawn verifier (the attestation's leaf, the job, the segments
drawn) and the report that verifier signed back (not passed). The proposer then verifies
exactly the named segments itself, through its own verifier draw and referee path (never
running job code on the oracle): if they fail, it rejects the attestation (the provider's
fault, unpaid, slashable as any rejection); if they replay, the refusal is recorded as
unfounded and the proposer goes on as before. One oracle gets no veto (its claim is
re-checked, not obeyed), and a cheat no longer escapes by shopping for a co-signer.

`refusal_problem` is the one rule the proposer applies before it spends a replay on a
refusal: the evidence must be for this attestation and signed by the refusing co-signer.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any

from pydantic import Field, ValidationError

from proofnet.messages.fields import Frozen, Hex64, PosInt, TupleOf
from proofnet.messages.verification import (
    MAX_SEGMENTS,
    VerificationError,
    VerificationReport,
    VerificationTask,
)
from proofnet.messages.verification_fee import oracle_key_hash

# The most refusals one co-signer hands back with one refusal (one per attestation it drew).
MAX_REFUSALS = 64


class SegmentRefusalError(ValueError):
    """A segment refusal is malformed."""


class SegmentRefusal(Frozen):
    """Segments `segments` of the attestation with leaf `leaf_hash` did not replay when the
    refusing co-signer's drawn verifier replayed them (`task`, `report`)."""

    leaf_hash: Hex64
    segments: Annotated[TupleOf[PosInt], Field(min_length=1, max_length=MAX_SEGMENTS)]
    task: VerificationTask
    report: VerificationReport

    @classmethod
    def from_json(cls, obj: object) -> SegmentRefusal:
        try:
            return cls.model_validate(obj)
        except ValidationError as e:
            raise SegmentRefusalError(f"the segment refusal is malformed: {e}") from e

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def refusal_problem(
    refusal: SegmentRefusal, *, leaf_hash: str, job_id: str, refuser_key_hashes: Collection[str]
) -> str | None:
    """Why `refusal` is no evidence against the attestation with leaf `leaf_hash` of job
    `job_id`, or None. `refuser_key_hashes`: the key hash(es) of the co-signer that refused
    (its task must be signed by it: another oracle's old task proves nothing here)."""
    task, report = refusal.task, refusal.report
    checks: list[tuple[bool, str]] = [
        (refusal.leaf_hash == leaf_hash, "the refusal names another attestation"),
        (task.attestation == leaf_hash, "the task checks another attestation"),
        (task.job_id == job_id, "the task is for another job"),
        (task.kind == "replay", f"a {task.kind!r} task names no replayed segments"),
        (
            oracle_key_hash(task.oracle_key) in refuser_key_hashes,
            "the task is not signed by the refusing co-signer",
        ),
        (
            set(refusal.segments) <= set(task.segments),
            "the refusal names segments its verifier was not asked to replay",
        ),
        (report.status != "passed", "the report says the segments passed"),
    ]
    for holds, why in checks:
        if not holds:
            return why
    try:
        task.verify([task.oracle_key])
        report.verify_for(task)
    except VerificationError as exc:
        return str(exc)
    return None


def parse_refusals(raw: Any) -> tuple[SegmentRefusal, ...]:
    """The refusals of a co-signer's 409 answer (`"disputed"`); what does not parse is
    dropped (the proposer checks the rest with `refusal_problem`)."""
    out: list[SegmentRefusal] = []
    for item in raw[:MAX_REFUSALS] if isinstance(raw, list) else []:
        try:
            out.append(SegmentRefusal.from_json(item))
        except SegmentRefusalError:
            continue
    return tuple(out)
