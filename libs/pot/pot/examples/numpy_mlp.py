"""A reference training job: a one-hidden-layer MLP in numpy, with proof of training.

Runs as a job command. The worker sets PROOFNET_JOB_DIR, PROOFNET_JOB_SEED,
PROOFNET_JOB_NONCE and PROOFNET_POT_K (see `worker.pot.env`); flags override them.

    python -m worker.pot.examples.numpy_mlp train --steps 500
    python -m worker.pot.examples.numpy_mlp replay --segment 3 --root <hex>

`train` writes `<job dir>/pot/` (checkpoints, data indices, manifest) and
`<job dir>/results/metrics.json`; `replay` re-executes one segment as the verifier does and
exits 1 when it does not match. `make_trainer` is the oracle's replay entry point (a
repository's `proofnet_replay.py` re-exports it, see `oracle.spotcheck`). The data set is synthetic (a random teacher network drawn
from the job seed), so the job needs no download; hyperparameters are flags, which makes
them part of the signed commands.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from worker.pot import env
from worker.pot.manifest import ProofError
from worker.pot.recorder import POT_SUBDIR, ProofOfTraining, TrainingState, run_training
from worker.pot.replay import ReplayResult, replay_segment
from worker.pot.seeds import BatchSampler, derive_data_seed
from worker.pot.tensors import decimal_string, write_tensors

PARAM_NAMES = ("W1", "b1", "W2", "b2")


@dataclass(frozen=True)
class MLPConfig:
    examples: int = 2048
    features: int = 32
    hidden: int = 64
    classes: int = 4
    batch_size: int = 64
    lr: float = 0.05
    momentum: float = 0.9
    input_noise: float = 0.01  # augmentation noise: makes the RNG state part of the proof
    dtype: str = "float64"


def make_dataset(seed: int, cfg: MLPConfig) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic classification data labelled by a random teacher network."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(1,))))
    x = rng.standard_normal((cfg.examples, cfg.features)).astype(cfg.dtype)
    teacher = rng.standard_normal((cfg.features, cfg.classes))
    y = np.argmax(np.tanh(x @ teacher) + 0.1 * rng.standard_normal((cfg.examples, cfg.classes)), 1)
    return x, y.astype(np.int64)


class MLPTrainer:
    """Implements `worker.pot.recorder.Trainer`: SGD with momentum, softmax cross-entropy."""

    def __init__(self, x: np.ndarray, y: np.ndarray, cfg: MLPConfig, init_seed: int) -> None:
        self.x, self.y, self.cfg = x, y, cfg
        rng = np.random.Generator(
            np.random.PCG64(np.random.SeedSequence(init_seed, spawn_key=(2,)))
        )
        dt = np.dtype(cfg.dtype)
        w1 = rng.standard_normal((cfg.features, cfg.hidden)) / np.sqrt(cfg.features)
        w2 = rng.standard_normal((cfg.hidden, cfg.classes)) / np.sqrt(cfg.hidden)
        self.params: dict[str, np.ndarray] = {
            "W1": w1.astype(dt),
            "b1": np.zeros(cfg.hidden, dtype=dt),
            "W2": w2.astype(dt),
            "b2": np.zeros(cfg.classes, dtype=dt),
        }
        self.velocity = {name: np.zeros_like(p) for name, p in self.params.items()}
        self.noise = np.random.Generator(
            np.random.PCG64(np.random.SeedSequence(init_seed, spawn_key=(3,)))
        )

    def state(self) -> TrainingState:
        return TrainingState(
            params=self.params,
            optimizer={f"velocity.{k}": v for k, v in self.velocity.items()},
            rng={"noise": self.noise.bit_generator.state},
        )

    def restore(self, state: TrainingState) -> None:
        if set(state.params) != set(PARAM_NAMES):
            raise ValueError(f"checkpoint has parameters {sorted(state.params)}")
        self.params = {k: np.array(state.params[k], copy=True) for k in PARAM_NAMES}
        self.velocity = {
            k: np.array(state.optimizer[f"velocity.{k}"], copy=True) for k in PARAM_NAMES
        }
        self.noise.bit_generator.state = state.rng["noise"]

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = self.params
        h = np.tanh(x @ p["W1"] + p["b1"])
        return h, h @ p["W2"] + p["b2"]

    def train_step(self, step: int, indices: np.ndarray) -> float:
        cfg, p = self.cfg, self.params
        x = self.x[indices]
        if cfg.input_noise:
            x = x + cfg.input_noise * self.noise.standard_normal(x.shape).astype(x.dtype)
        y = self.y[indices]
        h, logits = self.forward(x)
        logits = logits - logits.max(axis=1, keepdims=True)
        exp = np.exp(logits)
        probs = exp / exp.sum(axis=1, keepdims=True)
        n = len(indices)
        loss = float(-np.log(probs[np.arange(n), y] + 1e-12).mean())
        d_logits = probs
        d_logits[np.arange(n), y] -= 1.0
        d_logits /= n
        grads = {
            "W2": h.T @ d_logits,
            "b2": d_logits.sum(axis=0),
        }
        d_h = (d_logits @ p["W2"].T) * (1.0 - h * h)
        grads["W1"] = x.T @ d_h
        grads["b1"] = d_h.sum(axis=0)
        lr = p["W1"].dtype.type(cfg.lr)
        mu = p["W1"].dtype.type(cfg.momentum)
        for name in PARAM_NAMES:
            v = self.velocity[name]
            v *= mu
            v += grads[name]
            p[name] -= lr * v
        return loss

    def accuracy(self) -> float:
        _, logits = self.forward(self.x)
        return float((np.argmax(logits, axis=1) == self.y).mean())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="numpy_mlp", description=(__doc__ or "").split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("train", "replay"):
        p = sub.add_parser(name)
        p.add_argument("--job-dir", type=Path, help=f"default: ${env.JOB_DIR}")
        p.add_argument("--seed", type=int, help=f"job seed; default: ${env.JOB_SEED}")
        p.add_argument("--nonce", help=f"claim nonce, hex; default: ${env.JOB_NONCE}")
        p.add_argument("--k", type=int, help=f"steps per checkpoint; default: ${env.POT_K}")
        p.add_argument("--examples", type=int, default=MLPConfig.examples)
        p.add_argument("--hidden", type=int, default=MLPConfig.hidden)
        p.add_argument("--batch-size", type=int, default=MLPConfig.batch_size)
        p.add_argument("--lr", type=float, default=MLPConfig.lr)
        if name == "train":
            p.add_argument("--steps", type=int, default=500)
        else:
            p.add_argument("--segment", type=int, required=True)
            p.add_argument("--root", help="the attested proof-of-training root (hex)")
            p.add_argument("--tolerance-ppm", type=int, default=0)
    return parser


def _job_env(args: argparse.Namespace) -> env.JobEnv:
    base = dict(os.environ)
    overrides = {
        env.JOB_DIR: args.job_dir,
        env.JOB_SEED: args.seed,
        env.JOB_NONCE: args.nonce,
        env.POT_K: args.k,
    }
    base.update({k: str(v) for k, v in overrides.items() if v is not None})
    return env.JobEnv.read(base)


def _trainer(job: env.JobEnv, cfg: MLPConfig) -> MLPTrainer:
    x, y = make_dataset(job.job_seed, cfg)
    return MLPTrainer(x, y, cfg, init_seed=job.job_seed)


def train(job: env.JobEnv, cfg: MLPConfig, steps: int) -> dict[str, object]:
    pot = ProofOfTraining.for_job(
        job.job_dir,
        job_seed=job.job_seed,
        nonce=job.nonce,
        steps_per_checkpoint=job.steps_per_checkpoint,
    )
    trainer = _trainer(job, cfg)
    sampler = BatchSampler(pot.data_seed, cfg.examples, cfg.batch_size)
    manifest = run_training(trainer, pot, sampler.indices, steps)
    results = job.job_dir / "results"
    results.mkdir(parents=True, exist_ok=True)
    metrics = {
        "accuracy": decimal_string(trainer.accuracy()),
        "final_loss": manifest.leaves[-1].loss,
        "steps": manifest.total_steps,
    }
    (results / "metrics.json").write_text(json.dumps(metrics, sort_keys=True) + "\n")
    write_tensors(results / "model.weights", trainer.params)
    return {"pot_root": manifest.root, "segments": manifest.segments, "metrics": metrics}


def replay(job: env.JobEnv, cfg: MLPConfig, segment: int, root: str | None) -> ReplayResult:
    trainer = _trainer(job, cfg)
    sampler = BatchSampler(derive_data_seed(job.job_seed, job.nonce), cfg.examples, cfg.batch_size)
    result = replay_segment(
        job.job_dir / POT_SUBDIR,
        segment,
        trainer,
        expected_root=root,
        expected_indices=sampler.indices,
    )
    return result


def train_arguments(commands: Sequence[Sequence[str]]) -> argparse.Namespace:
    """The flags of the job's `train` command (the first argv with a `train` sub-command)."""
    for argv in commands:
        if "train" in argv:
            rest = list(argv[list(argv).index("train") :])
            try:
                return _parser().parse_args(rest)
            except SystemExit as exc:  # argparse exits on bad flags; a replay must not
                raise ValueError(f"cannot parse the train command {rest!r}") from exc
    raise ValueError("the job's commands have no `train` sub-command")


