"""A data-parallel job: the reference MLP (`pot.examples.numpy_mlp`) as a `ShardTrainer`.

Each rank's gradient is the mean over its shard; the input noise of a rank's step is drawn
from (job seed, step, rank), so a gradient depends on the state, the step and the shard
only, and a replay can recompute every rank's in turn from the same state
(`pot.cluster_harness`). Standard library + numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pot.examples.numpy_mlp import PARAM_NAMES, MLPTrainer


class DataParallelMLP(MLPTrainer):
    """`MLPTrainer`'s model and data, trained data-parallel (gradient, then apply)."""

    def gradient(
        self, step: int, rank: int, indices: np.ndarray
    ) -> tuple[float, dict[str, np.ndarray]]:
        cfg, p = self.cfg, self.params
        x = self.x[indices]
        if cfg.input_noise:
            seq = np.random.SeedSequence(self.ctx.job_seed, spawn_key=(4, step, rank))
            noise = np.random.Generator(np.random.PCG64(seq))
            x = x + cfg.input_noise * noise.standard_normal(x.shape).astype(x.dtype)
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
        d_h = (d_logits @ p["W2"].T) * (1.0 - h * h)
        return loss, {
            "W1": x.T @ d_h,
            "b1": d_h.sum(axis=0),
            "W2": h.T @ d_logits,
            "b2": d_logits.sum(axis=0),
        }

    def apply(self, step: int, gradient: Mapping[str, np.ndarray]) -> None:
        p = self.params
        lr = p["W1"].dtype.type(self.cfg.lr)
        mu = p["W1"].dtype.type(self.cfg.momentum)
        for name in PARAM_NAMES:
            v = self.velocity[name]
            v *= mu
            v += gradient[name]
            p[name] -= lr * v
        self.last = (step, self.last[1])
