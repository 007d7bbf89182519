"""PyTorch adapter: honest replays match bitwise on CPU, faked checkpoints are caught.

torch is an optional extra (`pip install proofnet[torch]`); without it these tests are
skipped, with that reason shown in the summary (-ra).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from worker.pot import BatchSampler, ProofOfTraining, replay_segment, run_training

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="torch is not installed (optional extra: pip install 'proofnet[torch]')",
)

SEED, NONCE, K, STEPS = 99, b"\x05" * 16, 10, 45


def make_trainer() -> Any:
    import torch

    from worker.pot.torch_adapter import TorchTrainer, configure_determinism

    configure_determinism(SEED)
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(256, 8, generator=gen)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    # BatchNorm gives buffers, Dropout consumes the RNG, Adam has per-parameter state.
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16),
        torch.nn.BatchNorm1d(16),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.2),
        torch.nn.Linear(16, 2),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def batch(indices: np.ndarray) -> tuple[Any, Any]:
        idx = torch.from_numpy(np.asarray(indices, dtype=np.int64))
        return x[idx], y[idx]

    return TorchTrainer(model, optimizer, torch.nn.functional.cross_entropy, batch)


def train(job_dir: Path, perturb_at: int | None = None) -> Any:
    import torch

    pot = ProofOfTraining.for_job(job_dir, job_seed=SEED, nonce=NONCE, steps_per_checkpoint=K)
    trainer = make_trainer()
    batches = BatchSampler(pot.data_seed, 256, 32)
    if perturb_at is None:
        return pot, run_training(trainer, pot, batches.indices, STEPS)
    pot.start(trainer.state())
    for step in range(1, STEPS + 1):
        idx = batches.indices(step)
        loss = trainer.train_step(step, idx)
        if pot.record_step(idx, loss):
            if step == perturb_at:
                with torch.no_grad():
                    trainer.model[0].weight.add_(1e-3)
            pot.commit(trainer.state())
    return pot, pot.finish(trainer.state())


def test_state_round_trip_restores_everything() -> None:
    trainer = make_trainer()
    trainer.train_step(1, np.arange(32))
    state = trainer.state()
    assert "1.running_mean" in state.params  # buffers are part of the weights
    assert any(k.endswith("exp_avg") for k in state.optimizer)
    losses_a = [trainer.train_step(s, np.arange(32) + s) for s in range(2, 5)]
    trainer.restore(state)
    losses_b = [trainer.train_step(s, np.arange(32) + s) for s in range(2, 5)]
    assert losses_a == losses_b


def test_honest_torch_run_replays_bitwise(tmp_path: Path) -> None:
    pot, manifest = train(tmp_path)
    assert manifest.segments == 5
    for segment in (1, 3, 5):
        result = replay_segment(pot.pot_dir, segment, make_trainer(), expected_root=manifest.root)
        assert result.bitwise_match and result.norm_consistent(), segment


def test_faked_torch_checkpoint_is_detected(tmp_path: Path) -> None:
    pot, manifest = train(tmp_path, perturb_at=20)
    faked = replay_segment(pot.pot_dir, 2, make_trainer(), expected_root=manifest.root)
    assert not faked.bitwise_match and faked.distance > 1e-6 and not faked.passes(0)
    assert replay_segment(pot.pot_dir, 3, make_trainer(), manifest=manifest).passes(0)


def test_determinism_settings() -> None:
    import os

    import torch

    from worker.pot.torch_adapter import configure_determinism

    configure_determinism(1)
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.backends.cudnn.benchmark is False
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] in (":4096:8", ":16:8")


def test_bfloat16_round_trip() -> None:
    import torch

    from worker.pot.torch_adapter import numpy_to_tensor, tensor_to_numpy

    t = torch.randn(5).to(torch.bfloat16)
    back = numpy_to_tensor(tensor_to_numpy(t), t)
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)
