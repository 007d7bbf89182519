"""A lost attempt's claim spot-checked by a drawn verifier (the path every network but the
devnet takes): the oracle reads the prefix the lost attempt committed, checks its data
order, draws segments from the claimed ones only and posts a "claim" task that replays them
(and the first twice) from that prefix; the verifier's signed report is judged against the
oracle's own copy. The relay is the fake verifier desk of test_early_replay."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from nacl.signing import SigningKey
from oracle_fixtures import make_world
from test_early_replay import PROVIDER, Desk, _job, _spec
from test_verify_resumed import lost_prefix

from oracle.verification.spotcheck import SpotCheckUnavailable
from oracle.verification.verifiers import VerifierSpotChecker
from oracle.verification.verify import Reason
from pot.manifest import PREFIX_NAME, Manifest
from proofnet.messages.key_grant import KeyRequest
from proofnet.messages.verification import PREFIX_FILE, VerificationTask


@pytest.fixture(scope="module")
def lost(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str, bytes]:
    """Attempt 1 was lost after committing segments 1..2 of 6."""
    spec = _spec()
    nonce = secrets.token_hex(16)
    pot = lost_prefix(tmp_path_factory.mktemp("lost"), spec, bytes.fromhex(nonce))
    return spec, nonce, (pot / PREFIX_NAME).read_bytes()


def _replayed(task: VerificationTask, prefix: Manifest, **changes: Any) -> dict[str, Any]:
    results = [
        {
            "segment": s,
            "weights_hash": prefix.leaves[s].weights,
            "update_norm": prefix.leaves[s].update_norm,
            "distance": "0",
        }
        for s in task.segments
    ]
    fields: dict[str, Any] = {
        "status": "passed",
        "initial_weights_hash": prefix.leaves[0].weights,
        "results": results,
        "repeat": results[0],
    }
    return fields | changes


def _verdict(lost: tuple[Any, str, bytes], answer: Any) -> tuple[Any, Desk]:
    spec, nonce, raw = lost
    prefix = Manifest.from_bytes(raw)
    world = make_world(spec=spec)
    claim = world.variant(
        worker_key=bytes(PROVIDER.verify_key).hex(),
        nonce=nonce,
        pot_root=prefix.root,
        segments={"attempt": 1, "first": 1, "last": 2},
        amount=1,
    )
    job = _job(spec, nonce)
    desk = Desk(raw, answer)
    checker = VerifierSpotChecker(desk, SigningKey.generate())  # type: ignore[arg-type]
    (attempt,) = job.attempts
    return checker.check_attempt(claim, job, attempt), desk


def test_a_drawn_verifier_replays_the_lost_attempts_segments_from_its_prefix(
    lost: tuple[Any, str, bytes],
) -> None:
    verdict, desk = _verdict(lost, _replayed)
    assert verdict.passed, verdict
    (task,) = desk.tasks
    assert task.kind == "claim" and task.unit is None
    assert task.files[0] == PREFIX_FILE
    assert task.pot_root == Manifest.from_bytes(lost[2]).root
    assert task.segments and all(1 <= s <= 2 for s in task.segments)
    assert 1 in task.segments  # the first claimed segment, also replayed twice


def test_a_lost_attempts_segment_that_does_not_replay_is_refused(
    lost: tuple[Any, str, bytes],
) -> None:
    def wrong(task: VerificationTask, prefix: Manifest) -> dict[str, Any]:
        fields = _replayed(task, prefix)
        fields["results"] = [r | {"weights_hash": "00" * 32} for r in fields["results"]]
        fields["repeat"] = fields["results"][0]  # deterministic, and not the commitment
        return fields

    verdict, _ = _verdict(lost, wrong)
    assert not verdict.passed and verdict.reason == Reason.SPOT_CHECK_FAILED, verdict


# --- a sealed job's lost attempt: its files' keys come from the lost provider's worker ---


@dataclass
class SealedDesk(Desk):
    """The fake desk, for a sealed job: it keeps the key requests the oracle posts."""

    key_requests: list[KeyRequest] = field(default_factory=list)

    def request_keys(self, request: KeyRequest) -> int:
        self.key_requests.append(request)
        return len(self.key_requests)


def _sealed_verdict(lost: tuple[Any, str, bytes], answer: Any) -> tuple[Any, SealedDesk]:
    spec, nonce, raw = lost
    prefix = Manifest.from_bytes(raw)
    world = make_world(spec=spec)
    claim = world.variant(
        worker_key=bytes(PROVIDER.verify_key).hex(),
        nonce=nonce,
        pot_root=prefix.root,
        segments={"attempt": 1, "first": 1, "last": 2},
        amount=1,
    )
    job = replace(_job(spec, nonce), sealed=True)
    desk = SealedDesk(raw, answer)
    checker = VerifierSpotChecker(desk, SigningKey.generate())  # type: ignore[arg-type]
    (attempt,) = job.attempts
    return checker.check_attempt(claim, job, attempt), desk


def test_a_sealed_lost_attempts_keys_are_asked_of_its_own_provider(
    lost: tuple[Any, str, bytes],
) -> None:
    """The claim task's checkpoints are sealed: the oracle asks the lost attempt's provider
    (named, since a resumed job's attempts share the nonce) to grant them to the drawn
    verifier; the prefix is not sealed and not asked for. Its honest replay is paid."""
    verdict, desk = _sealed_verdict(lost, _replayed)
    assert verdict.passed, verdict
    (task,) = desk.tasks
    (request,) = desk.key_requests
    assert request.provider == bytes(PROVIDER.verify_key).hex() == task.provider
    assert (request.nonce, request.recipient) == (task.nonce, task.verifier)
    assert list(request.files) == list(task.files[1:])
    assert PREFIX_FILE not in request.files
    assert request.digest != request.model_copy(update={"provider": None}).digest


def test_a_sealed_lost_attempt_whose_grant_opens_nothing_withheld_its_proof(
    lost: tuple[Any, str, bytes],
) -> None:
    verdict, _ = _sealed_verdict(
        lost, lambda task, prefix: {"status": "withheld", "message": "wrong key"}
    )
    assert not verdict.passed and verdict.reason == Reason.POT_WITHHELD, verdict


def test_a_silent_lost_provider_leaves_its_claim_waiting_never_refused(
    lost: tuple[Any, str, bytes],
) -> None:
    """No grant: the verifier cannot replay and does not answer; the claim waits (unpaid
    once the escrow's grace period is over), and nobody is blamed."""
    with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
        _sealed_verdict(lost, lambda task, prefix: None)
