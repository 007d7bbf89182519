"""The dispute messages (proofnet/messages/dispute.py) as a forger would use them: an
oracle task signed by another key, a commitment or reveal signed by someone other than the
provider, an answer replayed onto another dispute (other segments, another job), a reveal
that does not open the commitment. Each is refused; its honest twin holds."""

from __future__ import annotations

from typing import Any

import pytest
from nacl.signing import SigningKey

from proofnet.messages.dispute import (
    DisputeAnswer,
    DisputeCommitment,
    DisputeError,
    DisputeReveal,
    DisputeTask,
    commitment_of,
    new_salt,
)

ORACLE = SigningKey(b"\x01" * 32)
PROVIDER = SigningKey(b"\x02" * 32)


def task(**changes: Any) -> DisputeTask:
    fields: dict[str, Any] = {
        "job_id": "a" * 64,
        "nonce": "b" * 64,
        "attestation": "c" * 64,
        "pot_root": "d" * 64,
        "provider": bytes(PROVIDER.verify_key).hex(),
        "segments": [3],
        "files": ["pot/manifest.json", "pot/ckpt-000002.weights"],
        "verifier_tasks": ["e" * 64, "f" * 64],
    }
    return DisputeTask.sign(ORACLE, **(fields | changes))


ANSWER = DisputeAnswer.model_validate(
    {
        "status": "passed",
        "initial_weights_hash": "1" * 64,
        "results": [
            {"segment": 3, "weights_hash": "2" * 64, "update_norm": "0.5", "distance": "0"}
        ],
    }
)


def answered(t: DisputeTask, key: SigningKey = PROVIDER) -> tuple[DisputeCommitment, DisputeReveal]:
    salt = new_salt()
    return (
        DisputeCommitment.sign(key, t, commitment_of(ANSWER, salt, t)),
        DisputeReveal.sign(key, t, ANSWER, salt),
    )


def test_the_providers_answer_opens_its_commitment() -> None:
    t = task()
    t.verify({bytes(ORACLE.verify_key).hex()})
    commitment, reveal = answered(t)
    reveal.opens(t, commitment)
    # Round trips through the relay's JSON.
    DisputeReveal.from_json(reveal.to_json()).opens(
        DisputeTask.from_json(t.to_json()), DisputeCommitment.from_json(commitment.to_json())
    )


def test_a_task_signed_by_anyone_but_an_oracle_is_refused() -> None:
    t = task()
    forged = t.model_copy(update={"segments": (4,)})  # the signature no longer holds
    with pytest.raises(DisputeError, match="signature"):
        forged.verify({bytes(ORACLE.verify_key).hex()})
    with pytest.raises(DisputeError, match="not an oracle"):
        t.verify({"00" * 32})


def test_an_answer_signed_by_another_key_is_refused() -> None:
    t = task()
    commitment, reveal = answered(t, SigningKey.generate())
    with pytest.raises(DisputeError, match="not the provider"):
        reveal.opens(t, commitment)
    # The provider's commitment with someone else's reveal of the same answer.
    own, _ = answered(t)
    _, other = answered(t, SigningKey.generate())
    with pytest.raises(DisputeError, match="not the provider"):
        other.opens(t, own)


def test_an_answer_to_another_dispute_is_refused() -> None:
    t = task()
    for other in (task(segments=[4]), task(job_id="9" * 64), task(attestation="8" * 64)):
        commitment, reveal = answered(other)
        with pytest.raises(DisputeError, match="another dispute"):
            reveal.opens(t, commitment)


def test_a_reveal_that_does_not_open_the_commitment_is_refused() -> None:
    t = task()
    commitment, _ = answered(t)
    _, reveal = answered(t)  # another salt
    with pytest.raises(DisputeError, match="does not open"):
        reveal.opens(t, commitment)
    # A tampered signature field.
    commitment, reveal = answered(t)
    bad = reveal.model_copy(update={"signature": "0" * 128})
    with pytest.raises(DisputeError, match="signature"):
        bad.opens(t, commitment)


def test_a_malformed_task_is_refused() -> None:
    with pytest.raises(DisputeError, match="distinct and in order"):
        task(segments=[4, 3])
    with pytest.raises(DisputeError, match="two distinct verifier tasks"):
        task(verifier_tasks=["e" * 64, "e" * 64])
    with pytest.raises(DisputeError, match="malformed"):
        task(segments=[])
    with pytest.raises(DisputeError):
        task(files=["../etc/passwd"])
