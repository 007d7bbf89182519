"""Data-parallel training with a node's proof, and the replay of a cluster segment.

A data-parallel job implements `ShardTrainer`: the usual state/restore, the gradient of a
shard at the current state (without changing the state: the replay computes every rank's
gradient in turn from the same state) and the application of the averaged gradient. The
harness draws each step's batch from the cluster's data seed, gives each rank its shard
(`pot.cluster.shard`), all-gathers the contributions through `Gather` (torch.distributed's
`all_gather_object` on a cluster; `LocalCluster` runs the ranks as threads in one process),
averages them with `pot.cluster.average` and applies the mean: `train_node` records the
node's checkpoints with the ordinary recorder and its commitments in `cluster.json`.

`replay_node` re-runs drawn segments of one node's proof in one process: from the committed
opening checkpoint, every step recomputes each rank's contribution in rank order, averages
them exactly as training did and applies the mean; it reports every rank's shard and
contribution digests and the weights reached (`pot.cluster.SegmentReplay`). Judging the
report against the nodes' commitments is `pot.cluster.node_fault`: the verifier reports
what it computed, it judges nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from pot.cluster import (
    CLUSTER_NAME,
    NodeEvidence,
    NodeProof,
    NodeSegment,
    SegmentReplay,
    StepRecord,
    average,
    cluster_data_seed,
    contribution_hash,
    shard,
    steps_path,
)
from pot.harness import check_structure, open_checkpoint
from pot.indices import SegmentIndices
from pot.manifest import Manifest, ProofError
from pot.recorder import ProofOfTraining
from pot.replay import load_checkpoint, load_leaf
from pot.tensors import tensors_hash
from pot.trainer import TrainContext, TrainingState

Gradient = Mapping[str, np.ndarray]
# (the rank's loss on its shard, its gradient)
Contribution = tuple[float, Gradient]
# (step, this rank's contribution) -> every rank's contribution, in rank order
Gather = Callable[[int, Contribution], Sequence[Contribution]]


class ShardTrainer(Protocol):
    """What a data-parallel job implements (see the module doc)."""

    def state(self) -> TrainingState: ...

    def restore(self, state: TrainingState) -> None: ...

    def gradient(self, step: int, rank: int, indices: np.ndarray) -> Contribution:
        """Loss and gradient of the examples at `indices` (rank `rank`'s shard of `step`),
        at the current state, leaving the state unchanged (randomness from step and rank)."""
        ...

    def apply(self, step: int, gradient: Gradient) -> None:
        """One optimiser step with the cluster's averaged gradient."""
        ...


def _mean_loss(contributions: Sequence[Contribution]) -> float:
    total = 0.0
    for loss, _ in contributions:
        total += float(loss)
    return total / len(contributions)


def train_node(
    trainer: ShardTrainer,
    ctx: TrainContext,
    pot_dir: Path,
    *,
    rank: int,
    nonces: Sequence[bytes],
    gather: Gather,
) -> NodeProof:
    """Train the schedule as rank `rank` of a `len(nonces)`-node cluster; writes the node's
    checkpoints, manifest and `cluster.json` into `pot_dir` and returns its proof."""
    pot_dir = Path(pot_dir)
    world = len(nonces)
    if ctx.data_seed != cluster_data_seed(ctx.job_seed, nonces):
        raise ProofError("the data seed is not the cluster's (job seed and every node's nonce)")
    schedule = ctx.schedule
    sampler = schedule.sampler(ctx.data_seed)
    recorder = ProofOfTraining(
        pot_dir, steps_per_checkpoint=schedule.steps_per_checkpoint, data_seed=ctx.data_seed
    )
    recorder.start(trainer.state())
    committed: list[NodeSegment] = []
    for segment in range(1, schedule.segments + 1):
        leaf = recorder.leaves[segment - 1]
        open_checkpoint(trainer, load_leaf(pot_dir, leaf, segment - 1), leaf.weights, segment - 1)
        mine = SegmentIndices()
        steps: list[tuple[int, tuple[str, ...]]] = []
        for step in schedule.segment_steps(segment):
            indices = sampler.indices(step)
            own = shard(indices, rank, world)
            everyone = gather(step, trainer.gradient(step, rank, own))
            if len(everyone) != world:
                raise ProofError(f"the all-gather returned {len(everyone)} of {world} ranks")
            mine.add(step, own)
            steps.append((step, tuple(contribution_hash(g) for _, g in everyone)))
            trainer.apply(step, average([g for _, g in everyone]))
            recorder.record_step(indices, _mean_loss(everyone))
        recorder.commit(trainer.state())
        record = StepRecord(world, tuple(steps))
        steps_path(pot_dir, segment).write_bytes(record.encode())
        committed.append(NodeSegment(mine.hexdigest(), record.digest))
    manifest = recorder.finish(trainer.state())
    proof = NodeProof(rank, world, tuple(n.hex() for n in nonces), manifest.root, tuple(committed))
    (pot_dir / CLUSTER_NAME).write_bytes(proof.encode())
    return proof


def load_node(pot_dir: Path, *, root: str | None = None) -> tuple[NodeProof, Manifest]:
    """A node's proof and manifest from `pot_dir`, checked against `root` and each other."""
    pot_dir = Path(pot_dir)
    try:
        raw = (pot_dir / CLUSTER_NAME).read_bytes()
    except OSError as exc:
        raise ProofError(f"cannot read {CLUSTER_NAME}: {exc}") from exc
    proof = NodeProof.from_bytes(raw, expected_root=root)
    manifest = Manifest.load(pot_dir, expected_root=proof.manifest_root)
    if len(proof.segments) != manifest.segments:
        raise ProofError(
            f"{CLUSTER_NAME} commits {len(proof.segments)} segments, the manifest "
            f"{manifest.segments}"
        )
    return proof, manifest


def load_evidence(pot_dir: Path, segment: int, *, root: str | None = None) -> NodeEvidence:
    """What a judge needs of one node for `segment`: its proof, its step record of the
    segment (checked against the proof) and the closing checkpoint its manifest commits."""
    proof, manifest = load_node(pot_dir, root=root)
    if not 1 <= segment <= len(proof.segments):
        raise ProofError(f"node {proof.rank} commits no segment {segment}")
    try:
        raw = steps_path(Path(pot_dir), segment).read_bytes()
    except OSError as exc:
        raise ProofError(f"cannot read node {proof.rank}'s step record: {exc}") from exc
    record = StepRecord.decode(raw, proof.world, expected=proof.segments[segment - 1].steps)
    return NodeEvidence(proof, record, manifest.leaves[segment].weights)


@dataclass(frozen=True)
class ClusterReplayReport:
    root: str
    initial_weights_hash: str
    results: tuple[SegmentReplay, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "replayed",
            "root": self.root,
            "initial_weights_hash": self.initial_weights_hash,
            "results": [r.to_json() for r in self.results],
        }


def replay_node(
    trainer: ShardTrainer,
    ctx: TrainContext,
    pot_dir: Path,
    *,
    root: str,
    segments: Sequence[int],
) -> ClusterReplayReport:
    """Re-run `segments` of the node proof in `pot_dir` (attested `root`), every rank's
    contribution recomputed in rank order from the committed opening checkpoint. Raises
    `ProofError` for a proof that cannot be replayed as committed."""
    proof, manifest = load_node(pot_dir, root=root)
    check_structure(manifest, ctx.schedule)
    nonces = [bytes.fromhex(n) for n in proof.nonces]
    if ctx.data_seed != cluster_data_seed(ctx.job_seed, nonces):
        raise ProofError("the replay's data seed is not the cluster's")
    if manifest.data_seed != ctx.data_seed:
        raise ProofError("the manifest was trained on another data order than the cluster's")
    wanted = sorted(set(segments))
    if not wanted or wanted[0] < 1 or wanted[-1] > manifest.segments:
        raise ProofError(f"segments to replay must be within 1..{manifest.segments}: {segments}")
    initial = tensors_hash(trainer.state().params)
    sampler = ctx.schedule.sampler(ctx.data_seed)
    world = proof.world
    results = []
    for segment in wanted:
        opening = load_checkpoint(pot_dir, manifest, segment - 1)
        open_checkpoint(trainer, opening, manifest.leaves[segment - 1].weights, segment - 1)
        shards = [SegmentIndices() for _ in range(world)]
        steps: list[tuple[int, tuple[str, ...]]] = []
        for step in ctx.schedule.segment_steps(segment):
            indices = sampler.indices(step)
            gradients = []
            for r in range(world):
                own = shard(indices, r, world)
                _, gradient = trainer.gradient(step, r, own)
                shards[r].add(step, own)
                gradients.append(gradient)
            steps.append((step, tuple(contribution_hash(g) for g in gradients)))
            trainer.apply(step, average(gradients))
        results.append(
            SegmentReplay(
                segment,
                tuple(s.hexdigest() for s in shards),
                tuple(steps),
                tensors_hash(trainer.state().params),
            )
        )
    return ClusterReplayReport(proof.root, initial, tuple(results))


class LocalCluster:
    """An all-gather between `world` ranks running as threads of one process (tests, the
    local demo): each rank's `gather` waits for every rank's contribution of the step.
    `tamper(rank, step, contribution)`, when given, replaces what the other ranks receive
    from `rank` (an attack test's node that sends one thing and records another)."""

    def __init__(
        self,
        world: int,
        *,
        timeout_s: float = 60.0,
        tamper: Callable[[int, int, Contribution], Contribution] | None = None,
    ) -> None:
        self.world = world
        self.tamper = tamper
        self._slots: list[tuple[Contribution, Contribution] | None] = [None] * world
        self._barrier = threading.Barrier(world, timeout=timeout_s)

    def for_rank(self, rank: int) -> Gather:
        def gather(step: int, contribution: Contribution) -> Sequence[Contribution]:
            loss, gradient = contribution
            own: Contribution = (loss, {k: np.array(v, copy=True) for k, v in gradient.items()})
            sent = own if self.tamper is None else self.tamper(rank, step, own)
            self._slots[rank] = (own, sent)
            self._barrier.wait()
            everyone = [
                slot[0] if r == rank else slot[1]
                for r, slot in enumerate(self._slots)
                if slot is not None
            ]
            self._barrier.wait()  # nobody overwrites a slot before every rank has read it
            return everyone

        return gather

    def run(self, train: Callable[[int, Gather], NodeProof]) -> dict[int, NodeProof]:
        """`train(rank, gather)` on one thread per rank; the proofs by rank."""
        proofs: dict[int, NodeProof] = {}
        errors: list[BaseException] = []

        def one(rank: int) -> None:
            try:
                proofs[rank] = train(rank, self.for_rank(rank))
            except BaseException as exc:  # surfaced below, after every thread ended
                errors.append(exc)
                self._barrier.abort()

        threads = [threading.Thread(target=one, args=(r,)) for r in range(self.world)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return proofs
