"""`ProofOfTraining`: the recorder a training job calls while it trains.

Typical loop (see `worker/pot/examples/numpy_mlp.py`):

    pot = ProofOfTraining.for_job(job_dir, job_seed=seed, nonce=nonce, steps_per_checkpoint=100)
    sampler = BatchSampler(pot.data_seed, len(dataset), batch_size)
    pot.start(trainer.state())
    for step in range(1, total_steps + 1):
        idx = sampler.indices(step)
        loss = trainer.train_step(step, idx)
        if pot.record_step(idx, loss):
            pot.commit(trainer.state())
    manifest = pot.finish(trainer.state())

Every k steps it writes checkpoint i (weights, optimizer state, RNG state) and segment i's
data indices into `<job dir>/pot/`, and commits their hashes as Merkle leaf i; `finish`
writes `manifest.json` with the leaves and the root the worker attests.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from worker.pot import env
from worker.pot.indices import SegmentIndices
from worker.pot.manifest import (
    MANIFEST_NAME,
    Leaf,
    Manifest,
    ProofError,
    indices_path,
    optimizer_path,
    rng_bytes,
    rng_path,
    state_hash,
    weights_path,
)
from worker.pot.seeds import derive_data_seed
from worker.pot.tensors import decimal_string, l2_norm_of_difference, write_tensors

POT_SUBDIR = "pot"


@dataclass(frozen=True)
class TrainingState:
    """Everything needed to continue training bit for bit from a checkpoint.

    `params` are the weights that are hashed and compared (include buffers such as batch-norm
    statistics); `optimizer` holds the optimizer's arrays; `rng` is any JSON value that
    restores every random generator the step uses (dropout, augmentation).
    """

    params: Mapping[str, np.ndarray]
    optimizer: Mapping[str, np.ndarray] = field(default_factory=dict)
    rng: Any = None


class Trainer(Protocol):
    """What replay needs from a job's training code."""

    def state(self) -> TrainingState:
        """A snapshot of the current state (copies or views; the recorder copies what it keeps)."""
        ...

    def restore(self, state: TrainingState) -> None:
        """Reset to `state` exactly, including optimizer and RNG state."""
        ...

    def train_step(self, step: int, indices: np.ndarray) -> float:
        """One optimiser step on the examples at `indices`; return the loss."""
        ...


