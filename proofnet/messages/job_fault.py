"""An oracle's signed early job-fault verdict: the first segment of a running lease could not
be replayed (the job's trainer does not load, or two replays of it disagree), so the job's
code is at fault and its lease is stopped.

An oracle that finds a job fault early (`oracle.verification.early`) signs a `JobFaultVerdict`
and posts it to the API (`POST /api/v1/oracle/job-faults`). The API never stops a lease on
one oracle's word, nor on a caller's: it keeps one verdict per oracle key of the deployment's
oracle set, each checked here against the lease it names (job id, nonce, attempt), and stops
the lease only once `threshold` distinct oracle keys signed the same stop
(`api.services.job_faults`). The worker then learns the stop from its heartbeat answer
(`proofnet.messages.claim.LeaseStop`), stops training and attests the segments it
committed (a partial proof the oracles accept only for a lease stopped so).

The verdict signs the canonical JSON of its fields under its own domain tag: it cannot pass
for a verification task or report, and names the lease it stops, so it cannot be replayed
onto another job or attempt.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from typing import Annotated, Any, Final

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey
from pydantic import Field, ValidationError

from proofnet.messages.canonical import canonical_json
from proofnet.messages.fields import Frozen, Hex64

JOB_FAULT_DOMAIN: Final = "proofnet/job-fault/v1"
# Why a lease stops, as its heartbeat answer and the job's status say it.
STOP_JOB_FAULT: Final = "job_fault"
MAX_MESSAGE = 2000
_NONCE = r"[0-9a-f]{16,128}"
_SIGNATURE = r"[0-9a-f]{128}"
_REASON = r"[a-z][a-z0-9_]{0,63}"


class JobFaultError(ValueError):
    """A verdict is malformed, or its signature or signer does not hold."""


class JobFaultVerdict(Frozen):
    job_id: Hex64
    # The lease stopped: the nonce revealed when it was claimed, and its attempt.
    nonce: Annotated[str, Field(pattern=_NONCE)]
    attempt: Annotated[int, Field(ge=1, le=1000)]
    # The rejection reason (`oracle.verification.reasons.Reason`, e.g. job_not_replayable)
    # and what the replay found, shown to the submitter.
    reason: Annotated[str, Field(pattern=_REASON)]
    message: Annotated[str, Field(max_length=MAX_MESSAGE)]
    # The committed prefix whose first segment was replayed.
    prefix_root: Hex64
    oracle_key: Hex64
    signature: Annotated[str, Field(pattern=_SIGNATURE)]

    def signed_part(self) -> dict[str, Any]:
        part = self.model_dump(mode="json", exclude={"signature"})
        return {"domain": JOB_FAULT_DOMAIN, **part}

    @property
    def digest(self) -> str:
        return hashlib.sha256(canonical_json(self.signed_part())).hexdigest()

    @classmethod
    def sign(cls, signing_key: SigningKey, **fields: Any) -> JobFaultVerdict:
        draft = cls.from_json(
            {
                **fields,
                "message": str(fields.get("message", ""))[:MAX_MESSAGE],
                "oracle_key": bytes(signing_key.verify_key).hex(),
                "signature": "0" * 128,
            }
        )
        signature = signing_key.sign(canonical_json(draft.signed_part())).signature.hex()
        return draft.model_copy(update={"signature": signature})

    @classmethod
    def from_json(cls, obj: object) -> JobFaultVerdict:
        try:
            return cls.model_validate(obj)
        except ValidationError as e:
            raise JobFaultError(f"the job-fault verdict is malformed: {e}") from e

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def verify(self, oracle_set: Collection[str]) -> None:
        """Signed by its `oracle_key`, one of `oracle_set`; JobFaultError otherwise."""
        if self.oracle_key not in oracle_set:
            raise JobFaultError(f"the verdict is signed by {self.oracle_key}, not an oracle")
        try:
            VerifyKey(bytes.fromhex(self.oracle_key)).verify(
                canonical_json(self.signed_part()), bytes.fromhex(self.signature)
            )
        except (BadSignatureError, ValueError) as e:
            raise JobFaultError("the job-fault verdict's signature does not verify") from e

    def names(self, job_id: str, nonce: str, attempt: int) -> bool:
        """Whether the verdict is about this very lease."""
        return (self.job_id, self.nonce, self.attempt) == (job_id, nonce, attempt)


def quorum_reached(verdicts: Collection[JobFaultVerdict], threshold: int) -> bool:
    """Whether `threshold` distinct oracle keys signed a stop of the same lease."""
    leases = {(v.job_id, v.nonce, v.attempt) for v in verdicts}
    return len(leases) == 1 and len({v.oracle_key for v in verdicts}) >= max(1, threshold)