def make_trainer(
    job: env.JobEnv, commands: Sequence[Sequence[str]]
) -> tuple[MLPTrainer, Callable[[int], np.ndarray]]:
    """The trainer of the job's `train` command, at the hyperparameters its flags set, and
    the data order (batch indices per step) derived from the job seed and claim nonce."""
    args = train_arguments(commands)
    cfg = MLPConfig(
        examples=args.examples, hidden=args.hidden, batch_size=args.batch_size, lr=args.lr
    )
    sampler = BatchSampler(derive_data_seed(job.job_seed, job.nonce), cfg.examples, cfg.batch_size)
    return _trainer(job, cfg), sampler.indices


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        job = _job_env(args)
    except env.JobEnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cfg = MLPConfig(
        examples=args.examples, hidden=args.hidden, batch_size=args.batch_size, lr=args.lr
    )
    if args.command == "train":
        print(json.dumps(train(job, cfg, args.steps), sort_keys=True))
        return 0
    try:
        result = replay(job, cfg, args.segment, args.root)
    except ProofError as exc:
        print(f"error: proof rejected: {exc}", file=sys.stderr)
        return 3
    print(json.dumps(result.to_json(), sort_keys=True))
    return 0 if result.passes(args.tolerance_ppm) else 1


if __name__ == "__main__":
    sys.exit(main())
