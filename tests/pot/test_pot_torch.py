"""PyTorch adapter through the harness: honest replays match bitwise on CPU, faked
checkpoints are caught.

torch is an optional extra (`pip install 'proofnet-pot[torch]'`); without it these tests
are skipped, with that reason shown in the summary (-ra).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pot import Manifest, harness
from pot.schedule import Schedule
from pot.seeds import derive_data_seed
from pot.trainer import TrainContext

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="torch is not installed (optional extra: pip install 'proofnet-pot[torch]')",
)

SEED, NONCE = 99, b"\x05" * 16


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> None:
    """Tiny tensors on a busy machine: torch's thread pool only adds wake-up latency."""
    import torch

    torch.set_num_threads(1)


SCHEDULE = Schedule(total_steps=45, steps_per_checkpoint=10, dataset_size=256, batch_size=32)


def context(job_dir: Path, mode: str = "train") -> TrainContext:
    return TrainContext(
        job_dir=job_dir,
        job_seed=SEED,
        data_seed=derive_data_seed(SEED, NONCE),
        schedule=SCHEDULE,
        config={"lr": "0.01"},
    )


def tiny_trainer(ctx: TrainContext, perturb_at: int | None = None) -> Any:
    """A job's trainer as the pytorch template writes one: BatchNorm gives buffers,
    Dropout consumes the RNG, Adam has per-parameter state."""
    import torch

    from pot.torch_adapter import TorchTrainer, configure_determinism

    class Tiny(TorchTrainer):
        def __init__(self, ctx: TrainContext) -> None:
            configure_determinism(ctx.job_seed)
            gen = torch.Generator().manual_seed(ctx.job_seed)
            x = torch.randn(ctx.schedule.dataset_size, 8, generator=gen)
            y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
            model = torch.nn.Sequential(
                torch.nn.Linear(8, 16),
                torch.nn.BatchNorm1d(16),
                torch.nn.ReLU(),
                torch.nn.Dropout(0.2),
                torch.nn.Linear(16, 2),
            )
            optimizer = torch.optim.Adam(model.parameters(), lr=ctx.decimal("lr", "0.01"))

            def batch(indices: np.ndarray) -> tuple[Any, Any]:
                idx = torch.from_numpy(np.asarray(indices, dtype=np.int64))
                return x[idx], y[idx]

            super().__init__(model, optimizer, torch.nn.functional.cross_entropy, batch)

        def train_step(self, step: int, indices: np.ndarray) -> float:
            loss = super().train_step(step, indices)
            if step == perturb_at:  # the prover commits weights training did not produce
                with torch.no_grad():
                    self.model[0].weight.add_(1e-3)
            return loss

    return Tiny(ctx)


def train(job_dir: Path, perturb_at: int | None = None) -> Manifest:
    ctx = context(job_dir)
    return harness.train(tiny_trainer(ctx, perturb_at), ctx, job_dir / "pot")


def replay(job_dir: Path, manifest: Manifest, segments: list[int]) -> Any:
    ctx = context(job_dir, "replay")
    return harness.replay(
        tiny_trainer(ctx), ctx, job_dir / "pot", root=manifest.root, segments=segments
    )


def test_state_round_trip_restores_everything(tmp_path: Path) -> None:
    trainer = tiny_trainer(context(tmp_path))
    trainer.train_step(1, np.arange(32))
    state = trainer.state()
    assert "1.running_mean" in state.params  # buffers are part of the weights
    assert any(k.endswith("exp_avg") for k in state.optimizer)
    losses_a = [trainer.train_step(s, np.arange(32) + s) for s in range(2, 5)]
    trainer.restore(state)
    losses_b = [trainer.train_step(s, np.arange(32) + s) for s in range(2, 5)]
    assert losses_a == losses_b


def test_honest_torch_run_replays_bitwise(tmp_path: Path) -> None:
    manifest = train(tmp_path)
    assert manifest.segments == 5
    report = replay(tmp_path, manifest, [1, 3, 5])
    assert report.passed and all(r.bitwise_match for r in report.results)
    assert report.initial_weights_hash == manifest.leaves[0].weights


def test_faked_torch_checkpoint_is_detected(tmp_path: Path) -> None:
    manifest = train(tmp_path, perturb_at=20)
    report = replay(tmp_path, manifest, [2, 3])
    assert [r.segment for r in report.failures()] == [2]
    faked = report.results[0]
    assert not faked.bitwise_match and faked.distance > 1e-6


def test_determinism_settings() -> None:
    import os

    import torch

    from pot.torch_adapter import configure_determinism

    configure_determinism(1)
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.backends.cudnn.benchmark is False
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] in (":4096:8", ":16:8")


def test_bfloat16_round_trip() -> None:
    import torch

    from pot.torch_adapter import numpy_to_tensor, tensor_to_numpy

    t = torch.randn(5).to(torch.bfloat16)
    back = numpy_to_tensor(tensor_to_numpy(t), t)
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)
