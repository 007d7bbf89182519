"""PyTorch adapter: a `pot.trainer.Trainer` over a torch model and optimizer (the `torch`
extra; torch is imported lazily). A job's trainer builds its model and hands it over:

    from pot.torch_adapter import TorchTrainer, configure_determinism

    class Trainer(TorchTrainer):
        def __init__(self, ctx):
            configure_determinism(ctx.job_seed)       # before anything touches CUDA
            model = ...; optimizer = ...
            super().__init__(model, optimizer, loss_fn, batch=lambda idx: (x[idx], y[idx]))

Replays are bitwise only on the same GPU model, toolkit and image (cuBLAS reproducibility);
elsewhere the job's tolerance applies. bfloat16 tensors are stored as their raw 16-bit
patterns (numpy has no bfloat16), so their hashes are exact but distances are not meaningful.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from pot.trainer import TrainingState

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

CUBLAS_WORKSPACE_CONFIG = ":4096:8"
# Torch's (and numpy's, Python's) default generators are the process's, shared by its
# threads: ranks of a `pot.cluster_harness.LocalCluster` are threads of one process, and one
# rank restoring a checkpoint (which sets the generators) or seeding them while another
# draws its dropout masks would change the other's contribution, so that no replay
# reproduces it. Everything here that seeds, reads or sets them holds this lock, and
# `TorchShardTrainer.gradient` holds it for its whole seeded pass.
_RNG_LOCK = threading.RLock()


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError(
            "pot.torch_adapter needs PyTorch: pip install 'proofnet-pot[torch]'"
        ) from exc
    return torch


def configure_determinism(seed: int) -> None:
    """The notes' determinism knobs. Must run before CUDA is initialised."""
    torch = _torch()
    current = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if current not in (":4096:8", ":16:8"):
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            raise RuntimeError(
                "CUDA is already initialised without CUBLAS_WORKSPACE_CONFIG=:4096:8; "
                "call configure_determinism() before any CUDA work"
            )
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE_CONFIG
    with _RNG_LOCK:
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


def seeded_generator(seed: int) -> torch.Generator:
    """For DataLoader(generator=...)."""
    torch = _torch()
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


def worker_init_fn(worker_id: int) -> None:
    """For DataLoader(worker_init_fn=...): seed each loader process from torch's seed."""
    torch = _torch()
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


def tensor_to_numpy(tensor: torch.Tensor) -> np.ndarray:
    torch = _torch()
    t = tensor.detach()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return np.array(t.cpu().numpy(), copy=True)


