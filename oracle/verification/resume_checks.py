"""A single-unit job that resumed after a lost provider: the attempt's proof must start from
the checkpoint the lost attempt committed, and the attempt is answerable for its own
segments only.

The API hands the next provider the last intact checkpoint of the lost attempt's uploaded
prefix (`api.services.resume`) and reports, per attempt, where it resumed (`JobInfo.attempts`).
The oracle does not take the resumed attempt's word that it started there: it reads the
lost attempt's `pot/prefix.json` from the API (checked against the hash the API recorded
for that lease's upload) and the resumed proof's manifest (checked against the attested
root), and applies `pot.manifest.check_resumed` with the schedule's step of the checkpoint:
the resumed proof's leaves 0..`at` must be the prefix's. A provider that resumed from a
forged checkpoint (its own weights, another step, another data order, a prefix it wrote)
has another leaf and is refused with `pot_resume_mismatch`.

The segments an attempt proved are `first..last` (`own_segments`): a spot check draws only
from them, since the segments before were proved, uploaded and are paid as the earlier
attempt's.
"""

from __future__ import annotations

from dataclasses import dataclass

from oracle.inputs.feed import ApiFeed, ArtifactMissing, AttemptInfo, JobInfo
from pot.manifest import MANIFEST_NAME, PREFIX_NAME, Manifest, ProofError, check_resumed
from pot.schedule import ScheduleError
from proofnet.messages.attestation import Attestation
from proofnet.messages.result_paths import attempt_result_name

POT_PREFIX = "pot/"
# Reason codes (`oracle.verification.verify.Reason` takes these values).
POT_RESUME_MISMATCH = "pot_resume_mismatch"
POT_MISSING = "pot_missing"
POT_INVALID = "pot_invalid"
SEGMENTS_MISMATCH = "segments_mismatch"


class ResumeRejected(Exception):
    """The resumed proof does not chain to the committed prefix; `reason` is a reason code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class ResumedFrom:
    """Where the attested attempt resumed: attempt `source` at checkpoint `at`."""

    attempt: AttemptInfo
    source: AttemptInfo
    at: int


def attested_attempt(att: Attestation, job: JobInfo) -> AttemptInfo | None:
    """The whole-job attempt a single-unit attestation is of: the completing lease's."""
    if att.unit is not None or job.lease is None:
        return None
    return job.attempt(job.lease.attempt)


def resumed_from(att: Attestation, job: JobInfo) -> ResumedFrom | None:
    """Where the attested attempt resumed another, or None (it started from step 0)."""
    attempt = attested_attempt(att, job)
    if attempt is None or attempt.resumed_from is None or attempt.resumed_at is None:
        return None
    source = job.attempt(attempt.resumed_from)
    if source is None:  # parse_attempts refuses a link to an attempt it does not list
        return None
    return ResumedFrom(attempt=attempt, source=source, at=attempt.resumed_at)


LOST_OUTCOMES = ("released", "failed", "expired")


def auction_fallback_refusal(
    att: Attestation, job: JobInfo, winner: str, ranking: tuple[str, ...]
) -> str | None:
    """Why a bidder that did not win an auction may not be paid its clearing price for
    this attempt, or None: it must be in the ranking (a bid at or under the reserve), and
    an attempt of the winner must have been lost before this one (the job is not taken
    from a winner that still runs it)."""
    attempt = attested_attempt(att, job)
    checks = (
        (att.worker_key in ranking, "it made no bid at or under the reserve"),
        (attempt is not None, "the API reports no attempt for this attestation"),
        (
            attempt is not None
            and any(
                a.worker_key == winner
                and a.outcome in LOST_OUTCOMES
                and a.attempt < attempt.attempt
                for a in job.attempts
            ),
            "the winner lost no attempt before this one",
        ),
    )
    for ok, why in checks:
        if not ok:
            return why
    return None


def own_first_segment(att: Attestation, job: JobInfo) -> int:
    """The first segment the attested attempt proved (1 unless it resumed)."""
    resumed = resumed_from(att, job)
    return 1 if resumed is None else resumed.at + 1


