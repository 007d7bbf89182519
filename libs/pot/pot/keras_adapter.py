"""TensorFlow/Keras adapter: a `pot.trainer.Trainer` over a Keras model and optimizer (the
`tensorflow` extra; TensorFlow is imported lazily). A job's trainer builds its model and
hands it over:

    from pot.keras_adapter import KerasTrainer, configure_determinism

    class Trainer(KerasTrainer):
        def __init__(self, ctx):
            configure_determinism(ctx.job_seed)       # before the model is built
            model = keras.Sequential([...]); model.build((None, features))
            super().__init__(model, keras.optimizers.Adam(1e-3),
                             keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                             batch=lambda idx: (x[idx], y[idx]))

The weights are all of the model's variables (trainable, non-trainable such as batch-norm
statistics, and the states of its layers' seed generators, so dropout replays); the
optimizer's variables (iterations, moments) go to the optimizer file; Python's and numpy's
generators to the committed RNG state. Variables are named by their position and the last word
of their name, so two builds of the same model name them alike. One step is a compiled `tf.function`:
gradient tape, loss, `apply_gradients`. Bitwise replays need the same device class and
image, as for PyTorch; `configure_determinism` turns on TensorFlow's op determinism.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from pot.trainer import TrainingState


def _tf() -> Any:
    try:
        import tensorflow as tf
    except ImportError as exc:  # pragma: no cover - exercised only without tensorflow
        raise ImportError(
            "pot.keras_adapter needs TensorFlow: pip install 'proofnet-pot[tensorflow]'"
        ) from exc
    return tf


def configure_determinism(seed: int) -> None:
    """The notes' determinism knobs: seed Python, numpy, TensorFlow and Keras, and make
    TensorFlow's ops deterministic. Call before building the model."""
    tf = _tf()
    tf.keras.utils.set_random_seed(seed % 2**32)
    tf.config.experimental.enable_op_determinism()


def _names(variables: list[Any], prefix: str) -> list[str]:
    # Position and the last word of the name ("kernel", "momentum"): full names hold Keras'
    # automatic numbering ("dense_3", "sequential_1_dense_3_kernel_momentum"), which differs
    # between two builds of the same model in one process.
    return [
        f"{prefix}{i:05d}/{str(v.name).rsplit('/', 1)[-1].rsplit('_', 1)[-1]}"
        for i, v in enumerate(variables)
    ]


def _rng_state() -> dict[str, Any]:
    np_state = cast(tuple[Any, ...], np.random.get_state(legacy=True))
    py_state = random.getstate()
    return {
        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
        "python": [py_state[0], list(py_state[1]), py_state[2]],
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


class KerasTrainer:
    """`Trainer` over a built Keras model, its optimizer, a loss `loss_fn(y_true, y_pred)` and
    `batch(indices) -> (inputs, targets)`."""

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        loss_fn: Callable[[Any, Any], Any],
        batch: Callable[[np.ndarray], tuple[Any, Any]],
    ) -> None:
        tf = _tf()
        if not model.built:
            raise ValueError("build the model (model.build(input_shape)) before training it")
        self.model, self.optimizer, self.loss_fn, self.batch = model, optimizer, loss_fn, batch
        # Optimizer slots exist before the first step, so checkpoint 0 holds them too.
        optimizer.build(model.trainable_variables)

        @tf.function(reduce_retracing=True)
        def step(inputs: Any, targets: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = loss_fn(targets, model(inputs, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        self._step = step

    def _variables(self) -> tuple[list[Any], list[Any]]:
        return list(self.model.variables), list(self.optimizer.variables)

    def state(self) -> TrainingState:
        weights, slots = self._variables()
        params = {
            n: np.array(v.numpy(), copy=True)
            for n, v in zip(_names(weights, "w"), weights, strict=True)
        }
        optimizer = {
            n: np.array(v.numpy(), copy=True)
            for n, v in zip(_names(slots, "o"), slots, strict=True)
        }
        return TrainingState(params=params, optimizer=optimizer, rng=_rng_state())

    def restore(self, state: TrainingState) -> None:
        weights, slots = self._variables()
        for names, variables, arrays in (
            (_names(weights, "w"), weights, state.params),
            (_names(slots, "o"), slots, state.optimizer),
        ):
            if set(names) != set(arrays):
                raise ValueError("the checkpoint's variables are not the model's and optimizer's")
            for name, variable in zip(names, variables, strict=True):
                value = arrays[name]
                if tuple(value.shape) != tuple(variable.shape):
                    raise ValueError(f"{name}: checkpoint shape {value.shape} != {variable.shape}")
                variable.assign(value)
        _set_rng_state(state.rng)

    def train_step(self, step: int, indices: np.ndarray) -> float:
        inputs, targets = self.batch(indices)
        return float(self._step(inputs, targets).numpy())
