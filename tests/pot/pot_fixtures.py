"""An honest world for the proof-of-training tests, and the cheater's tools to bend it.

The honest run is the numpy MLP trained by the harness over a fixed schedule. A cheater
records its proof with the library's own recorder but its own loop (`forge`): it can stop
early, add segments, skip training in chosen segments (committing a tiny update instead),
or feed other batches than the seed gives, and still get self-consistent commitments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np

from pot import harness
from pot.examples.numpy_mlp import MLPTrainer
from pot.manifest import Leaf, Manifest
from pot.recorder import ProofOfTraining
from pot.schedule import Schedule
from pot.seeds import BatchSampler, derive_data_seed
from pot.trainer import TrainContext

SEED = 1234
NONCE = bytes(range(16))
DATA_SEED = derive_data_seed(SEED, NONCE)
# 10 full segments of 50 steps and a last one of 20.
SCHEDULE = Schedule(total_steps=520, steps_per_checkpoint=50, dataset_size=512, batch_size=32)
CONFIG = {"hidden": 32}


def context(
    job_dir: Path,
    *,
    mode: str = "train",
    schedule: Schedule = SCHEDULE,
    config: dict[str, object] | None = None,
    seed: int = SEED,
    nonce: bytes = NONCE,
) -> TrainContext:
    return TrainContext(
        job_dir=job_dir,
        job_seed=seed,
        data_seed=derive_data_seed(seed, nonce),
        schedule=schedule,
        config=dict(CONFIG if config is None else config),
    )


def new_trainer(job_dir: Path, **kwargs: object) -> MLPTrainer:
    return MLPTrainer(context(job_dir, **kwargs))  # type: ignore[arg-type]


def train_honest(job_dir: Path, schedule: Schedule = SCHEDULE) -> Manifest:
    ctx = context(job_dir, schedule=schedule)
    return harness.train(MLPTrainer(ctx), ctx, job_dir / "pot")


def replay(
    pot_dir: Path, manifest: Manifest, segments: Iterable[int], **kwargs: object
) -> harness.ReplayReport:
    ctx = context(pot_dir.parent, mode="replay", **kwargs)  # type: ignore[arg-type]
    return harness.replay(
        MLPTrainer(ctx), ctx, pot_dir, root=manifest.root, segments=list(segments)
    )


def forge(
    job_dir: Path,
    *,
    steps: int = SCHEDULE.total_steps,
    faked: Iterable[int] = (),
    batches: Callable[[int], np.ndarray] | None = None,
    nudge: float = 1e-6,
) -> Manifest:
    """A cheater's proof: `steps` steps recorded at the schedule's interval, with the
    segments in `faked` not trained (their weights only nudged, so their committed update
    norms are tiny), on `batches` (default: the seed's own order)."""
    sampler = BatchSampler(DATA_SEED, SCHEDULE.dataset_size, SCHEDULE.batch_size)
    batches = batches or sampler.indices
    trainer = new_trainer(job_dir)
    recorder = ProofOfTraining(
        job_dir / "pot", steps_per_checkpoint=SCHEDULE.steps_per_checkpoint, data_seed=DATA_SEED
    )
    fakes = set(faked)
    recorder.start(trainer.state())
    loss = 1.0
    for step in range(1, steps + 1):
        segment = (step - 1) // SCHEDULE.steps_per_checkpoint + 1
        indices = batches(step)
        if segment in fakes:
            if step % SCHEDULE.steps_per_checkpoint == 0 or step == steps:
                trainer.params["W1"] += nudge
        else:
            loss = trainer.train_step(step, indices)
        if recorder.record_step(indices, loss):
            recorder.commit(trainer.state())
    return recorder.finish(trainer.state())


def with_leaves(manifest: Manifest, leaves: Iterable[Leaf]) -> Manifest:
    """The manifest a cheater would write with `leaves` (and its own, consistent root)."""
    return replace(manifest, leaves=tuple(leaves))
