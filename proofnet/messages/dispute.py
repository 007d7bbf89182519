"""A disputed segment's messages: the oracle's signed `DisputeTask` to the provider, and the
provider's two signed answers, a `DisputeCommitment` to its replay and the `DisputeReveal`
that opens it.

A drawn segment whose replay does not reach its commitment is not judged at once: the
oracle draws a second verifier for it and asks the provider's own worker to replay the
disputed segments in a verifier's exact sandbox (`worker.verifier`: a fresh container of
the job's image, no network, the same files). The provider answers in two steps. It first
signs a commitment to what its replay computed (`commitment_of`: SHA-256 over the results
and a random salt), which the relay keeps; only then does the relay take its reveal, and an
oracle counts a reveal only when it opens a commitment the same key signed for the same
task (`DisputeReveal.opens`). So the provider's answer is fixed before any verifier's hash
could reach it, and no one can make one up for it (`oracle.verification.referee` reads
both).

Each message signs the canonical JSON of its fields under a domain tag of its own; the
task names the attestation (leaf hash), the lease (nonce), the provider, the disputed
segments and the two verifier tasks it arbitrates, so an answer to one dispute is no answer
to another job's, another segment's, or another attestation's.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Collection
from typing import Annotated, Any

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey
from pydantic import Field, ValidationError

from proofnet.messages.canonical import canonical_json
from proofnet.messages.fields import Frozen, Hex64, PosInt, TupleOf
from proofnet.messages.result_paths import ResultNameError, check_result_name
from proofnet.messages.verification import (
    MAX_FILES,
    MAX_SEGMENTS,
    ReportStatus,
    SegmentResult,
)

TASK_DOMAIN = "proofnet/dispute-task/v1"
COMMITMENT_DOMAIN = "proofnet/dispute-commitment/v1"
REVEAL_DOMAIN = "proofnet/dispute-reveal/v1"
ANSWER_DOMAIN = "proofnet/dispute-answer/v1"
_NONCE = r"[0-9a-f]{16,128}"
_SIGNATURE = r"[0-9a-f]{128}"
_SALT = r"[0-9a-f]{64}"


class DisputeError(ValueError):
    """A dispute message is malformed, or its signature or signer does not hold."""


def _verify(key_hex: str, signed: dict[str, Any], signature_hex: str, what: str) -> None:
    try:
        VerifyKey(bytes.fromhex(key_hex)).verify(
            canonical_json(signed), bytes.fromhex(signature_hex)
        )
    except (BadSignatureError, ValueError) as e:
        raise DisputeError(f"the {what}'s signature does not verify") from e


def _sign(key: SigningKey, part: dict[str, Any]) -> str:
    return key.sign(canonical_json(part)).signature.hex()


class DisputeTask(Frozen):
    """The oracle asks the provider to replay `segments` of its proof in a verifier's
    sandbox, after two verifiers (tasks `verifier_tasks`) did not reach its commitment."""

    job_id: Hex64
    nonce: Annotated[str, Field(pattern=_NONCE)]
    unit: Annotated[int, Field(ge=0, le=10_000)] | None = None
    attestation: Hex64  # the disputed attestation's leaf hash
    pot_root: Hex64
    provider: Hex64
    # The disputed segments (those the verifiers did not replay to their commitments).
    segments: Annotated[TupleOf[PosInt], Field(min_length=1, max_length=MAX_SEGMENTS)]
    # The proof files the replay reads, named as the verifiers' tasks name them.
    files: Annotated[TupleOf[str], Field(min_length=1, max_length=MAX_FILES)]
    # The digests of the first and second verifiers' tasks this dispute arbitrates.
    verifier_tasks: Annotated[TupleOf[Hex64], Field(min_length=2, max_length=2)]
    oracle_key: Hex64
    signature: Annotated[str, Field(pattern=_SIGNATURE)]

    def signed_part(self) -> dict[str, Any]:
        part = self.model_dump(mode="json", exclude={"signature"})
        part["segments"] = list(self.segments)
        part["files"] = list(self.files)
        part["verifier_tasks"] = list(self.verifier_tasks)
        return {"domain": TASK_DOMAIN, **part}

    @property
    def digest(self) -> str:
        return hashlib.sha256(canonical_json(self.signed_part())).hexdigest()

    @classmethod
    def sign(cls, signing_key: SigningKey, **fields: Any) -> DisputeTask:
        draft = cls.from_json(
            {
                **fields,
                "oracle_key": bytes(signing_key.verify_key).hex(),
                "signature": "0" * 128,
            }
        )
        return draft.model_copy(update={"signature": _sign(signing_key, draft.signed_part())})

    @classmethod
    def from_json(cls, obj: object) -> DisputeTask:
        try:
            task = cls.model_validate(obj)
        except ValidationError as e:
            raise DisputeError(f"the dispute task is malformed: {e}") from e
        if sorted(set(task.segments)) != list(task.segments):
            raise DisputeError("a dispute's segments are distinct and in order")
        if len(set(task.verifier_tasks)) != 2:
            raise DisputeError("a dispute arbitrates two distinct verifier tasks")
        for name in task.files:
            try:
                check_result_name(name)
            except ResultNameError as e:
                raise DisputeError(f"file {name[:80]!r}: {e}") from e
        return task

    def to_json(self) -> dict[str, Any]:
        return {
            **self.model_dump(mode="json"),
            "segments": list(self.segments),
            "files": list(self.files),
            "verifier_tasks": list(self.verifier_tasks),
        }

    @property
    def kind(self) -> str:
        """A dispute replays committed segments, as a verifier's "replay" task does."""
        return "replay"

    def verify(self, trusted_oracle_keys: Collection[str]) -> None:
        """Signed by one of `trusted_oracle_keys`; DisputeError otherwise."""
        if self.oracle_key not in trusted_oracle_keys:
            raise DisputeError(f"the dispute is signed by {self.oracle_key}, not an oracle")
        _verify(self.oracle_key, self.signed_part(), self.signature, "dispute task")


