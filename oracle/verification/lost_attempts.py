"""The claim of an attempt that was lost: a resumed job pays each attempt for the segments
it proved, the lost one too, from the one escrow.

The lost provider may never come back, so its claim is one it signed while it trained: at
every checkpoint the worker uploads (`worker.checkpoint_upload`) it also uploads a signed
attestation `pot/claim-<k>.cose` naming its attempt and segments `first..k`, with the root
of its prefix trimmed to checkpoint `k` as `pot_root` and its share of the price for those
segments as `amount` (`proofnet.messages.segment_share`). When the job resumed from that
attempt at checkpoint `k`, the oracle takes the claim for exactly `k` from the API's feed
(`attempts/<n>/pot/claim-<k>.cose`, checked against the hash the API recorded for that
lease's upload) and verifies it like any attestation, with these checks in place of the
completed lease's (`LOST_CHECKS`, in order, each independent):

- the attempt is listed, was lost (released, failed or expired) and is not the lease the
  job completed under (still running, or not resumed from while the job goes on: retried,
  never refused, as what it proved is fixed only when the next attempt resumes from it);
- the claimed segments are the ones the API records it proved (`first_segment` ..
  `last_segment`: up to the checkpoint the next attempt resumed from), so no two attempts
  are paid for one segment and none for segments nobody resumed from;
- it is signed by that attempt's worker, to its payout address, with its nonce, within
  its lease's times, for no more GPU time than its wall time allows;
- the attested files are that attempt's uploads;
- its uploaded prefix holds the claimed checkpoints, at the schedule's steps, and trimmed
  to `last` has the attested root (the proof the spot check replays from).

The amount (at most the attempt's share of the price) and the spot check (the prefix's
data order under the attempt's nonce, then segments drawn from `first..last` only,
replayed from the attempt's uploads) are the pipeline's (`oracle.verification.verify`),
as for every attestation. Reads through the feed only; writes nothing.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass

from oracle.inputs.feed import ApiFeed, ArtifactMissing, AttemptInfo, JobInfo
from oracle.inputs.feed_units import JOB_OVER_STATUSES
from oracle.verification.resume_checks import LOST_OUTCOMES
from pot.harness import check_structure
from pot.manifest import PREFIX_NAME, Manifest, ProofError
from proofnet.messages.attestation import Attestation
from proofnet.messages.result_paths import attempt_result_name

# Reason codes (`oracle.verification.reasons.Reason` takes these values).
SEGMENTS_MISMATCH = "segments_mismatch"
ATTEMPT_NOT_LOST = "attempt_not_lost"


def claim_name(checkpoint: int) -> str:
    """The upload name of the claim a worker signs at checkpoint `checkpoint` (one level
    under `pot/`, as the feed scopes an attempt's proof uploads)."""
    return f"pot/claim-{checkpoint}.cose"


class ClaimPending(Exception):
    """The claim cannot be judged yet: its attempt still runs, or the job may still resume
    from it (what it proved is fixed only then). Verification is retried, never refused,
    so a claim posted early (by anyone holding it) is not lost."""


class LostClaimRejected(Exception):
    """The lost attempt's claim does not hold; `reason` is a reason code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class LostClaim:
    """What a lost attempt's claim is checked against (read-only)."""

    att: Attestation
    job: JobInfo
    attempt: AttemptInfo
    feed: ApiFeed
    clock_skew_ms: int
    now_ms: int


def lost_attempt(att: Attestation, job: JobInfo) -> AttemptInfo | None:
    """The attempt a claim names when it is not the attempt the job completed under (then
    it is a lost attempt's claim, checked by `LOST_CHECKS`), else None."""
    if att.unit is not None or att.segments is None:
        return None
    completing = None if job.lease is None else job.lease.attempt
    if att.segments.attempt == completing:
        return None
    attempt = job.attempt(att.segments.attempt)
    if attempt is None:
        raise LostClaimRejected(
            ATTEMPT_NOT_LOST,
            f"the API lists no attempt {att.segments.attempt} of job {att.job_id}",
        )
    return attempt


def _check_lost(c: LostClaim) -> None:
    if c.attempt.outcome is None:
        raise ClaimPending(f"attempt {c.attempt.attempt} is still running")
    if c.attempt.outcome not in LOST_OUTCOMES:
        raise LostClaimRejected(
            ATTEMPT_NOT_LOST,
            f"attempt {c.attempt.attempt} is {c.attempt.outcome or 'running'}, not lost: only "
            "the attempt the job completed under is paid by a completion",
        )


def _check_segments(c: LostClaim) -> None:
    claimed = c.att.segments
    assert claimed is not None
    proved = (c.attempt.first_segment, c.attempt.last_segment)
    if c.attempt.last_segment is None and c.job.status not in JOB_OVER_STATUSES:
        raise ClaimPending(f"no attempt has resumed attempt {c.attempt.attempt} yet")
    if c.attempt.last_segment is None or c.attempt.last_segment < c.attempt.first_segment:
        raise LostClaimRejected(
            SEGMENTS_MISMATCH,
            f"attempt {c.attempt.attempt} proved no segment the job resumed from",
        )
    if (claimed.first, claimed.last) != proved:
        raise LostClaimRejected(
            SEGMENTS_MISMATCH,
            f"attempt {c.attempt.attempt} claims segments {claimed.first}..{claimed.last}, "
            f"but proved {proved[0]}..{proved[1]} (the next attempt resumed at checkpoint "
            f"{proved[1]})",
        )


def _check_worker(c: LostClaim) -> None:
    if c.attempt.worker_key != c.att.worker_key:
        raise LostClaimRejected(
            "lease_other_worker",
            f"attempt {c.attempt.attempt} was another worker's: its claim is its worker's",
        )
    if c.attempt.payout_address != c.att.payout_address:
        raise LostClaimRejected(
            "payout_mismatch", "payout address differs from the attempt's binding"
        )
    if not hmac.compare_digest(c.attempt.nonce, c.att.nonce):
        raise LostClaimRejected("nonce_mismatch", "nonce is not the attempt's")


def _check_times(c: LostClaim) -> None:
    skew = c.clock_skew_ms
    ended = c.attempt.ended_ms if c.attempt.ended_ms is not None else c.now_ms
    if c.att.started_ms < c.attempt.started_ms - skew or c.att.ended_ms > ended + skew:
        raise LostClaimRejected(
            "times_outside_lease",
            f"attested run {c.att.started_ms}..{c.att.ended_ms} ms lies outside attempt "
            f"{c.attempt.attempt}'s lease {c.attempt.started_ms}..{ended} ms",
        )
    gpus = max(1, c.job.spec.resources.gpus)
    if c.att.gpu_milliseconds > (c.att.ended_ms - c.att.started_ms) * gpus:
        raise LostClaimRejected(
            "gpu_time_implausible",
            f"{c.att.gpu_milliseconds} GPU-ms in {c.att.ended_ms - c.att.started_ms} ms of "
            f"wall time on {gpus} GPU(s)",
        )


def _check_results(c: LostClaim) -> None:
    for name, digest in c.att.result_hashes.items():
        if c.attempt.results.get(name) != digest:
            raise LostClaimRejected(
                "result_hashes_mismatch",
                f"result {name!r} is not attempt {c.attempt.attempt}'s upload",
            )


def _check_prefix(c: LostClaim) -> None:
    read_prefix(c.att, c.job, c.attempt, c.feed)


def read_prefix(att: Attestation, job: JobInfo, attempt: AttemptInfo, feed: ApiFeed) -> Manifest:
    """The prefix `attempt` uploaded, once it holds the claimed checkpoints, follows the
    schedule under the attempt's nonce and, trimmed to the claim's last checkpoint, has the
    attested root. FeedError propagates (retry)."""
    claimed = att.segments
    assert claimed is not None
    try:
        raw = feed.artifact(job.job_id, attempt_result_name(attempt.attempt, "pot/" + PREFIX_NAME))
    except ArtifactMissing as exc:
        raise LostClaimRejected(
            "pot_missing", f"attempt {attempt.attempt} uploaded no committed prefix"
        ) from exc
    schedule = job.spec.schedule
    try:
        prefix = Manifest.from_bytes(raw)
        if schedule is None:
            raise ProofError("the spec declares no schedule: no segment can be paid apart")
        check_structure(prefix, schedule, prefix=True)
    except ProofError as exc:
        raise LostClaimRejected(
            "pot_invalid", f"attempt {attempt.attempt}'s prefix: {exc}"
        ) from exc
    if prefix.segments < claimed.last:
        raise LostClaimRejected(
            SEGMENTS_MISMATCH,
            f"attempt {attempt.attempt}'s prefix commits {prefix.segments} segment(s), not "
            f"the {claimed.last} its claim names",
        )
    trimmed = Manifest(
        steps_per_checkpoint=prefix.steps_per_checkpoint,
        data_seed=prefix.data_seed,
        leaves=prefix.leaves[: claimed.last + 1],
    )
    if trimmed.root != att.pot_root:
        raise LostClaimRejected(
            "pot_root_mismatch",
            f"the prefix to checkpoint {claimed.last} has root {trimmed.root}, not the "
            f"attested {att.pot_root}",
        )
    return prefix


# In order; each says why in its LostClaimRejected.
LOST_CHECKS: tuple[tuple[str, Callable[[LostClaim], None]], ...] = (
    ("attempt_lost", _check_lost),  # a completion pays the completing attempt
    ("segments_proved", _check_segments),  # no segment paid twice, none unproved
    ("attempt_worker", _check_worker),  # only the attempt's worker claims its work
    ("attempt_times", _check_times),  # its run lies within its lease
    ("attempt_results", _check_results),  # the files it names are its uploads
    ("attempt_prefix", _check_prefix),  # the root is of its committed checkpoints
)


def check_lost_claim(claim: LostClaim) -> list[str]:
    """Run `LOST_CHECKS`; the names of those that passed (all of them), or raise
    `LostClaimRejected` at the first that fails."""
    passed = []
    for name, check in LOST_CHECKS:
        check(claim)
        passed.append(name)
    return passed
