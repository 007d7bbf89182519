"""A reference training job: a one-hidden-layer MLP in numpy, trained by the harness.

The job's spec names the trainer and its configuration; the harness trains it (on a
worker) and replays its segments (on a verifier) through the same calls:

    "proof": {"trainer": "mlp:MLPTrainer",           # a repository module re-exporting it
              "config": {"hidden": 64, "lr": "0.05"},
              "schedule": {"steps": 500, "dataset_size": 2048, "batch_size": 64},
              "steps_per_checkpoint": 100, ...}

The data set is synthetic (a random teacher network drawn from the job seed, as many
examples as the schedule's dataset_size), so the job needs no download. `finish` writes
`results/metrics.json` and `results/model.weights`. `MLPModel` is the numerics, shared
with the relay example.

Standard library + numpy only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pot.tensors import decimal_string, write_tensors
from pot.trainer import TrainContext, TrainingState

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


class MLPModel:
    """The numerics: SGD with momentum, softmax cross-entropy (a `pot.trainer.Trainer`)."""

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
        for name in PARAM_NAMES:
            got, want = state.params[name], self.params[name]
            if got.shape != want.shape or got.dtype != want.dtype:
                raise ValueError(
                    f"checkpoint {name} is {got.dtype}{list(got.shape)}, the model's "
                    f"{want.dtype}{list(want.shape)}"
                )
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


class MLPTrainer(MLPModel):
    """The harness's trainer: configuration from `ctx.config` (hidden, lr, momentum,
    input_noise as integers or decimal strings), data and initialisation from the job seed,
    batch size and data set size from the schedule."""

    def __init__(self, ctx: TrainContext) -> None:
        cfg = MLPConfig(
            examples=ctx.schedule.dataset_size,
            features=ctx.integer("features", MLPConfig.features),
            hidden=ctx.integer("hidden", MLPConfig.hidden),
            classes=ctx.integer("classes", MLPConfig.classes),
            batch_size=ctx.schedule.batch_size,
            lr=ctx.decimal("lr", str(MLPConfig.lr)),
            momentum=ctx.decimal("momentum", str(MLPConfig.momentum)),
            input_noise=ctx.decimal("input_noise", str(MLPConfig.input_noise)),
        )
        x, y = make_dataset(ctx.job_seed, cfg)
        super().__init__(x, y, cfg, init_seed=ctx.job_seed)
        self.ctx = ctx
        self.last = (0, float("nan"))

    def train_step(self, step: int, indices: np.ndarray) -> float:
        loss = super().train_step(step, indices)
        self.last = (step, loss)
        return loss

    def finish(self) -> Mapping[str, object]:
        results = self.ctx.results_dir
        results.mkdir(parents=True, exist_ok=True)
        metrics = {
            "accuracy": decimal_string(self.accuracy()),
            "final_loss": decimal_string(self.last[1]),
            "steps": self.last[0],
        }
        (results / "metrics.json").write_text(json.dumps(metrics, sort_keys=True) + "\n")
        write_tensors(results / "model.weights", self.params)
        return metrics
