"""The claims of a resumed job's lost attempts, taken from the API for their workers.

A provider that was lost may never come back to send its attestation: it signed one for
each checkpoint it uploaded (`worker.checkpoint_upload`), and the API holds them among its
lease's proof uploads. Once an attempt of the job that names its segments is verified
(the attempt that completed, or another lost one), the intake reads the job's attempts
from the feed and submits, for each lost attempt that proved segments, the claim it signed
at the checkpoint the next attempt resumed from (`attempts/<n>/pot/claim-<k>.cose`,
checked against the hash the API recorded for it). The claim is the worker's own signed
attestation: the intake stores and verifies it as if the worker had sent it
(`oracle.verification.lost_attempts`); nobody else can make it claim more. Reads only.
"""

from __future__ import annotations

import logging

from oracle.inputs.feed import ApiFeed, ArtifactMissing
from oracle.verification.lost_attempts import LOST_OUTCOMES, claim_name
from proofnet.messages.result_paths import attempt_result_name

log = logging.getLogger("oracle.intake")


def lost_claims(feed: ApiFeed, job_id: str) -> list[bytes]:
    """The signed claims (COSE) of the job's lost attempts that proved segments, those the
    API holds; FeedError propagates (the next verified attempt asks again)."""
    job = feed.job(job_id)
    if job is None:
        return []
    found = []
    for attempt in job.attempts:
        last = attempt.last_segment
        if attempt.outcome not in LOST_OUTCOMES or last is None or last < attempt.first_segment:
            continue
        name = attempt_result_name(attempt.attempt, claim_name(last))
        try:
            found.append(feed.artifact(job_id, name))
        except ArtifactMissing:
            log.info(
                "attempt %s of job %s left no claim for checkpoint %s: it is not paid",
                attempt.attempt,
                job_id,
                last,
                extra={"job_id": job_id},
            )
    return found
