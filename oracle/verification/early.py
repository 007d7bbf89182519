"""Early replay of the first segment, while the job still trains.

A worker uploads each committed checkpoint and its committed prefix (`pot/prefix.json`)
while the job trains (`worker.checkpoint_upload`), so checkpoints 0 and 1 soon after segment 1
is committed. The API lists such running leases to oracles
(`GET /api/v1/oracle/early-commits`); for each, an oracle reads the attempt's prefix, checks
it against the spec's schedule without code, and has segment 1 replayed (twice, from the same
checkpoint) by a verifier it draws with its own signature over the prefix's early subject
(`proofnet.messages.verification.early_subject`), exactly as it draws for an attestation
(`oracle.verification.verifiers`). The verdict says whose fault a failure is, and why:

- the job's, when the job's trainer cannot be loaded by the harness at the pinned commit or
  the two replays of segment 1 disagree (its code is not deterministic, so no proof of it can
  be checked): found before the job has used its lease;
- the provider's, when the prefix does not follow the schedule, the files are withheld, or
  segment 1 (replayed deterministically) does not end at its committed checkpoint, or
  checkpoint 0 is not what the trainer builds from the job seed;
- nobody's, when segment 1 replays to its commitment: a later segment that does not replay
  is then the provider's fault.

Runs no job code; reads and writes through the verifier desk (the API feed) only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oracle.verification.proof_checks import Draw
from oracle.verification.spotcheck import SpotCheckUnavailable, judge, needed_files
from oracle.verification.verifiers import (
    Subject,
    VerifierSpotChecker,
    attribute,
    report_as_harness_json,
)
from pot.harness import check_structure
from pot.manifest import Manifest, ProofError
from pot.seeds import draw_message, draw_seed
from proofnet.messages.result_paths import attempt_result_name
from proofnet.messages.verification import (
    CPU,
    FIRST_SEGMENT,
    PREFIX_FILE,
    Fault,
    early_subject,
)

if TYPE_CHECKING:
    from oracle.inputs.feed import AttemptInfo, JobInfo


@dataclass(frozen=True)
class EarlyCommit:
    """A running whole-job lease whose first segment's commitment is uploaded (as the API
    lists it): the job, the attempt and its lease nonce, and the GPU model it runs on (None
    for a job that leases no GPU)."""

    job_id: str
    attempt: int
    nonce: str
    gpu_model: str | None = None


@dataclass(frozen=True)
class EarlyVerdict:
    """The early replay's verdict on one lease's first segment, with whose fault a failure
    is and why (`reason` a `oracle.verification.verify.Reason` value)."""

    job_id: str
    nonce: str
    attempt: int
    passed: bool
    fault: Fault | None
    reason: str | None
    message: str
    prefix_root: str = ""
    verifier: str = ""
    report: dict[str, Any] | None = None


def _attempt(job: JobInfo, commit: EarlyCommit) -> AttemptInfo | None:
    for attempt in job.attempts:
        if attempt.attempt == commit.attempt and attempt.nonce == commit.nonce:
            return attempt
    return None


def checkable(job: JobInfo, commit: EarlyCommit) -> str | None:
    """Why the first segment of this lease is not replayed early, or None: only a whole,
    unsealed job's first attempt that trains from step 0 with the harness."""
    attempt = _attempt(job, commit)
    checks: list[tuple[bool, str]] = [
        (job.spec.topology is None, "a unit's proof is replayed with its attestation"),
        (not job.sealed, "a sealed job's proof files are sealed at the end"),
        (job.spec.proof.trainer is not None, "the spec names no trainer"),
        (job.spec.schedule is not None, "the spec declares no schedule"),
        (attempt is not None, f"the API lists no attempt {commit.attempt} with that nonce"),
        (
            attempt is None or attempt.resumed_from is None,
            "a resumed attempt's first segment is not the job's",
        ),
        (
            job.spec.resources.gpus == 0 or commit.gpu_model is not None,
            "the lease names no GPU model to draw a verifier of",
        ),
    ]
    return next((why for holds, why in checks if not holds), None)


def check_early(
    checker: VerifierSpotChecker, job: JobInfo, commit: EarlyCommit
) -> EarlyVerdict | None:
    """The verdict on the first segment of `commit`'s lease (see the module doc), None when
    it is not replayed early (`checkable`); SpotCheckUnavailable while it cannot be made
    yet (the prefix not readable, no verifier, no report)."""
    from oracle.inputs.feed import ArtifactMissing, FeedError
    from oracle.verification.reasons import Reason

    if checkable(job, commit) is not None:
        return None
    attempt = _attempt(job, commit)
    assert attempt is not None

    def verdict(
        passed: bool, fault: Fault | None, reason: str | None, message: str, **more: Any
    ) -> EarlyVerdict:
        return EarlyVerdict(
            job.job_id, commit.nonce, commit.attempt, passed, fault, reason, message, **more
        )

    try:
        raw = checker.desk.artifact(job.job_id, attempt_result_name(attempt.attempt, PREFIX_FILE))
    except ArtifactMissing as exc:
        raise SpotCheckUnavailable(f"the first segment's prefix is not uploaded: {exc}") from exc
    except FeedError as exc:
        raise SpotCheckUnavailable(str(exc)) from exc
    schedule = job.spec.schedule
    assert schedule is not None
    try:
        prefix = Manifest.from_bytes(raw)
        check_structure(prefix, schedule, prefix=True)
    except ProofError as exc:
        return verdict(False, "provider", Reason.POT_SCHEDULE_MISMATCH, f"the prefix: {exc}")
    devices = CPU if job.spec.resources.gpus == 0 else str(commit.gpu_model)
    subject = Subject(
        commit.nonce,
        attempt.worker_key,
        None,
        early_subject(job.job_id, commit.nonce, prefix.root),
        prefix.root,
        devices,
    )
    signature = checker.sign(draw_message(bytes.fromhex(subject.leaf)))
    seed = draw_seed(signature)
    segments = (FIRST_SEGMENT,)
    files = (PREFIX_FILE, *(f"pot/{n}" for n in needed_files(segments)))
    _task, report, _payout = checker.await_report(
        subject, job, "early", segments, files, (), signature, seed
    )
    details = report_as_harness_json(report)
    details["draw_signature"] = signature.hex()
    more: dict[str, Any] = {
        "prefix_root": prefix.root,
        "verifier": report.verifier,
        "report": details,
    }
    job_fault = attribute(report)
    if job_fault is not None:
        return verdict(False, "job", Reason.JOB_NOT_REPLAYABLE, job_fault, **more)
    if report.status == "withheld":
        message = f"the verifier could not get the first segment's files: {report.message[:500]}"
        return verdict(False, "provider", Reason.POT_WITHHELD, message, **more)
    judged = judge(
        details,
        prefix,
        Draw(signature, seed, segments),
        job.spec.proof.tolerance_ppm,
        from_scratch=True,
    )
    if not judged.passed:
        return verdict(False, "provider", judged.reason, judged.message, **more)
    return verdict(True, None, None, "", **more)
