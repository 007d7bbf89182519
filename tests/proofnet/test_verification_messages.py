"""Verification tasks and reports (proofnet/messages/verification.py) against whoever relays
them: the API host forging a task or a report, a provider naming itself as verifier, a
report replayed onto another task, a verifier's report changed after signing."""

from __future__ import annotations

from typing import Any

import pytest
from nacl.signing import SigningKey

from proofnet.messages.verification import (
    VerificationError,
    VerificationReport,
    VerificationTask,
    draw_verifier,
)

ORACLE = SigningKey(b"\x01" * 32)
VERIFIER = SigningKey(b"\x02" * 32)
PROVIDER = SigningKey(b"\x03" * 32)
OTHER = SigningKey(b"\x04" * 32)


def _hex(key: SigningKey) -> str:
    return bytes(key.verify_key).hex()


def task_fields(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "job_id": "a" * 64,
        "nonce": "b" * 32,
        "attestation": "c" * 64,
        "pot_root": "d" * 64,
        "provider": _hex(PROVIDER),
        "verifier": _hex(VERIFIER),
        "device_class": "cpu",
        "segments": [1, 3, 5],
        "files": ["pot/ckpt-000000.weights"],
        "draw_signature": "e" * 128,
    }
    return fields | changes


def report(
    task: VerificationTask, key: SigningKey = VERIFIER, **changes: Any
) -> VerificationReport:
    fields: dict[str, Any] = {
        "status": "passed",
        "initial_weights_hash": "f" * 64,
        "results": [
            {"segment": 1, "weights_hash": "1" * 64, "update_norm": "0.5", "distance": "0"}
        ],
        "repeat": {"segment": 1, "weights_hash": "1" * 64, "update_norm": "0.5", "distance": "0"},
    }
    return VerificationReport.sign(key, task, **(fields | changes))


def test_an_honest_task_and_report_verify_and_survive_json() -> None:
    task = VerificationTask.sign(ORACLE, **task_fields())
    task.verify({_hex(ORACLE)})
    assert VerificationTask.from_json(task.to_json()) == task
    answer = report(task)
    answer.verify_for(task)
    assert VerificationReport.from_json(answer.to_json()) == answer


def test_a_task_not_signed_by_an_oracle_is_refused() -> None:
    """The API host (or anyone) signs a task with its own key, or changes a signed one."""
    forged = VerificationTask.sign(OTHER, **task_fields())
    with pytest.raises(VerificationError, match="not an oracle"):
        forged.verify({_hex(ORACLE)})
    task = VerificationTask.sign(ORACLE, **task_fields())
    moved = VerificationTask.from_json({**task.to_json(), "verifier": _hex(OTHER)})
    with pytest.raises(VerificationError, match="does not verify"):
        moved.verify({_hex(ORACLE)})


def test_a_provider_never_verifies_itself_and_a_replay_replays_something() -> None:
    with pytest.raises(VerificationError, match="own proof"):
        VerificationTask.sign(ORACLE, **task_fields(verifier=_hex(PROVIDER)))
    with pytest.raises(VerificationError, match="at least one segment"):
        VerificationTask.sign(ORACLE, **task_fields(segments=[]))
    # A resumed attempt's task starts at its own first segment (the one it repeats).
    VerificationTask.sign(ORACLE, **task_fields(segments=[3, 5]))
    with pytest.raises(VerificationError, match="in order"):
        VerificationTask.sign(ORACLE, **task_fields(segments=[1, 5, 3]))


def test_a_report_by_another_key_or_for_another_task_is_refused() -> None:
    task = VerificationTask.sign(ORACLE, **task_fields())
    with pytest.raises(VerificationError, match="not the drawn verifier"):
        report(task, OTHER).verify_for(task)
    other_task = VerificationTask.sign(ORACLE, **task_fields(segments=[1, 2]))
    with pytest.raises(VerificationError, match="another task"):
        report(other_task).verify_for(task)
    # The API host turns a failed report into a passed one.
    failed = report(task, status="failed", message="segments [3] do not replay")
    flipped = VerificationReport.from_json({**failed.to_json(), "status": "passed"})
    with pytest.raises(VerificationError, match="does not verify"):
        flipped.verify_for(task)


def test_the_verifier_draw_is_uniform_and_reproducible() -> None:
    keys = [f"{i:064x}" for i in range(5)]
    picks = {draw_verifier(keys, bytes([i]) * 32) for i in range(64)}
    assert picks == set(keys)
    assert draw_verifier(keys, b"\x07" * 32) == draw_verifier(list(reversed(keys)), b"\x07" * 32)
    with pytest.raises(VerificationError):
        draw_verifier([], b"\x00" * 32)
    # Each round draws anew (a verifier that did not answer is replaced by another round's).
    rounds = {draw_verifier(keys, b"\x07" * 32, r) for r in range(16)}
    assert len(rounds) > 1


def test_the_round_is_signed() -> None:
    task = VerificationTask.sign(ORACLE, **task_fields(round=1))
    task.verify({_hex(ORACLE)})
    moved = VerificationTask.from_json({**task.to_json(), "round": 0})
    with pytest.raises(VerificationError, match="does not verify"):
        moved.verify({_hex(ORACLE)})


def _recompute_fields(**changes: Any) -> dict[str, Any]:
    return (
        task_fields(
            kind="aggregate",
            unit=2,
            segments=[],
            files=["units/0/checkpoint/model.npz", "units/1/checkpoint/model.npz"],
            inputs=["1" * 64, "2" * 64],
        )
        | changes
    )


def test_a_recomputation_task_and_its_answer_are_signed_like_a_replay() -> None:
    """The aggregation's output hash and the evaluation's metric are in the signed part: the
    API host relaying the report cannot turn a verifier's mismatch into a match."""
    task = VerificationTask.sign(ORACLE, **_recompute_fields())
    assert VerificationTask.from_json(task.to_json()) == task
    answer = VerificationReport.sign(VERIFIER, task, status="passed", output_hash="9" * 64)
    answer.verify_for(task)
    assert VerificationReport.from_json(answer.to_json()) == answer
    swapped = answer.model_copy(update={"output_hash": "8" * 64})
    with pytest.raises(VerificationError, match="signature"):
        swapped.verify_for(task)
    evaluated = VerificationTask.sign(ORACLE, **_recompute_fields(kind="eval"))
    metric = VerificationReport.sign(VERIFIER, evaluated, status="passed", metric="0.25")
    with pytest.raises(VerificationError, match="signature"):
        metric.model_copy(update={"metric": "0.9"}).verify_for(evaluated)
    # The kind is signed too: an aggregation's answer does not answer an evaluation.
    with pytest.raises(VerificationError, match="another task"):
        answer.verify_for(evaluated)


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"unit": None}, "recomputes a unit"),
        ({"segments": [1]}, "replays no segments"),
        ({"inputs": ["1" * 64]}, "one input checkpoint per file"),
        ({"inputs": [], "files": []}, "one input checkpoint per file"),
    ],
)
def test_a_malformed_recomputation_task_is_refused(changes: dict[str, Any], why: str) -> None:
    with pytest.raises(VerificationError, match=why):
        VerificationTask.sign(ORACLE, **_recompute_fields(**changes))


def test_a_replay_task_names_no_inputs() -> None:
    with pytest.raises(VerificationError, match="no input checkpoints"):
        VerificationTask.sign(ORACLE, **task_fields(inputs=["1" * 64]))
