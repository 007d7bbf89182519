"""The oracle's round of early replays: every running lease whose first segment's
commitment the API lists (`GET /api/v1/oracle/early-commits`) and this oracle has not
decided yet is checked (`oracle.verification.early.check_early`: a drawn verifier replays
segment 1) and its verdict kept (`oracle_early_checks`), with whose fault and why. A check
that cannot be made yet (no verifier, no report) is tried again next round; one verdict per
lease stands. Served at `GET /api/v1/jobs/{job_id}/early-checks`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from oracle.inputs.feed import FeedError, JobInfo
from oracle.storage.store import AttestationStore
from oracle.verification.early import EarlyCommit, EarlyVerdict, check_early
from oracle.verification.spotcheck import SpotCheckUnavailable
from oracle.verification.verifiers import VerifierSpotChecker

log = logging.getLogger("oracle.early")


class EarlyFeed(Protocol):
    def early_commits(self) -> list[EarlyCommit]: ...

    def job(self, job_id: str) -> JobInfo | None: ...


@dataclass
class EarlyReplay:
    feed: EarlyFeed
    checker: VerifierSpotChecker
    store: AttestationStore

    def run_once(self) -> list[EarlyVerdict]:
        """One round; the verdicts decided in it."""
        try:
            commits = self.feed.early_commits()
        except FeedError as exc:
            log.info("cannot list early commits now: %s", exc)
            return []
        decided = self.store.early_decided(c.nonce for c in commits)
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
            out.append(verdict)
        return out
