"""A single-unit job resumed on a second provider after the first was lost, through the
oracle's pipeline, played as the resuming provider would cheat.

Real (numpy) training: attempt 1 commits segments 1..2 and uploads its prefix; attempt 2
resumes at checkpoint 2 with the pot harness and proves 3..6. The oracle reads attempt 1's
prefix from the API (by the hash the API recorded for that lease) and applies
`pot.manifest.check_resumed` to attempt 2's proof; the spot check draws only from attempt
2's own segments. The cheat: a resume from a checkpoint the lost attempt never committed
(a prefix the resuming provider trained itself) is refused with `pot_resume_mismatch`,
whether or not a spot checker is configured; the honest resume, its twin, is verified.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from nacl.signing import SigningKey
from oracle_fixtures import NETWORK, World, job_spec, make_world, signed_binding, trainer_repo

from oracle.inputs.feed import AttemptInfo, WorkerInfo
from oracle.verification.spotcheck import LocalSpotChecker, RepoCache
from oracle.verification.verify import Reason, verify
from pot import harness
from pot.examples.numpy_mlp import MLPTrainer
from pot.harness import run_segment
from pot.manifest import MANIFEST_NAME, PREFIX_NAME, Manifest
from pot.recorder import ProofOfTraining
from pot.seeds import derive_data_seed
from pot.trainer import TrainContext
from proofnet.messages.address import enterprise_address
from proofnet.messages.attestation import Attestation
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.result_paths import attempt_result_name
from proofnet.messages.segment_share import segment_cap

SPEC_URL = "https://example.org/numpy-mlp.git"
ORACLE_KEY = SigningKey(b"\x05" * 32)
# Attempt 1's worker: the provider that was lost.
LOST_KEY = SigningKey(b"\x07" * 32)
LOST_PAYOUT = enterprise_address(bytes(SigningKey(b"\x08" * 32).verify_key), NETWORK)
CONFIG = {"hidden": 16}
# 6 segments of 5 steps; attempt 1 is lost after 2.
PROOF = {
    "trainer": "mlp:MLPTrainer",
    "config": CONFIG,
    "schedule": {"steps": 30, "dataset_size": 256, "batch_size": 32},
    "steps_per_checkpoint": 5,
    "spot_checks": 2,
    "tolerance_ppm": 0,
}
LOST_AT = 2


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    files = {"mlp.py": "from pot.examples.numpy_mlp import MLPTrainer  # noqa: F401\n"}
    return trainer_repo(tmp_path_factory.mktemp("train-repo"), files, "the job's trainer")


def context(job_dir: Path, spec: JobSpec, nonce: bytes, **config: Any) -> TrainContext:
    schedule = spec.schedule
    assert schedule is not None
    return TrainContext(
        job_dir=job_dir,
        job_seed=spec.seed,
        data_seed=derive_data_seed(spec.seed, nonce),
        schedule=schedule,
        config={**CONFIG, **config},
    )


def lost_prefix(job_dir: Path, spec: JobSpec, nonce: bytes, **config: Any) -> Path:
    """What a recorder leaves after `LOST_AT` segments: the prefix and its checkpoints."""
    ctx = context(job_dir, spec, nonce, **config)
    trainer = MLPTrainer(ctx)
    pot = job_dir / "pot"
    recorder = ProofOfTraining(pot, steps_per_checkpoint=5, data_seed=ctx.data_seed)
    sampler = ctx.schedule.sampler(ctx.data_seed)
    recorder.start(trainer.state())
    for segment in range(1, LOST_AT + 1):
        run_segment(
            trainer,
            sampler,
            ctx.schedule.segment_steps(segment),
            lambda _s, idx, loss: recorder.record_step(idx, loss),
        )
        recorder.commit(trainer.state())
    recorder.leaves  # noqa: B018 - waits until the files are written
    return pot


def files_of(pot: Path) -> dict[str, bytes]:
    return {f"pot/{p.name}": p.read_bytes() for p in sorted(pot.iterdir()) if p.is_file()}


def resumed_world(
    repo: tuple[str, str], tmp_path: Path, *, forged: bool = False
) -> tuple[World, LocalSpotChecker, dict[str, bytes]]:
    """Attempt 1's uploads and attempt 2's resumed proof, as the API would report them.
    `forged`: attempt 2 resumes from a prefix it trained itself (another learning rate),
    not the one attempt 1 committed."""
    url, commit = repo
    data = job_spec().model_dump(mode="python")
    data["model"] = {"repo_url": SPEC_URL, "commit": commit}
    data["proof"] = PROOF
    data["commands"] = []
    spec = JobSpec.from_dict(data)
    draft = make_world(spec=spec)
    nonce = bytes.fromhex(draft.nonce)
    lost = lost_prefix(tmp_path / "first", spec, nonce)
    start = lost_prefix(tmp_path / "forged", spec, nonce, lr="0.2") if forged else lost
    ctx = context(tmp_path / "second", spec, nonce)
    harness.resume(MLPTrainer(ctx), ctx, tmp_path / "second" / "pot", start, at=LOST_AT)
    first_files, second_files = files_of(lost), files_of(tmp_path / "second" / "pot")
    root = Manifest.from_bytes(second_files["pot/" + MANIFEST_NAME]).root
    digest = {n: hashlib.sha256(b).hexdigest() for n, b in second_files.items()}
    world = make_world(spec=spec, pot_root=root, results={"metrics.json": "e" * 64} | digest)
    world.nonce = draft.nonce
    # Paid for segments 3..6 of 6: two thirds of the price, never attempt 1's share.
    share = segment_cap(spec, world.attestation.amount, LOST_AT + 1)
    world.attestation = world.variant(
        nonce=draft.nonce,
        amount=share,
        segments={"attempt": 2, "first": LOST_AT + 1, "last": 6},
    )
    world.set_lease(nonce=draft.nonce, attempt=2)
    lease = world.feed.jobs[world.job_id].lease
    assert lease is not None
    first = AttemptInfo(
        attempt=1,
        worker_key=LOST_KEY.verify_key.encode().hex(),
        payout_address=LOST_PAYOUT,
        nonce=draft.nonce,
        outcome="released",
        started_ms=lease.started_ms - 60_000,
        ended_ms=lease.started_ms - 1_000,
        resumed_from=None,
        resumed_at=None,
        first_segment=1,
        last_segment=LOST_AT,
        results=MappingProxyType(
            {n: hashlib.sha256(b).hexdigest() for n, b in first_files.items()}
        ),
    )
    second = AttemptInfo(
        attempt=2,
        worker_key=lease.worker_key,
        payout_address=lease.payout_address,
        nonce=draft.nonce,
        outcome="completed",
        started_ms=lease.started_ms,
        ended_ms=lease.completed_ms,
        resumed_from=1,
        resumed_at=LOST_AT,
        first_segment=LOST_AT + 1,
        last_segment=None,
        results=MappingProxyType(digest),
    )
    world.set_job(attempts=(first, second))
    world.feed.workers[first.worker_key] = WorkerInfo(
        worker_key=first.worker_key,
        payout_address=LOST_PAYOUT,
        binding=signed_binding(LOST_KEY, LOST_PAYOUT),
        network=NETWORK,
    )
    for name, blob in second_files.items():
        world.feed.artifacts[(spec.job_id, name)] = blob
    for name, blob in first_files.items():
        world.feed.artifacts[(spec.job_id, attempt_result_name(1, name))] = blob
    checker = LocalSpotChecker(
        world.feed,
        RepoCache(tmp_path / "repos", url_map={SPEC_URL: url}),
        sign=lambda message: ORACLE_KEY.sign(message).signature,
        timeout_s=120,
    )
    return world, checker, first_files


def test_an_honest_resume_is_verified_and_spot_checked_on_its_own_segments(
    repo: tuple[str, str], tmp_path: Path
) -> None:
    world, checker, _ = resumed_world(repo, tmp_path)
    result = verify(world.sign(), world.context(spot_checker=checker))
    assert result.ok, result
    assert "resumed_from_committed_prefix" in result.checks
    assert "proof_of_training" in result.checks
    spot = result.spot_check
    assert spot is not None and spot.segments
    # Segments 1..2 are attempt 1's: this attempt's files do not replay them.
    assert all(LOST_AT < s <= 6 for s in spot.segments), spot.segments


def test_a_resumed_attempt_is_never_paid_for_the_segments_the_lost_one_proved(
    repo: tuple[str, str], tmp_path: Path
) -> None:
    world, _, _ = resumed_world(repo, tmp_path)
    share = world.attestation.amount
    price = world.spec.pricing.amount  # type: ignore[union-attr]
    assert share == price * 4 // 6 < price
    assert verify(world.sign(), world.context()).ok
    for greedy in (share + 1, price):
        result = verify(world.sign(world.variant(amount=greedy)), world.context())
        assert result.reason == Reason.AMOUNT_EXCEEDS_PRICE, result
        assert f"exceeds {share}, this attempt's share" in result.message


def test_a_resume_from_a_checkpoint_the_lost_attempt_never_committed_is_refused(
    repo: tuple[str, str], tmp_path: Path
) -> None:
    world, checker, _ = resumed_world(repo, tmp_path, forged=True)
    for ctx in (world.context(spot_checker=checker), world.context()):
        result = verify(world.sign(), ctx)
        assert result.outcome == "rejected", result
        assert result.reason == Reason.POT_RESUME_MISMATCH, result
        assert "is not the committed prefix's" in result.message
        assert result.fault == "provider"
        assert "resumed_from_committed_prefix" not in result.checks


def test_a_resume_the_api_reports_at_another_checkpoint_is_refused(
    repo: tuple[str, str], tmp_path: Path
) -> None:
    """The proof resumed at checkpoint 2; an API (or provider) claiming it started at 1
    would hand segment 2 to the wrong attempt: the proof's leaves 0..1 match, but its own
    copy of checkpoint 2 is the committed one, so only a claim beyond what the prefix
    holds fails. A resume at a checkpoint past the prefix is refused."""
    world, _, _ = resumed_world(repo, tmp_path)
    job = world.feed.jobs[world.job_id]
    first, second = job.attempts
    world.set_job(attempts=(replace(first, last_segment=4), replace(second, resumed_at=4)))
    named = {"attempt": 2, "first": 5, "last": 6}
    result = verify(world.sign(world.variant(amount=1, segments=named)), world.context())
    assert result.reason == Reason.POT_RESUME_MISMATCH, result
    assert "checkpoint 4 is not in the prefix" in result.message


def test_a_lost_prefix_is_not_taken_on_the_resuming_provider_word(
    repo: tuple[str, str], tmp_path: Path
) -> None:
    world, _, first_files = resumed_world(repo, tmp_path)
    del world.feed.artifacts[(world.job_id, attempt_result_name(1, "pot/" + PREFIX_NAME))]
    result = verify(world.sign(), world.context())
    assert result.reason == Reason.POT_RESUME_MISMATCH, result
    assert "no committed prefix on record" in result.message
    # A prefix that is not the recorded upload is refused by the feed's hash check
    # (oracle.intake.feed_client); one that does not parse is refused here.
    world.feed.artifacts[(world.job_id, attempt_result_name(1, "pot/" + PREFIX_NAME))] = b"{"
    result = verify(world.sign(), world.context())
    assert result.reason == Reason.POT_RESUME_MISMATCH and "does not parse" in result.message
    assert first_files  # the rest of attempt 1's uploads stay on record


# --- the lost attempt's own claim (oracle.verification.lost_attempts) ----------------------


def lost_claim(world: World, first_files: dict[str, bytes], **changes: Any) -> Attestation:
    """What attempt 1's worker signed when it uploaded checkpoint `LOST_AT`: its segments
    1..2, the root of its prefix to there, its share of the price."""
    prefix = Manifest.from_bytes(first_files["pot/" + PREFIX_NAME])
    last = changes.pop("trim", LOST_AT)
    root = Manifest(
        steps_per_checkpoint=prefix.steps_per_checkpoint,
        data_seed=prefix.data_seed,
        leaves=prefix.leaves[: last + 1],
    ).root
    first = world.feed.jobs[world.job_id].attempts[0]
    price = world.spec.pricing.amount  # type: ignore[union-attr]
    data = world.attestation.model_dump(mode="python")
    data.update(
        worker_key=LOST_KEY.verify_key.encode().hex(),
        payout_address=LOST_PAYOUT,
        started_ms=first.started_ms,
        ended_ms=first.ended_ms,
        gpu_milliseconds=0,
        result_hashes={},
        metrics={},
        pot_root=root,
        amount=segment_cap(world.spec, price, 1, LOST_AT),
        segments={"attempt": 1, "first": 1, "last": LOST_AT},
    )
    data.update(changes)
    return Attestation.model_validate(data)


def test_the_lost_attempt_is_paid_its_own_segments_spot_checked_from_its_uploads(
    repo: tuple[str, str], tmp_path: Path
) -> None:
    world, checker, first_files = resumed_world(repo, tmp_path)
    claim = lost_claim(world, first_files)
    price = world.spec.pricing.amount  # type: ignore[union-attr]
    # Its share and the resumed attempt's never sum past the price.
    assert claim.amount + world.attestation.amount <= price
    result = verify(world.sign(claim, LOST_KEY), world.context(spot_checker=checker))
    assert result.ok, result
    assert {"attempt_lost", "segments_proved", "attempt_prefix", "proof_of_training"} <= set(
        result.checks
    )
    spot = result.spot_check
    assert spot is not None and spot.segments
    assert all(1 <= s <= LOST_AT for s in spot.segments), spot.segments
    # The completing attempt's attestation is verified beside it (another payable key).
    assert verify(world.sign(), world.context()).ok


@pytest.mark.parametrize(
    ("changes", "reason", "words"),
    [
        # More segments than it proved: the next attempt resumed at checkpoint 2.
        (
            {"segments": {"attempt": 1, "first": 1, "last": 4}, "trim": 4},
            Reason.SEGMENTS_MISMATCH,
            "proved 1..2",
        ),
        # The segments the resumed attempt proved.
        (
            {"segments": {"attempt": 1, "first": 3, "last": 6}},
            Reason.SEGMENTS_MISMATCH,
            "claims segments 3..6",
        ),
        # More than its share of the price for segments 1..2 of 6.
        ({"amount": 1_000_000 * 2 // 6 + 1}, Reason.AMOUNT_EXCEEDS_PRICE, "attempt 1's share"),
        # A root other than its committed prefix's up to checkpoint 2.
        ({"trim": 1}, Reason.POT_ROOT_MISMATCH, "not the attested"),
        # Another nonce than the attempt's.
        ({"nonce": "ab" * 16}, Reason.NONCE_MISMATCH, "nonce"),
        # An attempt the API does not list.
        (
            {"segments": {"attempt": 9, "first": 1, "last": 2}},
            Reason.ATTEMPT_NOT_LOST,
            "lists no attempt 9",
        ),
    ],
)
def test_a_lost_attempt_claiming_what_it_did_not_prove_is_refused(
    repo: tuple[str, str], tmp_path: Path, changes: dict[str, Any], reason: Reason, words: str
) -> None:
    world, _, first_files = resumed_world(repo, tmp_path)
    result = verify(
        world.sign(lost_claim(world, first_files, **changes), LOST_KEY), world.context()
    )
    assert result.reason == reason, result
    assert words in result.message
    assert result.fault == "provider"


def test_a_lost_attempt_claiming_more_than_it_uploaded_is_refused(
    repo: tuple[str, str], tmp_path: Path
) -> None:
    """The API records it proved up to checkpoint 4 (an API that is wrong, or a prefix that
    lost its tail): its uploaded prefix commits only 2 segments, so it is paid for none."""
    world, _, first_files = resumed_world(repo, tmp_path)
    first, second = world.feed.jobs[world.job_id].attempts
    world.set_job(attempts=(replace(first, last_segment=4), replace(second, resumed_at=4)))
    claim = lost_claim(world, first_files, segments={"attempt": 1, "first": 1, "last": 4})
    result = verify(world.sign(claim, LOST_KEY), world.context())
    assert result.reason == Reason.SEGMENTS_MISMATCH, result
    assert "commits 2 segment(s), not the 4" in result.message


def test_the_resumed_provider_cannot_claim_the_lost_attempts_segments(
    repo: tuple[str, str], tmp_path: Path
) -> None:
    world, _, first_files = resumed_world(repo, tmp_path)
    # Attempt 1's claim signed by the resuming provider (to its own address).
    stolen = lost_claim(
        world,
        first_files,
        worker_key=world.attestation.worker_key,
        payout_address=world.attestation.payout_address,
    )
    result = verify(world.sign(stolen), world.context())
    assert result.reason == Reason.LEASE_OTHER_WORKER, result
    # Its own attestation stretched over segments 1..6 (the amount of its own share, which
    # is all the price check lets through: naming 1..6 is refused in itself).
    greedy = world.variant(segments={"attempt": 2, "first": 1, "last": 6})
    result = verify(world.sign(greedy), world.context())
    assert result.reason == Reason.SEGMENTS_MISMATCH, result
    assert "proved 3..6" in result.message
    # Naming no segments at all (so it would be paid alone, before the lost claim).
    bare = world.variant(segments=None)
    result = verify(world.sign(bare), world.context())
    assert result.reason == Reason.SEGMENTS_MISMATCH, result
    assert "must name its attempt and segments" in result.message


def test_a_claim_posted_before_its_range_is_fixed_waits_and_is_never_refused(
    repo: tuple[str, str], tmp_path: Path
) -> None:
    world, _, first_files = resumed_world(repo, tmp_path)
    first, second = world.feed.jobs[world.job_id].attempts
    claim = world.sign(lost_claim(world, first_files), LOST_KEY)
    # Posted (by anyone who holds it) while the attempt still runs, or before the job
    # resumed from it: retried, so the provider's pay is not lost to an early post.
    world.set_job(attempts=(replace(first, outcome=None), second))
    assert verify(claim, world.context()).outcome == "retry"
    world.set_job(
        status="leased", attempts=(replace(first, last_segment=None), replace(second, outcome=None))
    )
    assert verify(claim, world.context()).outcome == "retry"
    # Its attempt completed the job (not lost): refused.
    world.set_job(status="completed", attempts=(replace(first, outcome="completed"), second))
    result = verify(claim, world.context())
    assert result.reason == Reason.ATTEMPT_NOT_LOST, result
