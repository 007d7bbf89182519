"""TensorFlow/Keras adapter through the harness: honest replays match bitwise on CPU (dropout
included), faked checkpoints are caught.

TensorFlow is an optional extra (`pip install 'proofnet-pot[tensorflow]'`); without it these
tests are skipped, with that reason shown in the summary (-ra).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pot import Manifest, harness
from pot.schedule import Schedule
from pot.seeds import derive_data_seed
from pot.trainer import TrainContext

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None,
    reason="tensorflow is not installed (optional extra: pip install 'proofnet-pot[tensorflow]')",
)

SEED, NONCE = 11, b"\x09" * 16
SCHEDULE = Schedule(total_steps=24, steps_per_checkpoint=8, dataset_size=128, batch_size=16)


def context(job_dir: Path, mode: str = "train") -> TrainContext:
    return TrainContext(
        job_dir=job_dir,
        job_seed=SEED,
        data_seed=derive_data_seed(SEED, NONCE),
        schedule=SCHEDULE,
        config={"lr": "0.01"},
    )


def keras_trainer(ctx: TrainContext, perturb_at: int | None = None) -> Any:
    """A job's trainer as the tensorflow template writes one."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras

    from pot.keras_adapter import KerasTrainer, configure_determinism

    class Small(KerasTrainer):
        def __init__(self, ctx: TrainContext) -> None:
            configure_determinism(ctx.job_seed)
            rng = np.random.default_rng(ctx.job_seed)
            x = rng.standard_normal((ctx.schedule.dataset_size, 8)).astype("float32")
            y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int32")
            model = keras.Sequential(
                [
                    keras.layers.Dense(16, activation="relu"),
                    keras.layers.Dropout(0.2),
                    keras.layers.Dense(2),
                ]
            )
            model.build((None, 8))
            super().__init__(
                model,
                keras.optimizers.Adam(ctx.decimal("lr", "0.01")),
                keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                batch=lambda idx: (x[idx], y[idx]),
            )

        def train_step(self, step: int, indices: np.ndarray) -> float:
            loss = super().train_step(step, indices)
            if step == perturb_at:  # the prover commits weights training did not produce
                kernel = self.model.layers[0].kernel
                kernel.assign(kernel + 1e-3)
            return loss

    return Small(ctx)


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    job_dir = tmp_path_factory.mktemp("keras")
    ctx = context(job_dir)
    return job_dir, harness.train(keras_trainer(ctx), ctx, job_dir / "pot")


def replay(job_dir: Path, manifest: Manifest, segments: list[int]) -> Any:
    ctx = context(job_dir, "replay")
    return harness.replay(
        keras_trainer(ctx), ctx, job_dir / "pot", root=manifest.root, segments=segments
    )


def test_honest_keras_run_replays_bitwise(honest: tuple[Path, Manifest]) -> None:
    job_dir, manifest = honest
    assert manifest.segments == 3
    report = replay(job_dir, manifest, [1, 3])
    assert report.passed and all(r.bitwise_match for r in report.results)
    assert report.initial_weights_hash == manifest.leaves[0].weights


def test_faked_keras_checkpoint_is_detected(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    manifest = harness.train(keras_trainer(ctx, perturb_at=16), ctx, tmp_path / "pot")
    report = replay(tmp_path, manifest, [2, 3])
    assert [r.segment for r in report.failures()] == [2]
    assert report.results[0].distance > 1e-6
