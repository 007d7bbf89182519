"""A relay pipeline's training code: the numpy MLP, trained stage by stage across workers.

A stage is trained by the harness with `StageTrainer` (the spec's `proof.trainer`, e.g.
"relay:StageTrainer" in a repository module that re-exports it); the other units run this
module's commands (docs/topologies.md), reading what the worker sets (`pot.env.UnitEnv`):

    python -m pot.examples.numpy_relay evaluate               # an evaluation
    python -m pot.examples.numpy_relay average                # an aggregation
    python -m pot.examples.numpy_relay make-shards --out DIR  # data for a demo/test

A stage starts from its input checkpoints (PROOFNET_INPUT_CHECKPOINTS: none at the start of
a branch, so the model's seeded initialisation; one to continue from; several are
averaged), trains on its shards (PROOFNET_SHARDS, together the schedule's dataset_size
examples), and `finish` writes its model and optimizer state to PROOFNET_CHECKPOINT_OUT and
its metrics to `results/metrics.json`. A replay of a stage is given the stage's shards and
no input checkpoint: it starts from the committed checkpoint that opens the segment.
`evaluate` writes `{"loss": "<decimal>", "accuracy": "<decimal>"}` to PROOFNET_METRICS_OUT;
`average` writes the element-wise mean of its input checkpoints. A checkpoint and a data
shard are `pot.tensors` bundles (checkpoint: W1, b1, W2, b2 and velocity.*; shard: x, y).

Standard library + numpy only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from pot import env
from pot.examples.numpy_mlp import PARAM_NAMES, MLPConfig, MLPModel
from pot.tensors import decimal_string, read_tensors, write_tensors
from pot.trainer import TrainContext, TrainingState

VELOCITY = "velocity."
CHECKPOINT_NAMES = (*PARAM_NAMES, *(VELOCITY + n for n in PARAM_NAMES))
# An evaluation reports a decimal; a diverged model's loss is reported as this instead of
# "NaN", so that a threshold comparison fails it rather than the evaluation erroring out.
DIVERGED_LOSS = "1000000000"


class RelayError(ValueError):
    """The unit's inputs are unusable (missing, malformed, mismatched shapes)."""


# --- data and checkpoints -------------------------------------------------------------------


