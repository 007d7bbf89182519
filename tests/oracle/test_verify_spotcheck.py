"""Proof-of-training spot checks: the oracle replays segments of a real (numpy) training run
with the job's own code, fetched from a git repository at the pinned commit."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from oracle_fixtures import World, job_spec, make_world, replay_repo

from oracle.spotcheck import LocalSpotChecker, RepoCache, SpotCheckRequest
from oracle.verify import Reason, verify
from proofnet.messages.jobspec import JobSpec
from worker.pot.examples.numpy_mlp import MLPConfig, MLPTrainer, make_dataset
from worker.pot.recorder import ProofOfTraining, run_training
from worker.pot.seeds import BatchSampler

K = 5
STEPS = 30
REPLAY = """
from worker.pot.examples.numpy_mlp import MLPConfig, MLPTrainer, make_dataset
from worker.pot.seeds import BatchSampler, derive_data_seed


def make_trainer(job, commands):
    cfg = MLPConfig(examples=256, hidden=16, batch_size=32)
    x, y = make_dataset(job.job_seed, cfg)
    sampler = BatchSampler(derive_data_seed(job.job_seed, job.nonce), cfg.examples, cfg.batch_size)
    return MLPTrainer(x, y, cfg, init_seed=job.job_seed), sampler.indices
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return replay_repo(tmp_path_factory.mktemp("train-repo"), REPLAY, "training code")


SPEC_URL = "https://example.org/numpy-mlp.git"


def train(job_dir: Path, spec: JobSpec, nonce: str, *, lr: float = 0.05) -> dict[str, bytes]:
    """Run the job as an honest (or, with another lr, a lazy) worker; its pot/ files."""
    cfg = MLPConfig(examples=256, hidden=16, batch_size=32, lr=lr)
    pot = ProofOfTraining.for_job(
        job_dir, job_seed=spec.seed, nonce=bytes.fromhex(nonce), steps_per_checkpoint=K
    )
    x, y = make_dataset(spec.seed, cfg)
    trainer = MLPTrainer(x, y, cfg, init_seed=spec.seed)
    run_training(
        trainer, pot, BatchSampler(pot.data_seed, cfg.examples, cfg.batch_size).indices, STEPS
    )
    return {f"pot/{p.name}": p.read_bytes() for p in sorted((job_dir / "pot").iterdir())}


def world_for(
    repo: tuple[str, str], tmp_path: Path, *, lr: float = 0.05
) -> tuple[World, LocalSpotChecker]:
    url, commit = repo
    data = job_spec().model_dump(mode="python")
    data["model"] = {"repo_url": SPEC_URL, "commit": commit}
    data["proof"] = {"steps_per_checkpoint": K, "spot_checks": 2, "tolerance_ppm": 0}
    spec = JobSpec.from_dict(data)
    draft = make_world(spec=spec)
    files = train(tmp_path / "job", spec, draft.nonce, lr=lr)
    from worker.pot.manifest import Manifest

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
        world.feed, RepoCache(tmp_path / "repos", url_map={SPEC_URL: url}), timeout_s=120
    )
    return world, checker


def test_honest_training_passes_the_spot_check(repo: tuple[str, str], tmp_path: Path) -> None:
    world, checker = world_for(repo, tmp_path)
    result = verify(world.sign(), world.context(spot_checker=checker))
    assert result.ok, result
    spot = result.spot_check
    assert spot is not None and spot.passed and len(spot.seed) == 64
    # Top-2 by update norm plus 2 random segments, out of 6.
    assert len(spot.segments) == 4 and all(1 <= s <= STEPS // K for s in spot.segments)
    assert spot.report is not None
    assert all(r["bitwise_match"] for r in spot.report["results"])


def test_lazy_worker_fails_the_spot_check(repo: tuple[str, str], tmp_path: Path) -> None:
    """Self-consistent commitments from a run that is not the job's (other learning rate)."""
    world, checker = world_for(repo, tmp_path, lr=0.2)
    result = verify(world.sign(), world.context(spot_checker=checker))
    assert result.outcome == "rejected" and result.reason == Reason.SPOT_CHECK_FAILED
    assert "do not replay" in result.message


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


def test_request_round_trips_as_json() -> None:
    request = SpotCheckRequest(
        job_id="a" * 64,
        repo_url="file:///r",
        commit="b" * 40,
        commands=(("python", "train.py"),),
        pot_root="c" * 64,
        job_seed=7,
        nonce="d" * 64,
        steps_per_checkpoint=5,
        segments=(1, 4),
        tolerance_ppm=0,
    )
    assert SpotCheckRequest.from_json(request.to_json()) == request