class DisputeAnswer(Frozen):
    """What the provider's sandbox replay computed (the body a commitment hides)."""

    status: ReportStatus
    initial_weights_hash: Hex64 | None = None
    results: Annotated[TupleOf[SegmentResult], Field(max_length=MAX_SEGMENTS)] = ()

    def body(self) -> dict[str, Any]:
        return {
            "domain": ANSWER_DOMAIN,
            "status": self.status,
            "initial_weights_hash": self.initial_weights_hash,
            "results": [r.model_dump(mode="json") for r in self.results],
        }


def commitment_of(answer: DisputeAnswer, salt: str, task: DisputeTask) -> str:
    """SHA-256 over the task, the answer and the salt (hex): what the provider commits to."""
    material = {"task": task.digest, "answer": answer.body(), "salt": salt}
    return hashlib.sha256(canonical_json(material)).hexdigest()


def new_salt() -> str:
    return secrets.token_hex(32)


class DisputeCommitment(Frozen):
    task: Hex64  # the dispute task's digest
    job_id: Hex64
    provider: Hex64
    commitment: Hex64
    signature: Annotated[str, Field(pattern=_SIGNATURE)]

    def signed_part(self) -> dict[str, Any]:
        return {"domain": COMMITMENT_DOMAIN, **self.model_dump(mode="json", exclude={"signature"})}

    @classmethod
    def sign(cls, key: SigningKey, task: DisputeTask, commitment: str) -> DisputeCommitment:
        draft = cls.from_json(
            {
                "task": task.digest,
                "job_id": task.job_id,
                "provider": bytes(key.verify_key).hex(),
                "commitment": commitment,
                "signature": "0" * 128,
            }
        )
        return draft.model_copy(update={"signature": _sign(key, draft.signed_part())})

    @classmethod
    def from_json(cls, obj: object) -> DisputeCommitment:
        try:
            return cls.model_validate(obj)
        except ValidationError as e:
            raise DisputeError(f"the dispute commitment is malformed: {e}") from e

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def verify_for(self, task: DisputeTask) -> None:
        """Answers `task` and is signed by the provider the task names."""
        if self.task != task.digest or self.job_id != task.job_id:
            raise DisputeError("the commitment answers another dispute")
        if self.provider != task.provider:
            raise DisputeError(f"the commitment is signed by {self.provider}, not the provider")
        _verify(self.provider, self.signed_part(), self.signature, "dispute commitment")


class DisputeReveal(Frozen):
    task: Hex64
    job_id: Hex64
    provider: Hex64
    answer: DisputeAnswer
    salt: Annotated[str, Field(pattern=_SALT)]
    signature: Annotated[str, Field(pattern=_SIGNATURE)]

    def signed_part(self) -> dict[str, Any]:
        part = self.model_dump(mode="json", exclude={"signature", "answer"})
        return {"domain": REVEAL_DOMAIN, **part, "answer": self.answer.body()}

    @classmethod
    def sign(
        cls, key: SigningKey, task: DisputeTask, answer: DisputeAnswer, salt: str
    ) -> DisputeReveal:
        draft = cls.from_json(
            {
                "task": task.digest,
                "job_id": task.job_id,
                "provider": bytes(key.verify_key).hex(),
                "answer": answer.model_dump(mode="json"),
                "salt": salt,
                "signature": "0" * 128,
            }
        )
        return draft.model_copy(update={"signature": _sign(key, draft.signed_part())})

    @classmethod
    def from_json(cls, obj: object) -> DisputeReveal:
        try:
            return cls.model_validate(obj)
        except ValidationError as e:
            raise DisputeError(f"the dispute reveal is malformed: {e}") from e

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def opens(self, task: DisputeTask, commitment: DisputeCommitment) -> None:
        """This reveal is the provider's, for `task`, and opens `commitment` (itself checked
        to be the provider's for `task`); DisputeError otherwise."""
        commitment.verify_for(task)
        if self.task != task.digest or self.job_id != task.job_id:
            raise DisputeError("the reveal answers another dispute")
        if self.provider != task.provider:
            raise DisputeError(f"the reveal is signed by {self.provider}, not the provider")
        _verify(self.provider, self.signed_part(), self.signature, "dispute reveal")
        if commitment_of(self.answer, self.salt, task) != commitment.commitment:
            raise DisputeError("the reveal does not open the provider's commitment")
