"""A data-parallel PyTorch job whose nodes a verifier can spot-check on their shards.

The trainer (`TorchDataParallelMLP`, a `pot.torch_adapter.TorchShardTrainer`) is what the
spec names (`proof.trainer`) and what a verifier replays a node's segments with (`python -m
pot replay-node`); `main` is the job's command, run by the worker under torchrun on every
node: it joins the process group, learns every node's claim nonce (all-gathered as bytes),
and trains through `pot.cluster_harness.train_node` with the gloo/NCCL all-gather
(`pot.torch_adapter.distributed_gather`), recording the node's proof in `<job dir>/pot/`
its `results/metrics.json` and, when the worker asks for one, the final weights (the same
bytes on every node).

    torchrun ... --no-python python3 -m pot.examples.torch_dp

One process per node (`nproc_per_node` 1): a node is one rank of the proof.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pot import env
from pot.manifest import Manifest
from pot.torch_adapter import TorchShardTrainer, configure_determinism, distributed_gather
from pot.trainer import TrainContext


class TorchDataParallelMLP(TorchShardTrainer):
    """A small MLP with dropout on synthetic data drawn from the job seed."""

    def __init__(self, ctx: TrainContext) -> None:
        import torch

        configure_determinism(ctx.job_seed)
        hidden = ctx.integer("hidden", 16)
        gen = torch.Generator().manual_seed(ctx.job_seed % 2**63)
        n, features, classes = ctx.schedule.dataset_size, 8, 3
        self.x = torch.randn(n, features, generator=gen, dtype=torch.float64)
        teacher = torch.randn(features, classes, generator=gen, dtype=torch.float64)
        self.y = (self.x @ teacher).argmax(dim=1)
        model = torch.nn.Sequential(
            torch.nn.Linear(features, hidden),
            torch.nn.Tanh(),
            torch.nn.Dropout(0.1),
            torch.nn.Linear(hidden, classes),
        ).double()
        with torch.no_grad():
            # From the job seed's own generator, not torch's global one (which other
            # ranks of the same process may be drawing from).
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.3)
        optimizer = torch.optim.SGD(model.parameters(), lr=ctx.decimal("lr", "0.1"), momentum=0.9)
        super().__init__(
            model,
            optimizer,
            torch.nn.functional.cross_entropy,
            lambda idx: (self.x[torch.from_numpy(idx)], self.y[torch.from_numpy(idx)]),
            seed=ctx.job_seed,
        )


def gather_nonces(nonce: bytes) -> list[bytes]:
    """Every node's claim nonce, in rank order (fixed-size byte tensors, never pickles)."""
    import torch
    import torch.distributed as dist

    size = torch.tensor([len(nonce)], dtype=torch.int64)
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, size)
    longest = int(max(s.item() for s in sizes))
    padded = torch.zeros(longest, dtype=torch.uint8)
    padded[: len(nonce)] = torch.frombuffer(bytearray(nonce), dtype=torch.uint8)
    parts = [torch.zeros(longest, dtype=torch.uint8) for _ in sizes]
    dist.all_gather(parts, padded)
    return [bytes(p[: int(s.item())].tolist()) for p, s in zip(parts, sizes, strict=True)]


def run_node(job: env.JobEnv, rank: int) -> Any:
    """Train as rank `rank` of the process group already joined; the node's proof."""
    from pot.cluster import cluster_data_seed
    from pot.cluster_harness import train_node

    nonces = gather_nonces(job.nonce)
    assert job.schedule is not None
    ctx = TrainContext(
        job_dir=job.job_dir,
        job_seed=job.job_seed,
        data_seed=cluster_data_seed(job.job_seed, nonces),
        schedule=job.schedule,
        config=dict(job.config),
    )
    trainer = TorchDataParallelMLP(ctx)
    proof = train_node(
        trainer,
        ctx,
        Path(job.job_dir) / "pot",
        rank=rank,
        nonces=nonces,
        gather=distributed_gather(),
    )
    ctx.results_dir.mkdir(parents=True, exist_ok=True)
    leaves = Manifest.load(Path(job.job_dir) / "pot").leaves
    metrics = {"final_loss": leaves[-1].loss, "steps": leaves[-1].step, "rank": rank}
    (ctx.results_dir / "metrics.json").write_text(json.dumps(metrics, sort_keys=True) + "\n")
    out = os.environ.get(env.CHECKPOINT_OUT)
    if out:
        from pot.tensors import write_tensors

        write_tensors(Path(out), trainer.state().params)
    return proof


def main() -> int:
    import torch.distributed as dist

    dist.init_process_group("gloo")
    try:
        job = env.JobEnv.read(os.environ)
        run_node(job, dist.get_rank())
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