def numpy_to_tensor(array: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    torch = _torch()
    t = torch.from_numpy(np.array(array, copy=True))
    if like.dtype == torch.bfloat16:
        t = t.view(torch.bfloat16)
    return t.to(device=like.device, dtype=like.dtype)


def _rng_state() -> dict[str, Any]:
    with _RNG_LOCK:
        return _read_rng_state()


def _read_rng_state() -> dict[str, Any]:
    torch = _torch()
    np_state = cast(tuple[Any, ...], np.random.get_state(legacy=True))
    py_state = random.getstate()
    state: dict[str, Any] = {
        "torch_cpu": bytes(torch.get_rng_state().numpy()).hex(),
        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
        "python": [py_state[0], list(py_state[1]), py_state[2]],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["torch_cuda"] = [bytes(s.numpy()).hex() for s in torch.cuda.get_rng_state_all()]
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    with _RNG_LOCK:
        _write_rng_state(state)


def _write_rng_state(state: dict[str, Any]) -> None:
    torch = _torch()
    cpu = np.frombuffer(bytes.fromhex(state["torch_cpu"]), dtype=np.uint8).copy()
    torch.set_rng_state(torch.from_numpy(cpu))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "torch_cuda" in state:
        cuda_states = [
            torch.from_numpy(np.frombuffer(bytes.fromhex(h), dtype=np.uint8).copy())
            for h in state["torch_cuda"]
        ]
        torch.cuda.set_rng_state_all(cuda_states)


class TorchTrainer:
    """`Trainer` over a torch model and optimizer.

    `batch(indices)` returns (inputs, targets) already on the model's device; the step is
    zero_grad, forward, `loss_fn(outputs, targets)`, backward, optimizer.step. Weights are the
    model's full state_dict (parameters and buffers). The optimizer's tensors go to the
    optimizer file; its non-tensor state (param groups, scalars) and every RNG go to the
    committed RNG/state JSON.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        loss_fn: Callable[[Any, Any], torch.Tensor],
        batch: Callable[[np.ndarray], tuple[Any, Any]],
    ) -> None:
        self.model, self.optimizer, self.loss_fn, self.batch = model, optimizer, loss_fn, batch

    def state(self) -> TrainingState:
        torch = _torch()
        params = {k: tensor_to_numpy(v) for k, v in self.model.state_dict().items()}
        opt = self.optimizer.state_dict()
        arrays: dict[str, np.ndarray] = {}
        meta: dict[str, dict[str, Any]] = {}
        for pid, entries in opt["state"].items():
            for key, value in entries.items():
                if isinstance(value, torch.Tensor):
                    arrays[f"state.{pid}.{key}"] = tensor_to_numpy(value)
                    meta.setdefault(str(pid), {})[key] = {
                        "tensor": True,
                        "dtype": str(value.dtype).removeprefix("torch."),
                        "device": str(value.device),
                    }
                else:
                    meta.setdefault(str(pid), {})[key] = {"tensor": False, "value": value}
        rng = _rng_state()
        rng["optimizer"] = {"param_groups": opt["param_groups"], "state": meta}
        return TrainingState(params=params, optimizer=arrays, rng=rng)

    def restore(self, state: TrainingState) -> None:
        torch = _torch()
        current = self.model.state_dict()
        if set(current) != set(state.params):
            raise ValueError("checkpoint parameters do not match the model's state_dict")
        self.model.load_state_dict(
            {k: numpy_to_tensor(state.params[k], current[k]) for k in current}, strict=True
        )
        opt_meta = state.rng["optimizer"]
        opt_state: dict[int, dict[str, Any]] = {}
        for pid, entries in opt_meta["state"].items():
            restored: dict[str, Any] = {}
            for key, info in entries.items():
                if info["tensor"]:
                    like = torch.empty(
                        0, dtype=getattr(torch, info["dtype"]), device=info["device"]
                    )
                    restored[key] = numpy_to_tensor(state.optimizer[f"state.{pid}.{key}"], like)
                else:
                    restored[key] = info["value"]
            opt_state[int(pid)] = restored
        self.optimizer.load_state_dict(
            {"state": opt_state, "param_groups": opt_meta["param_groups"]}
        )
        _set_rng_state(state.rng)

    def train_step(self, step: int, indices: np.ndarray) -> float:
        self.model.train()
        inputs, targets = self.batch(indices)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(inputs), targets)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach().item())


SHARD_SEED_DOMAIN = b"proofnet/pot/torch-shard-seed/v1"


def shard_seed(seed: int, step: int, rank: int) -> int:
    """The torch seed of rank `rank`'s gradient at `step` (dropout and the like): the same
    in training and in a replay, which computes every rank's gradient in turn."""
    import hashlib

    material = SHARD_SEED_DOMAIN + b"".join(v.to_bytes(8, "big") for v in (seed, step, rank))
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big") % 2**63


class TorchShardTrainer(TorchTrainer):
    """A data-parallel trainer (`pot.cluster_harness.ShardTrainer`) over a torch model.

    `gradient` runs forward and backward on a shard at the current state with torch's
    random generators forked and seeded from (`seed`, step, rank), and leaves the state as
    it was (the gradients are copied out and cleared); `apply` sets the cluster's averaged
    gradient on the parameters and steps the optimizer. The model's buffers must not change
    in a forward pass (no batch-norm running statistics in training mode): a replay
    computes every rank's gradient from the same state. Float parameters only (bfloat16
    gradients are not averaged as numbers here)."""

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        loss_fn: Callable[[Any, Any], torch.Tensor],
        batch: Callable[[np.ndarray], tuple[Any, Any]],
        *,
        seed: int = 0,
    ) -> None:
        super().__init__(model, optimizer, loss_fn, batch)
        self.seed = seed

    def gradient(self, step: int, rank: int, indices: np.ndarray) -> tuple[float, dict[str, Any]]:
        torch = _torch()
        self.model.train()
        # Torch's generator is the process's: ranks run as threads of one process
        # (`LocalCluster`) take turns, and nothing of this module seeds, reads or sets the
        # generators meanwhile (a rank restoring its checkpoint did, once: `_RNG_LOCK`).
        with _RNG_LOCK, torch.random.fork_rng(devices=[]):
            torch.manual_seed(shard_seed(self.seed, step, rank))
            inputs, targets = self.batch(indices)
            self.optimizer.zero_grad(set_to_none=True)
            loss = self.loss_fn(self.model(inputs), targets)
            loss.backward()
        grads = {
            name: tensor_to_numpy(p.grad)
            if p.grad is not None
            else np.zeros_like(tensor_to_numpy(p))
            for name, p in self.model.named_parameters()
        }
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.detach().item()), grads

    def apply(self, step: int, gradient: Any) -> None:
        for name, p in self.model.named_parameters():
            p.grad = numpy_to_tensor(gradient[name], p)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def distributed_gather(group: Any = None) -> Callable[[int, Any], list[Any]]:
    """A `pot.cluster_harness.Gather` over torch.distributed (gloo or NCCL): every rank's
    loss and gradient, in rank order, exchanged as plain tensors with `all_gather` (never
    pickled objects, which would run a peer's code); every rank's gradients must have the
    same names, shapes and dtypes."""
    torch = _torch()
    dist = torch.distributed

    def gather(step: int, contribution: Any) -> list[Any]:
        loss, grads = contribution
        world = dist.get_world_size(group)
        losses = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
        dist.all_gather(losses, torch.tensor([float(loss)], dtype=torch.float64), group=group)
        out: list[dict[str, np.ndarray]] = [{} for _ in range(world)]
        for name in sorted(grads):
            local = torch.from_numpy(np.ascontiguousarray(grads[name]))
            parts = [torch.empty_like(local) for _ in range(world)]
            dist.all_gather(parts, local, group=group)
            for r, part in enumerate(parts):
                out[r][name] = part.numpy().copy()
        return [(float(losses[r].item()), out[r]) for r in range(world)]

    return gather