def check_segments_named(att: Attestation, job: JobInfo) -> None:
    """Raise `ResumeRejected` unless the completing attempt's attestation names its attempt
    and segments when, and only when, it resumed (`Attestation.segments`: first = `at`+1, last =
    the schedule's end). The name keys its payment apart from the lost attempts' claims on
    the one escrow (`oracle.models.payable_key`), and so holds the escrow until they are
    decided too (`oracle.settlement.readiness`)."""
    named = att.segments
    attempt = attested_attempt(att, job)
    resumed = resumed_from(att, job)
    if named is None:
        if resumed is not None:
            raise ResumeRejected(
                SEGMENTS_MISMATCH,
                f"attempt {resumed.attempt.attempt} resumed attempt {resumed.source.attempt}: "
                "its attestation must name its attempt and segments (the lost attempt is "
                "paid for its own from the same escrow)",
            )
        return
    if resumed is None:
        # Named, it would be payable under another key than the plain attestation of the
        # same attempt (`oracle.models.payable_key`): one attempt, one key.
        raise ResumeRejected(
            SEGMENTS_MISMATCH,
            "the attestation names segments, but its attempt resumed no other: it is paid "
            "for the whole job, without segments",
        )
    schedule = job.spec.schedule
    first = resumed.at + 1
    expected = (
        None if attempt is None else attempt.attempt,
        first,
        None if schedule is None else schedule.segments,
    )
    if (named.attempt, named.first, named.last) != expected:
        raise ResumeRejected(
            SEGMENTS_MISMATCH,
            f"the attestation names attempt {named.attempt}, segments {named.first}.."
            f"{named.last}; the completing attempt is {expected[0]} and proved "
            f"{expected[1]}..{expected[2]}",
        )


def check_resumed_proof(att: Attestation, job: JobInfo, feed: ApiFeed) -> ResumedFrom | None:
    """Raise `ResumeRejected` unless a resumed attempt's proof chains to the prefix the lost
    attempt committed, at the checkpoint the API says it resumed and at the schedule's step
    for it. None for an attempt that did not resume. FeedError propagates (retry)."""
    resumed = resumed_from(att, job)
    if resumed is None:
        return None
    schedule = job.spec.schedule
    try:
        step = None if schedule is None else schedule.leaf_step(resumed.at)
    except ScheduleError as exc:
        raise ResumeRejected(
            POT_RESUME_MISMATCH,
            f"attempt {resumed.attempt.attempt} resumed at checkpoint {resumed.at}, which the "
            f"spec's schedule does not have: {exc}",
        ) from exc
    try:
        raw_manifest = feed.artifact(job.job_id, POT_PREFIX + MANIFEST_NAME)
    except ArtifactMissing as exc:
        raise ResumeRejected(POT_MISSING, "no pot/manifest.json uploaded") from exc
    try:
        manifest = Manifest.from_bytes(raw_manifest, expected_root=att.pot_root)
    except ProofError as exc:
        raise ResumeRejected(POT_INVALID, str(exc)) from exc
    name = attempt_result_name(resumed.source.attempt, POT_PREFIX + PREFIX_NAME)
    try:
        prefix = Manifest.from_bytes(feed.artifact(job.job_id, name))
    except ArtifactMissing as exc:
        raise ResumeRejected(
            POT_RESUME_MISMATCH,
            f"attempt {resumed.source.attempt}, which attempt {resumed.attempt.attempt} "
            "resumed, has no committed prefix on record",
        ) from exc
    except ProofError as exc:
        raise ResumeRejected(
            POT_RESUME_MISMATCH,
            f"the prefix attempt {resumed.source.attempt} committed does not parse: {exc}",
        ) from exc
    try:
        check_resumed(manifest, prefix, resumed.at, step=step)
    except ProofError as exc:
        raise ResumeRejected(
            POT_RESUME_MISMATCH,
            f"the proof does not resume attempt {resumed.source.attempt} at checkpoint "
            f"{resumed.at} as committed: {exc}",
        ) from exc
    return resumed