class ProofOfTraining:
    def __init__(self, pot_dir: Path, *, steps_per_checkpoint: int, data_seed: int) -> None:
        if steps_per_checkpoint < 1:
            raise ValueError("steps_per_checkpoint must be >= 1")
        self.pot_dir = Path(pot_dir)
        if (self.pot_dir / MANIFEST_NAME).exists():
            raise ProofError(
                f"{self.pot_dir} already holds a finished proof; refusing to overwrite"
            )
        self.pot_dir.mkdir(parents=True, exist_ok=True)
        self.steps_per_checkpoint = steps_per_checkpoint
        self.data_seed = data_seed
        self._leaves: list[Leaf] = []
        self._step = 0
        self._segment = SegmentIndices()
        self._segment_steps = 0
        self._last_loss: float | None = None
        self._previous: dict[str, np.ndarray] | None = None
        self._finished = False

    @classmethod
    def for_job(
        cls, job_dir: Path, *, job_seed: int, nonce: bytes, steps_per_checkpoint: int
    ) -> ProofOfTraining:
        return cls(
            Path(job_dir) / POT_SUBDIR,
            steps_per_checkpoint=steps_per_checkpoint,
            data_seed=derive_data_seed(job_seed, nonce),
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ProofOfTraining:
        """Build from the variables the worker sets for a job (see `worker.pot.env`)."""
        job = env.JobEnv.read(os.environ if environ is None else environ)
        return cls.for_job(
            job.job_dir,
            job_seed=job.job_seed,
            nonce=job.nonce,
            steps_per_checkpoint=job.steps_per_checkpoint,
        )

    @property
    def step(self) -> int:
        return self._step

    @property
    def leaves(self) -> tuple[Leaf, ...]:
        return tuple(self._leaves)

    def start(self, state: TrainingState) -> Leaf:
        """Commit the initial checkpoint (step 0). Call once, before the first step."""
        if self._leaves:
            raise ProofError("start() was already called")
        return self._commit(state, data=None, loss=None)

    def record_step(self, indices: np.ndarray | Iterable[int], loss: float) -> bool:
        """Record one optimiser step; True when a checkpoint is due (call `commit` then)."""
        if not self._leaves:
            raise ProofError("call start() with the initial state before recording steps")
        if self._finished:
            raise ProofError("the proof is finished")
        if self._segment_steps >= self.steps_per_checkpoint:
            raise ProofError(f"checkpoint due at step {self._step} was not committed")
        self._step += 1
        self._segment.add(self._step, np.asarray(indices))
        self._segment_steps += 1
        self._last_loss = float(loss)
        return self._segment_steps == self.steps_per_checkpoint

    def commit(self, state: TrainingState) -> Leaf:
        """Commit the checkpoint that ends the current segment."""
        if self._segment_steps == 0:
            raise ProofError("no steps recorded since the last checkpoint")
        segment = len(self._leaves)
        self._segment.write(indices_path(self.pot_dir, segment))
        data = self._segment.hexdigest()
        assert self._last_loss is not None
        leaf = self._commit(state, data=data, loss=decimal_string(self._last_loss))
        self._segment = SegmentIndices()
        self._segment_steps = 0
        return leaf

    def maybe_commit(
        self, indices: np.ndarray, loss: float, state: Callable[[], TrainingState]
    ) -> None:
        """`record_step` + `commit` when due; `state` is only called at checkpoints."""
        if self.record_step(indices, loss):
            self.commit(state())

    def finish(self, state: TrainingState) -> Manifest:
        """Commit a trailing partial segment if any, write the manifest, return it."""
        if self._finished:
            raise ProofError("finish() was already called")
        if not self._leaves:
            raise ProofError("call start() before finish()")
        if self._segment_steps:
            self.commit(state)
        manifest = Manifest(
            steps_per_checkpoint=self.steps_per_checkpoint,
            data_seed=self.data_seed,
            leaves=tuple(self._leaves),
        )
        manifest.save(self.pot_dir)
        self._finished = True
        return manifest

    def _commit(self, state: TrainingState, *, data: str | None, loss: str | None) -> Leaf:
        index = len(self._leaves)
        weights = write_tensors(weights_path(self.pot_dir, index), state.params)
        optim = write_tensors(optimizer_path(self.pot_dir, index), state.optimizer)
        rng = rng_bytes(state.rng)
        path = rng_path(self.pot_dir, index)
        path.with_name(path.name + ".tmp").write_bytes(rng)
        path.with_name(path.name + ".tmp").replace(path)
        current = {name: np.array(a, copy=True) for name, a in state.params.items()}
        norm = None
        if self._previous is not None:
            norm = decimal_string(l2_norm_of_difference(current, self._previous))
        self._previous = current
        leaf = Leaf(
            step=self._step,
            weights=weights,
            state=state_hash(optim, rng),
            data=data,
            loss=loss,
            update_norm=norm,
        )
        self._leaves.append(leaf)
        return leaf


def run_training(
    trainer: Trainer,
    pot: ProofOfTraining,
    batches: Callable[[int], np.ndarray],
    total_steps: int,
) -> Manifest:
    """The standard loop: `batches(step)` gives the indices for 1-based `step`."""
    pot.start(trainer.state())
    for step in range(1, total_steps + 1):
        indices = batches(step)
        loss = trainer.train_step(step, indices)
        if pot.record_step(indices, loss):
            pot.commit(trainer.state())
    return pot.finish(trainer.state())
