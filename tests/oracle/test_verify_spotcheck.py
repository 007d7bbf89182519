"""Proof-of-training checks in the oracle's pipeline, played as a dishonest provider would.

A real (numpy) training run is proven by the harness; the oracle checks its manifest against
the spec's schedule without job code, draws segments with its own signature over the
attestation and replays them with the network's harness over the job's trainer, fetched
from a git repository at the pinned commit. Each cheat is rejected with its own reason; the
honest run, its twin, is verified.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey
from oracle_fixtures import World, job_spec, make_world, trainer_repo

from oracle.verification.spotcheck import LocalSpotChecker, RepoCache
from oracle.verification.verify import Reason, verify
from pot import Manifest, ProofOfTraining, harness
from pot.examples.numpy_mlp import MLPTrainer
from pot.schedule import Schedule
from pot.seeds import BatchSampler, derive_data_seed, draw_message, draw_seed
from pot.trainer import TrainContext
from proofnet.messages.jobspec import JobSpec

SPEC_URL = "https://example.org/numpy-mlp.git"
ORACLE_KEY = SigningKey(b"\x03" * 32)
CONFIG = {"hidden": 16}
# 6 segments of 5 steps.
PROOF = {
    "trainer": "mlp:MLPTrainer",
    "config": CONFIG,
    "schedule": {"steps": 30, "dataset_size": 256, "batch_size": 32},
    "steps_per_checkpoint": 5,
    "spot_checks": 2,
    "tolerance_ppm": 0,
}

Prover = Callable[[Path, JobSpec, bytes], None]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    files = {"mlp.py": "from pot.examples.numpy_mlp import MLPTrainer  # noqa: F401\n"}
    return trainer_repo(tmp_path_factory.mktemp("train-repo"), files, "the job's trainer")


def context(job_dir: Path, spec: JobSpec, nonce: bytes, **changes: Any) -> TrainContext:
    schedule = spec.schedule
    assert schedule is not None
    ctx = TrainContext(
        job_dir=job_dir,
        job_seed=spec.seed,
        data_seed=derive_data_seed(spec.seed, nonce),
        schedule=schedule,
        config=CONFIG,
    )
    return replace(ctx, **changes)


# --- provers: the honest one, and the cheats -----------------------------------------------


def honest(job_dir: Path, spec: JobSpec, nonce: bytes) -> None:
    ctx = context(job_dir, spec, nonce)
    harness.train(MLPTrainer(ctx), ctx, job_dir / "pot")


def other_learning_rate(job_dir: Path, spec: JobSpec, nonce: bytes) -> None:
    """Self-consistent commitments from a run that is not the job's."""
    ctx = context(job_dir, spec, nonce, config={**CONFIG, "lr": "0.2"})
    harness.train(MLPTrainer(ctx), ctx, job_dir / "pot")


def schedule_of(steps: int) -> Prover:
    """Honest training of `steps` steps (fewer or more than the spec's 30)."""

    def prove(job_dir: Path, spec: JobSpec, nonce: bytes) -> None:
        base = context(job_dir, spec, nonce)
        ctx = replace(base, schedule=replace(base.schedule, total_steps=steps))
        harness.train(MLPTrainer(ctx), ctx, job_dir / "pot")

    return prove


def zero_steps(job_dir: Path, spec: JobSpec, nonce: bytes) -> None:
    ctx = context(job_dir, spec, nonce)
    recorder = ProofOfTraining(job_dir / "pot", steps_per_checkpoint=5, data_seed=ctx.data_seed)
    trainer = MLPTrainer(ctx)
    recorder.start(trainer.state())
    recorder.finish(trainer.state())


def steps_out_of_order(job_dir: Path, spec: JobSpec, nonce: bytes) -> None:
    honest(job_dir, spec, nonce)
    manifest = Manifest.load(job_dir / "pot")
    leaves = list(manifest.leaves)
    leaves[2], leaves[3] = leaves[3], leaves[2]
    (job_dir / "pot" / "manifest.json").unlink()
    replace(manifest, leaves=tuple(leaves)).save(job_dir / "pot")


def own_data_order(job_dir: Path, spec: JobSpec, nonce: bytes) -> None:
    """Trains every step, on batches of its own choosing, and claims the right seed."""
    ctx = context(job_dir, spec, nonce)
    own = BatchSampler(ctx.data_seed ^ 1, 256, 32)
    trainer = MLPTrainer(ctx)
    recorder = ProofOfTraining(job_dir / "pot", steps_per_checkpoint=5, data_seed=ctx.data_seed)
    recorder.start(trainer.state())
    for step in range(1, 31):
        indices = own.indices(step)
        if recorder.record_step(indices, trainer.train_step(step, indices)):
            recorder.commit(trainer.state())
    recorder.finish(trainer.state())