def make_shards(
    out: Path, *, shards: int, examples: int, features: int, classes: int, seed: int
) -> list[Path]:
    """`shards` files of `examples` examples each, labelled by one random teacher network."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(7,))))
    teacher = rng.standard_normal((features, classes))
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(shards):
        x = rng.standard_normal((examples, features))
        noise = 0.1 * rng.standard_normal((examples, classes))
        y = np.argmax(np.tanh(x @ teacher / np.sqrt(features)) + noise, axis=1).astype(np.int64)
        path = out / f"shard-{i}.bin"
        write_tensors(path, {"x": x, "y": y})
        paths.append(path)
    return paths


def load_shards(paths: Sequence[Path]) -> tuple[np.ndarray, np.ndarray]:
    if not paths:
        raise RelayError(f"no data: {env.SHARDS} names no shard")
    xs, ys = [], []
    for path in paths:
        arrays, _ = read_tensors(path)
        if set(arrays) != {"x", "y"} or arrays["x"].ndim != 2 or arrays["y"].ndim != 1:
            raise RelayError(f"{path} is not a shard (x: examples x features, y: labels)")
        xs.append(arrays["x"])
        ys.append(arrays["y"])
    if len({x.shape[1] for x in xs}) != 1:
        raise RelayError("the shards have different numbers of features")
    return np.concatenate(xs), np.concatenate(ys).astype(np.int64)


def read_checkpoint(path: Path) -> dict[str, np.ndarray]:
    arrays, _ = read_tensors(path)
    if set(arrays) != set(CHECKPOINT_NAMES):
        raise RelayError(f"{path} is not a relay checkpoint (arrays {sorted(arrays)})")
    return arrays


def average(checkpoints: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    if not checkpoints:
        raise RelayError("nothing to average")
    first = checkpoints[0]
    for other in checkpoints[1:]:
        if any(other[n].shape != first[n].shape for n in CHECKPOINT_NAMES):
            raise RelayError("the checkpoints to average have different shapes")
    return {n: np.mean([c[n] for c in checkpoints], axis=0) for n in CHECKPOINT_NAMES}


def checkpoint_of(trainer: MLPModel) -> dict[str, np.ndarray]:
    return {
        **trainer.params,
        **{VELOCITY + n: v for n, v in trainer.velocity.items()},
    }


def _trainer(
    x: np.ndarray,
    y: np.ndarray,
    *,
    start: Mapping[str, np.ndarray] | None,
    hidden: int,
    classes: int,
    batch_size: int,
    lr: float,
    job_seed: int,
    unit_index: int,
) -> MLPModel:
    if start is not None:
        hidden, classes = start["W2"].shape
        if start["W1"].shape[0] != x.shape[1]:
            raise RelayError(
                f"the input checkpoint takes {start['W1'].shape[0]} features, the data has "
                f"{x.shape[1]}"
            )
    if len(y) and (y.min() < 0 or y.max() >= classes):
        raise RelayError(f"labels must be in 0..{classes - 1}")
    cfg = MLPConfig(
        examples=len(x),
        features=x.shape[1],
        hidden=hidden,
        classes=classes,
        batch_size=min(batch_size, len(x)),
        lr=lr,
    )
    # Every branch start draws the same initialisation from the job seed (so branches can
    # be averaged); each stage draws its own augmentation noise.
    trainer = MLPModel(x, y, cfg, init_seed=job_seed)
    trainer.noise = np.random.Generator(
        np.random.PCG64(np.random.SeedSequence(job_seed, spawn_key=(3, unit_index)))
    )
    if start is not None:
        trainer.params = {n: np.array(start[n], copy=True) for n in PARAM_NAMES}
        trainer.velocity = {n: np.array(start[VELOCITY + n], copy=True) for n in PARAM_NAMES}
    return trainer


def _loss_and_accuracy(trainer: MLPModel) -> tuple[float, float]:
    _, logits = trainer.forward(trainer.x)
    logits = logits - logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    loss = float(-log_probs[np.arange(len(trainer.y)), trainer.y].mean())
    accuracy = float((np.argmax(logits, axis=1) == trainer.y).mean())
    return loss, accuracy


# --- the entry points -----------------------------------------------------------------------


def _start_from(unit: env.UnitEnv) -> dict[str, np.ndarray] | None:
    inputs = [read_checkpoint(p) for p in unit.input_checkpoints]
    if not inputs:
        return None
    return inputs[0] if len(inputs) == 1 else average(inputs)


class StageTrainer:
    """The harness's trainer for a relay stage (config: hidden, classes, lr as integers or
    decimal strings; batch size and data set size from the schedule)."""

    def __init__(self, ctx: TrainContext) -> None:
        unit = ctx.unit
        if unit is None or unit.kind != "stage":
            raise RelayError("StageTrainer trains relay stages: the unit must be a stage")
        x, y = load_shards(unit.shards)
        ctx.check_dataset_size(len(x))
        # Built from the stage's inputs when it has any; a replay then restores the
        # committed checkpoint that opens its segment, as training does (`pot.harness`).
        start = _start_from(unit)
        self.model = _trainer(
            x,
            y,
            start=start,
            hidden=ctx.integer("hidden", MLPConfig.hidden),
            classes=ctx.integer("classes", MLPConfig.classes),
            batch_size=ctx.schedule.batch_size,
            lr=ctx.decimal("lr", str(MLPConfig.lr)),
            job_seed=ctx.job_seed,
            unit_index=unit.index,
        )
        self.ctx, self.unit = ctx, unit
        self.last = (0, float("nan"))

    def state(self) -> TrainingState:
        return self.model.state()

    def restore(self, state: TrainingState) -> None:
        self.model.restore(state)

    def train_step(self, step: int, indices: np.ndarray) -> float:
        loss = self.model.train_step(step, indices)
        self.last = (step, loss)
        if step % max(1, self.ctx.schedule.total_steps // 10) == 0:
            print(f"relay stage {self.unit.index}: step {step}", flush=True)
        return loss

    def finish(self) -> Mapping[str, object]:
        if self.unit.checkpoint_out is None:
            raise RelayError(f"a stage needs {env.CHECKPOINT_OUT}")
        write_tensors(self.unit.checkpoint_out, checkpoint_of(self.model))
        _, accuracy = _loss_and_accuracy(self.model)
        metrics = {
            "accuracy": decimal_string(accuracy),
            "final_loss": decimal_string(self.last[1]),
            "steps": self.last[0],
        }
        results = self.ctx.results_dir
        results.mkdir(parents=True, exist_ok=True)
        (results / "metrics.json").write_text(json.dumps(metrics, sort_keys=True) + "\n")
        return {"stage": self.unit.index, **metrics}


def evaluate(unit: env.UnitEnv) -> dict[str, str]:
    if unit.metrics_out is None:
        raise RelayError(f"an evaluation needs {env.METRICS_OUT}")
    if len(unit.input_checkpoints) != 1:
        raise RelayError(
            f"an evaluation evaluates one checkpoint, got {len(unit.input_checkpoints)}"
        )
    model = read_checkpoint(unit.input_checkpoints[0])
    x, y = load_shards(unit.shards)
    trainer = _trainer(
        x, y, start=model, hidden=0, classes=0, batch_size=len(x), lr=0.0, job_seed=0, unit_index=0
    )
    loss, accuracy = _loss_and_accuracy(trainer)
    metrics = {
        "loss": f"{loss:.6f}" if math.isfinite(loss) else DIVERGED_LOSS,
        "accuracy": f"{accuracy:.6f}",
    }
    unit.metrics_out.parent.mkdir(parents=True, exist_ok=True)
    unit.metrics_out.write_text(json.dumps(metrics, sort_keys=True) + "\n")
    return metrics


def average_inputs(unit: env.UnitEnv) -> str:
    if unit.checkpoint_out is None:
        raise RelayError(f"an aggregation needs {env.CHECKPOINT_OUT}")
    averaged = average([read_checkpoint(p) for p in unit.input_checkpoints])
    return write_tensors(unit.checkpoint_out, averaged)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="numpy_relay", description=(__doc__ or "").split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("evaluate", help="evaluate the input checkpoint on the unit's data")
    sub.add_parser("average", help="average the input checkpoints")
    shards = sub.add_parser("make-shards", help="write synthetic data shards")
    shards.add_argument("--out", type=Path, required=True)
    shards.add_argument("--shards", type=int, default=3)
    shards.add_argument("--examples", type=int, default=512)
    shards.add_argument("--features", type=int, default=MLPConfig.features)
    shards.add_argument("--classes", type=int, default=MLPConfig.classes)
    shards.add_argument("--seed", type=int, default=0)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "make-shards":
            paths = make_shards(
                args.out,
                shards=args.shards,
                examples=args.examples,
                features=args.features,
                classes=args.classes,
                seed=args.seed,
            )
            print(json.dumps([str(p) for p in paths]))
            return 0
        unit = env.UnitEnv.read(os.environ)
        if args.command == "evaluate":
            print(json.dumps(evaluate(unit), sort_keys=True))
        else:
            print(json.dumps({"checkpoint": average_inputs(unit)}))
    except (env.JobEnvError, RelayError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
