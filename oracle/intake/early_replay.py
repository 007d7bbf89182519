"""The oracle's round of early replays: every running lease whose first segment's
commitment the API lists (`GET /api/v1/oracle/early-commits`) and this oracle has not
decided yet is checked (`oracle.verification.early.check_early`: a drawn verifier replays
segment 1) and its verdict kept (`oracle_early_checks`), with whose fault and why. A check
that cannot be made yet (no verifier, no report) is tried again next round; one verdict per
lease stands. Served at `GET /api/v1/jobs/{job_id}/early-checks`.

A verdict that found the job at fault is signed (`proofnet.messages.job_fault`) and posted to
the API (`POST /api/v1/oracle/job-faults`), and posted again each round while the lease is
listed (the API keeps one vote per oracle): the API stops the lease once the deployment's
quorum of oracles posted theirs. Posting fails soft: the next round tries again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from nacl.signing import SigningKey

from oracle.inputs.feed import FeedError, JobInfo
from oracle.storage.store import AttestationStore
from oracle.verification.early import EarlyCommit, EarlyVerdict, check_early
from oracle.verification.spotcheck import SpotCheckUnavailable
from oracle.verification.verifiers import VerifierSpotChecker
from proofnet.messages.job_fault import JobFaultError, JobFaultVerdict

log = logging.getLogger("oracle.early")


class EarlyFeed(Protocol):
    def early_commits(self) -> list[EarlyCommit]: ...

    def job(self, job_id: str) -> JobInfo | None: ...


class JobFaultPoster(Protocol):
    def post_job_fault(self, verdict: JobFaultVerdict) -> dict[str, Any]: ...


def job_fault_verdict(key: SigningKey, verdict: EarlyVerdict) -> JobFaultVerdict:
    """This oracle's signed stop of the lease an early verdict found the job at fault in."""
    return JobFaultVerdict.sign(
        key,
        job_id=verdict.job_id,
        nonce=verdict.nonce,
        attempt=verdict.attempt,
        reason=str(verdict.reason or "job_not_replayable"),
        message=verdict.message,
        prefix_root=verdict.prefix_root or "0" * 64,
    )


@dataclass
class EarlyReplay:
    feed: EarlyFeed
    checker: VerifierSpotChecker
    store: AttestationStore
    # Where job-fault verdicts are posted (the API feed); None: kept here only.
    stops: JobFaultPoster | None = None

    def _post(self, verdict: EarlyVerdict) -> None:
        if self.stops is None:
            return
        try:
            state = self.stops.post_job_fault(job_fault_verdict(self.checker.signing_key, verdict))
        except (FeedError, JobFaultError) as exc:
            log.info("job-fault verdict on job %s not posted yet: %s", verdict.job_id, exc)
            return
        log.info("job-fault verdict on job %s posted: %s", verdict.job_id, state)

    def _repost(self, commits: list[EarlyCommit]) -> None:
        """Post again the job faults decided before (a restart, a failed post): the API
        counts one vote per oracle, so posting twice is harmless."""
        if self.stops is None:
            return
        for row in self.store.early_job_faults(c.nonce for c in commits):
            self._post(
                EarlyVerdict(
                    job_id=row.job_id,
                    nonce=row.nonce,
                    attempt=row.attempt,
                    passed=False,
                    fault="job",
                    reason=row.reason,
                    message=row.message,
                    prefix_root=row.prefix_root,
                )
            )

    def run_once(self) -> list[EarlyVerdict]:
        """One round; the verdicts decided in it."""
        try:
            commits = self.feed.early_commits()
        except FeedError as exc:
            log.info("cannot list early commits now: %s", exc)
            return []
        decided = self.store.early_decided(c.nonce for c in commits)
        self._repost([c for c in commits if c.nonce in decided])
        out = []
        for commit in commits:
            if commit.nonce in decided:
                continue
            try:
                job = self.feed.job(commit.job_id)
                verdict = None if job is None else check_early(self.checker, job, commit)
            except (FeedError, SpotCheckUnavailable) as exc:
                log.info("early replay of job %s not decided yet: %s", commit.job_id, exc)
                continue
            if verdict is None or not self.store.record_early(verdict):
                continue
            log.info(
                "early replay of job %s attempt %d: %s",
                verdict.job_id,
                verdict.attempt,
                "passed" if verdict.passed else f"{verdict.fault}'s fault: {verdict.message}",
            )
            if verdict.fault == "job":
                self._post(verdict)
            out.append(verdict)
        return out