def small_norm_fakes(job_dir: Path, spec: JobSpec, nonce: bytes) -> None:
    """Trains segments 1 and 2 (the largest updates) and fakes 3-6: no training, weights
    nudged so their committed update norms are tiny and the norm picks never go there."""
    ctx = context(job_dir, spec, nonce)
    sampler = ctx.schedule.sampler(ctx.data_seed)
    trainer = MLPTrainer(ctx)
    recorder = ProofOfTraining(job_dir / "pot", steps_per_checkpoint=5, data_seed=ctx.data_seed)
    recorder.start(trainer.state())
    loss = 1.0
    for step in range(1, 31):
        indices = sampler.indices(step)
        if step <= 10:
            loss = trainer.train_step(step, indices)
        elif step % 5 == 0:
            trainer.params["b2"] += 1e-9
        if recorder.record_step(indices, loss):
            recorder.commit(trainer.state())
    recorder.finish(trainer.state())


def pretrained_start(job_dir: Path, spec: JobSpec, nonce: bytes) -> None:
    """Honest training, from a model built (trained) elsewhere rather than the job's own
    initialisation."""
    ctx = context(job_dir, spec, nonce)
    trainer = MLPTrainer(ctx)
    trainer.restore(MLPTrainer(replace(ctx, job_seed=spec.seed + 1)).state())
    harness.train(trainer, ctx, job_dir / "pot")


# --- the world -----------------------------------------------------------------------------


def world_for(
    repo: tuple[str, str],
    tmp_path: Path,
    prove: Prover = honest,
    *,
    proof: dict[str, Any] | None = None,
) -> tuple[World, LocalSpotChecker]:
    url, commit = repo
    data = job_spec().model_dump(mode="python")
    data["model"] = {"repo_url": SPEC_URL, "commit": commit}
    data["proof"] = proof if proof is not None else PROOF
    if "trainer" in data["proof"]:
        data["commands"] = []  # the harness is the whole run
    spec = JobSpec.from_dict(data)
    draft = make_world(spec=spec)
    job_dir = tmp_path / "job"
    job_dir.mkdir(parents=True)
    # A spec without a schedule is proven as if it had the usual one.
    proven = spec if spec.schedule else JobSpec.from_dict({**data, "proof": PROOF})
    prove(job_dir, proven, bytes.fromhex(draft.nonce))
    files = {f"pot/{p.name}": p.read_bytes() for p in sorted((job_dir / "pot").iterdir())}
    root = Manifest.from_bytes(files["pot/manifest.json"]).root
    results = {"metrics.json": "e" * 64} | {
        n: hashlib.sha256(b).hexdigest() for n, b in files.items()
    }
    world = make_world(spec=spec, pot_root=root, results=results)
    world.nonce = draft.nonce
    # The nonce is part of the attestation and the lease: rebuild both around the draft's.
    world.attestation = world.variant(nonce=draft.nonce)
    world.set_lease(nonce=draft.nonce)
    for name, blob in files.items():
        world.feed.artifacts[(spec.job_id, name)] = blob
    checker = LocalSpotChecker(
        world.feed,
        RepoCache(tmp_path / "repos", url_map={SPEC_URL: url}),
        sign=lambda message: ORACLE_KEY.sign(message).signature,
        timeout_s=120,
    )
    return world, checker


def check(world: World, checker: LocalSpotChecker) -> Any:
    return verify(world.sign(), world.context(spot_checker=checker))


def test_honest_training_passes_the_spot_check(repo: tuple[str, str], tmp_path: Path) -> None:
    world, checker = world_for(repo, tmp_path)
    result = check(world, checker)
    assert result.ok, result
    assert "proof_of_training" in result.checks
    spot = result.spot_check
    assert spot is not None and spot.passed
    # The draw is the oracle's signature over the attestation: checkable with its key.
    signature = bytes.fromhex(spot.report["draw_signature"])
    ORACLE_KEY.verify_key.verify(draw_message(world.attestation.leaf_hash()), signature)
    assert spot.seed == draw_seed(signature).hex()
    # Top-2 by update norm plus 2 random segments (which may coincide), out of 6.
    assert 2 <= len(spot.segments) <= 4 and all(1 <= s <= 6 for s in spot.segments)
    assert all(r["bitwise_match"] for r in spot.report["results"])
    # Verifying again draws the same segments: the oracle cannot draw until it likes them.
    again = check(world, checker).spot_check
    assert again is not None and (again.seed, again.segments) == (spot.seed, spot.segments)


