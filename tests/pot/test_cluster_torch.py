"""The cluster proof over PyTorch: a torch data-parallel trainer (`TorchShardTrainer`)
replays bit for bit on the CPU, a faking node is blamed alone, and the all-gather over
torch.distributed (gloo, two processes) records the very proof the in-process cluster does."""

from __future__ import annotations

import importlib.util
import multiprocessing
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pot.cluster import blame, cluster_data_seed, steps_path
from pot.cluster_harness import (
    Contribution,
    LocalCluster,
    load_evidence,
    load_node,
    replay_node,
    train_node,
)
from pot.env import JobEnv
from pot.schedule import Schedule
from pot.trainer import TrainContext

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed"
)

SEED = 99
SCHEDULE = Schedule(total_steps=12, steps_per_checkpoint=4, dataset_size=96, batch_size=16)
NONCES = [bytes([7 + r]) * 16 for r in range(2)]


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Iterator[None]:
    """Tiny tensors on a busy machine: torch's intra-op threads only spin (a contribution
    took 60 ms with two, 5 ms with one). The gloo nodes keep torch's default, so the
    comparison with them also shows the thread count leaves the bits alone."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _ctx(job_dir: Path) -> TrainContext:
    return TrainContext(
        job_dir=job_dir,
        job_seed=SEED,
        data_seed=cluster_data_seed(SEED, NONCES),
        schedule=SCHEDULE,
        config={"hidden": 8},
    )


def _local(root: Path, faker: int | None = None) -> dict[int, object]:
    from pot.examples.torch_dp import TorchDataParallelMLP

    class Faking(TorchDataParallelMLP):
        def gradient(self, step: int, rank: int, indices: np.ndarray) -> Contribution:
            loss, grads = super().gradient(step, rank, indices[:1])  # one example, not its shard
            return loss, grads

    def train(rank: int, gather: object) -> object:
        ctx = _ctx(root / f"node{rank}")
        trainer = (Faking if rank == faker else TorchDataParallelMLP)(ctx)
        return train_node(
            trainer, ctx, ctx.job_dir / "pot", rank=rank, nonces=NONCES, gather=gather
        )  # type: ignore[arg-type]

    return LocalCluster(2).run(train)  # type: ignore[arg-type]


def _faults(root: Path, proofs: dict[int, object], segment: int) -> dict[int, str]:
    from pot.examples.torch_dp import TorchDataParallelMLP

    ctx = _ctx(root / "verifier")
    report = replay_node(
        TorchDataParallelMLP(ctx),
        ctx,
        root / "node0" / "pot",
        root=proofs[0].root,
        segments=[segment],  # type: ignore[attr-defined]
    )
    evidence = {r: load_evidence(root / f"node{r}" / "pot", segment) for r in proofs}
    return blame(evidence, report.results[0])


def test_a_torch_cluster_replays_and_the_faking_node_is_blamed_alone(tmp_path: Path) -> None:
    honest = _local(tmp_path / "honest")
    assert _faults(tmp_path / "honest", honest, 2) == {}
    faked = _local(tmp_path / "faked", faker=1)
    faults = _faults(tmp_path / "faked", faked, 2)
    assert set(faults) == {1} and "not the gradient of its shard" in faults[1]


def _distributed_node(rank: int, init: str, root: str) -> None:
    import torch.distributed as dist

    from pot.examples.torch_dp import run_node

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        job = JobEnv(
            job_dir=Path(root) / f"node{rank}",
            job_seed=SEED,
            nonce=NONCES[rank],
            steps_per_checkpoint=SCHEDULE.steps_per_checkpoint,
            schedule=SCHEDULE,
            config={"hidden": 8},
        )
        run_node(job, rank)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_the_gloo_all_gather_records_the_same_proof_as_the_local_cluster(tmp_path: Path) -> None:
    _local(tmp_path / "local")
    spawn = multiprocessing.get_context("spawn")
    init = f"file://{tmp_path / 'rendezvous'}"
    procs = [
        spawn.Process(target=_distributed_node, args=(r, init, str(tmp_path / "dist")))
        for r in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0, 0]
    dist = {r: load_node(tmp_path / "dist" / f"node{r}" / "pot") for r in range(2)}
    for rank, (_proof, manifest) in dist.items():
        _, mine = load_node(tmp_path / "local" / f"node{rank}" / "pot")
        # The same weights at every checkpoint, and the same contributions at every step
        # (the RNG files differ: a process's global generators are its own).
        assert [leaf.weights for leaf in manifest.leaves] == [leaf.weights for leaf in mine.leaves]
        for segment in range(1, SCHEDULE.segments + 1):
            got = steps_path(tmp_path / "dist" / f"node{rank}" / "pot", segment).read_bytes()
            want = steps_path(tmp_path / "local" / f"node{rank}" / "pot", segment).read_bytes()
            assert got == want, (rank, segment)
    assert _faults(tmp_path / "dist", {r: p for r, (p, _) in dist.items()}, 3) == {}


def test_a_rank_restoring_its_checkpoint_leaves_another_ranks_contribution_alone(
    tmp_path: Path,
) -> None:
    """Ranks of a local cluster are threads sharing torch's generators: another rank
    restoring its checkpoint (which sets them) or seeding them while this rank draws its
    dropout masks must not change this rank's contribution, or no replay reproduces it (the
    flaky replays of issue 12: the first step of a segment differed)."""
    import threading

    from pot.cluster import contribution_hash
    from pot.examples.torch_dp import TorchDataParallelMLP
    from pot.torch_adapter import configure_determinism

    ctx = _ctx(tmp_path)
    mine, other = TorchDataParallelMLP(ctx), TorchDataParallelMLP(ctx)
    indices = np.arange(8)
    alone = contribution_hash(mine.gradient(5, 0, indices)[1])
    checkpoint = other.state()
    started, stop = threading.Event(), threading.Event()

    def restoring() -> None:  # the other rank opening its segments, over and over
        while not stop.is_set():
            other.restore(checkpoint)
            configure_determinism(SEED)
            started.set()

    thread = threading.Thread(target=restoring)
    thread.start()
    try:
        assert started.wait(60)
        seen = {contribution_hash(mine.gradient(5, 0, indices)[1]) for _ in range(40)}
    finally:
        stop.set()
        thread.join(60)
    assert seen == {alone}
