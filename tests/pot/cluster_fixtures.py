"""An honest data-parallel cluster for the cluster-proof tests, and the cheats to bend it.

Three (or two) nodes train the numpy MLP data-parallel through `pot.cluster_harness`, as
threads of this process (`LocalCluster`). A cheating node is played by swapping its
trainer (a faked or copied contribution), by what it sends into the all-gather (`tamper`),
or by its shard (other indices than its rank's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pot import cluster_harness
from pot.cluster import NodeProof, blame, cluster_data_seed, shard
from pot.cluster_harness import Contribution, LocalCluster, ShardTrainer, load_evidence, replay_node
from pot.examples.numpy_dp import DataParallelMLP
from pot.schedule import Schedule
from pot.trainer import TrainContext

SEED = 4321
SCHEDULE = Schedule(total_steps=24, steps_per_checkpoint=6, dataset_size=192, batch_size=24)
CONFIG = {"hidden": 16}


def nonces(world: int) -> list[bytes]:
    return [bytes([r + 1]) * 16 for r in range(world)]


def context(job_dir: Path, world: int) -> TrainContext:
    return TrainContext(
        job_dir=job_dir,
        job_seed=SEED,
        data_seed=cluster_data_seed(SEED, nonces(world)),
        schedule=SCHEDULE,
        config={**CONFIG, "world": world},
    )


class FakingMLP(DataParallelMLP):
    """Contributes a cheap made-up gradient (zeros) instead of its shard's."""

    def gradient(self, step: int, rank: int, indices: np.ndarray) -> Contribution:
        return 0.0, {k: np.zeros_like(v) for k, v in self.params.items()}


class CopyingMLP(DataParallelMLP):
    """Contributes rank 0's gradient (what another node computes) instead of its own."""

    def gradient(self, step: int, rank: int, indices: np.ndarray) -> Contribution:
        batch = self.ctx.schedule.sampler(self.ctx.data_seed).indices(step)
        return super().gradient(step, 0, shard(batch, 0, self.ctx.integer("world", 1)))


@dataclass(frozen=True)
class Cluster:
    root: Path
    proofs: dict[int, NodeProof]

    def pot_dir(self, rank: int) -> Path:
        return self.root / f"node{rank}" / "pot"

    def verdicts(self, segment: int, replay_from: int = 0) -> dict[int, str | None]:
        """Each node's fault for `segment`, by one replay from node `replay_from`'s files."""
        world = len(self.proofs)
        ctx = context(self.root / "verifier", world)
        report = replay_node(
            DataParallelMLP(ctx),
            ctx,
            self.pot_dir(replay_from),
            root=self.proofs[replay_from].root,
            segments=[segment],
        )
        replayed = report.results[0]
        evidence = {
            rank: load_evidence(self.pot_dir(rank), segment, root=proof.root)
            for rank, proof in self.proofs.items()
        }
        faults = blame(evidence, replayed)
        return {rank: faults.get(rank) for rank in self.proofs}


def train_cluster(
    root: Path,
    world: int = 3,
    *,
    trainers: dict[int, Callable[[TrainContext], ShardTrainer]] | None = None,
    tamper: Callable[[int, int, Contribution], Contribution] | None = None,
    shards: dict[int, Callable[[np.ndarray, int, int], np.ndarray]] | None = None,
) -> Cluster:
    build = trainers or {}
    local = LocalCluster(world, tamper=tamper)
    honest_shard = cluster_harness.shard

    def their_shard(indices: np.ndarray, rank: int, w: int) -> np.ndarray:
        own = (shards or {}).get(rank)
        return honest_shard(indices, rank, w) if own is None else own(indices, rank, w)

    def train(rank: int, gather: cluster_harness.Gather) -> NodeProof:
        ctx = context(root / f"node{rank}", world)
        trainer = build.get(rank, DataParallelMLP)(ctx)
        return cluster_harness.train_node(
            trainer, ctx, ctx.job_dir / "pot", rank=rank, nonces=nonces(world), gather=gather
        )

    cluster_harness.shard = their_shard  # type: ignore[assignment]
    try:
        proofs = local.run(train)
    finally:
        cluster_harness.shard = honest_shard  # type: ignore[assignment]
    return Cluster(root, proofs)