@pytest.mark.parametrize(
    ("prove", "reason", "fragment"),
    [
        (zero_steps, Reason.POT_SCHEDULE_MISMATCH, "commits 0 segments"),
        (schedule_of(15), Reason.POT_SCHEDULE_MISMATCH, "commits 3 segments"),
        (schedule_of(40), Reason.POT_SCHEDULE_MISMATCH, "commits 8 segments"),
        (steps_out_of_order, Reason.POT_STEPS_OUT_OF_ORDER, "checkpoint 2 is at step 15"),
        (own_data_order, Reason.POT_DATA_ORDER_MISMATCH, "seed-derived order"),
        (other_learning_rate, Reason.SPOT_CHECK_FAILED, "do not replay"),
        (pretrained_start, Reason.POT_INITIAL_STATE_MISMATCH, "checkpoint 0"),
    ],
    ids=lambda v: getattr(v, "__name__", str(v))[:40],
)
def test_cheats_are_rejected_with_their_reason(
    repo: tuple[str, str], tmp_path: Path, prove: Prover, reason: Reason, fragment: str
) -> None:
    world, checker = world_for(repo, tmp_path, prove)
    result = check(world, checker)
    assert result.outcome == "rejected" and result.reason == reason, result
    assert fragment in result.message
    assert "proof_of_training" not in result.checks


def test_small_norm_fakes_are_caught_by_the_random_picks(
    repo: tuple[str, str], tmp_path: Path
) -> None:
    """4 of 6 segments faked with tiny norms: the 2 norm picks land on the honest ones,
    and 5 random picks from all 6 must hit a fake. The twin: the honest run under the
    same parameters is verified."""
    proof = {**PROOF, "spot_checks": 5}
    world, checker = world_for(repo, tmp_path / "faked", small_norm_fakes, proof=proof)
    result = check(world, checker)
    assert result.reason == Reason.SPOT_CHECK_FAILED, result
    assert result.spot_check is not None and {1, 2} <= set(result.spot_check.segments)
    twin, twin_checker = world_for(repo, tmp_path / "honest", honest, proof=proof)
    assert check(twin, twin_checker).ok


def test_a_spec_without_a_schedule_cannot_be_verified(
    repo: tuple[str, str], tmp_path: Path
) -> None:
    """The proof of a job whose spec fixes no schedule is tied to no amount of training."""
    proof = {"steps_per_checkpoint": 5, "spot_checks": 2, "tolerance_ppm": 0}
    world, checker = world_for(repo, tmp_path, honest, proof=proof)
    result = check(world, checker)
    assert result.reason == Reason.POT_NO_SCHEDULE


def test_missing_or_tampered_proof(repo: tuple[str, str], tmp_path: Path) -> None:
    world, checker = world_for(repo, tmp_path)
    ctx = world.context(spot_checker=checker)
    wrong_root = world.variant(pot_root="1" * 64)
    assert verify(world.sign(wrong_root), ctx).reason == Reason.POT_ROOT_MISMATCH
    weights = [k for k in world.feed.artifacts if k[1].endswith(".weights")]
    for key in weights:  # every checkpoint file differs from its commitment
        world.feed.artifacts[key] = world.feed.artifacts[key][:-1] + b"\x00"
    assert verify(world.sign(), ctx).reason == Reason.POT_INVALID
    del world.feed.artifacts[(world.job_id, "pot/manifest.json")]
    assert verify(world.sign(), ctx).reason == Reason.POT_MISSING


def test_the_index_files_are_not_needed(repo: tuple[str, str], tmp_path: Path) -> None:
    """The data order is recomputed from the seed: a replay never reads the prover's
    index files, so deleting them changes nothing."""
    world, checker = world_for(repo, tmp_path)
    for key in [k for k in world.feed.artifacts if k[1].endswith(".indices")]:
        del world.feed.artifacts[key]
    assert check(world, checker).ok


def test_schedule_is_from_the_spec_not_the_manifest() -> None:
    spec = JobSpec.from_dict({**job_spec().model_dump(mode="python"), "proof": PROOF})
    assert spec.schedule == Schedule(
        total_steps=30, steps_per_checkpoint=5, dataset_size=256, batch_size=32
    )
    assert len(list(spec.schedule.index_commitments(7))) == 6
