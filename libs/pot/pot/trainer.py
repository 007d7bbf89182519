"""The trainer interface: what a job implements so the harness can train it and replay it.

A job's repository holds a trainer class and its spec names it (`proof.trainer:
"module:Class"`). The harness (`python -m pot train|replay`, `pot.harness`) builds it with
a `TrainContext` and drives it; the same calls train the job on the provider and replay a
segment on a verifier, so there is no second code path to get wrong or to sabotage:

    class MyTrainer:
        def __init__(self, ctx: TrainContext) -> None:
            # Build the initial state from ctx (data, model, optimizer, random generators),
            # seeded from ctx.job_seed: the same context must give the same state.
        def state(self) -> TrainingState:          # serialise: weights, optimizer, RNG
        def restore(self, state: TrainingState):   # load a checkpoint, bit for bit
        def train_step(self, step, indices) -> float:  # one optimiser step; the loss
        def finish(self) -> Mapping[str, object]:  # optional, after training only: write
                                                   # results under ctx.results_dir

The library hashes the state (canonical serialisation of the arrays, `pot.tensors`): a
trainer never computes its own commitments.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pot.env import UnitEnv, check_trainer_ref
from pot.schedule import Schedule


class TrainerError(ValueError):
    """The trainer cannot be loaded or built, or its inputs do not match the job."""


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


class Restorable(Protocol):
    """What opening a committed checkpoint needs of a trainer (`pot.harness.open_checkpoint`)."""

    def state(self) -> TrainingState: ...

    def restore(self, state: TrainingState) -> None: ...


@runtime_checkable
class Trainer(Protocol):
    """What the harness needs from a job's training code (see the module docstring)."""

    def state(self) -> TrainingState:
        """A snapshot of the current state (copies or views; the recorder copies what it keeps)."""
        ...

    def restore(self, state: TrainingState) -> None:
        """Reset to `state` exactly, including optimizer and RNG state."""
        ...

    def train_step(self, step: int, indices: np.ndarray) -> float:
        """One optimiser step on the examples at `indices` (1-based `step`); the loss."""
        ...


@dataclass(frozen=True)
class TrainContext:
    """What a trainer is built from: the same context on the provider and on a verifier.

    It says nothing of whether the trainer trains or replays, and neither does anything
    else the harness shows it: a segment is run the same way in both directions (restore
    the committed checkpoint that opens it, check the restore was exact, run its steps;
    `pot.harness`), so job code has no mode to depart on (docs/protocol.md,
    "Verification")."""

    job_dir: Path  # the job's work dir; results go under results/
    job_seed: int  # the spec's seed: initialise from it
    data_seed: int  # the data-order seed (job seed + claim nonce); the harness draws batches
    schedule: Schedule
    config: Mapping[str, Any] = field(default_factory=dict)  # the spec's proof.config
    unit: UnitEnv | None = None  # a relay stage's unit (its shards, input checkpoints)

    @property
    def results_dir(self) -> Path:
        return self.job_dir / "results"

    def check_dataset_size(self, examples: int) -> None:
        """Refuse data whose size is not the schedule's: the data order is drawn over
        `schedule.dataset_size` indices."""
        if examples != self.schedule.dataset_size:
            raise TrainerError(
                f"the data hold {examples} examples; the schedule declares "
                f"dataset_size {self.schedule.dataset_size}"
            )

    def integer(self, name: str, default: int) -> int:
        value = self.config.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TrainerError(f"config.{name} must be an integer, got {value!r:.40}")
        return value

    def decimal(self, name: str, default: str) -> float:
        """A real number from the config: canonical JSON has no floats, so the spec writes
        it as a decimal string ("0.05") or an integer."""
        value = self.config.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise TrainerError(f"config.{name} must be a decimal string, got {value!r:.40}")
        try:
            return float(Decimal(value))
        except InvalidOperation as exc:
            raise TrainerError(
                f"config.{name} must be a decimal string, got {value!r:.40}"
            ) from exc

    def string(self, name: str, default: str) -> str:
        value = self.config.get(name, default)
        if not isinstance(value, str):
            raise TrainerError(f"config.{name} must be a string, got {value!r:.40}")
        return value


def load_trainer_class(ref: str, code_dir: Path) -> type:
    """Import "module:Class" from the job's code in `code_dir`, first on the path as for
    `python train.py`. This library (and numpy) are loaded before, so a repository that
    ships a `pot` of its own cannot replace the harness that runs it."""
    check_trainer_ref(ref)
    module_name, class_name = ref.split(":")
    path = str(Path(code_dir).resolve())
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise TrainerError(f"cannot import trainer module {module_name!r}: {exc}") from exc
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise TrainerError(f"{module_name!r} has no class {class_name!r}")
    for method in ("state", "restore", "train_step"):
        if not callable(getattr(cls, method, None)):
            raise TrainerError(f"trainer {ref} has no {method}() method")
    return cls


def build_trainer(cls: type, ctx: TrainContext) -> Trainer:
    trainer = cls(ctx)
    if not isinstance(trainer, Trainer):
        raise TrainerError(f"{cls.__name__} does not implement state/restore/train_step")
    return trainer
