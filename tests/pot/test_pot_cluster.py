"""A cluster node's proof: an honest cluster replays, and each lying node is caught and
blamed alone (`pot.cluster`, `pot.cluster_harness`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from cluster_fixtures import (
    SCHEDULE,
    CopyingMLP,
    FakingMLP,
    context,
    train_cluster,
)

from pot.cluster import StepRecord, average, shard, shard_commitments, steps_path
from pot.cluster_harness import Contribution, load_evidence, load_node, replay_node
from pot.examples.numpy_dp import DataParallelMLP
from pot.manifest import ProofError

ALL = range(1, SCHEDULE.segments + 1)


def test_honest_cluster_replays_and_nobody_is_blamed(tmp_path: Path) -> None:
    cluster = train_cluster(tmp_path)
    roots = {load_node(cluster.pot_dir(r))[1].root for r in range(3)}
    assert len(roots) == 1, "every node commits the same checkpoints"
    for segment in ALL:
        assert cluster.verdicts(segment) == {0: None, 1: None, 2: None}
    # The shard commitments are the seed-derived ones, checkable without job code.
    ctx = context(tmp_path, 3)
    for rank, proof in cluster.proofs.items():
        assert [s.data for s in proof.segments] == shard_commitments(
            SCHEDULE, ctx.data_seed, rank, 3
        )


def test_replay_from_any_node_gives_the_same_report(tmp_path: Path) -> None:
    cluster = train_cluster(tmp_path, 2)
    ctx = context(tmp_path / "v", 2)
    reports = [
        replay_node(
            DataParallelMLP(ctx), ctx, cluster.pot_dir(r), root=cluster.proofs[r].root, segments=[2]
        ).results
        for r in range(2)
    ]
    assert reports[0] == reports[1]


def test_a_node_that_fakes_its_shard_is_caught_and_blamed_alone(tmp_path: Path) -> None:
    cluster = train_cluster(tmp_path, trainers={1: FakingMLP})
    for segment in ALL:
        verdicts = cluster.verdicts(segment)
        assert verdicts[1] is not None and "contribution" in verdicts[1]
        assert verdicts[0] is None and verdicts[2] is None


def test_a_node_that_copies_another_nodes_contribution_is_blamed_alone(tmp_path: Path) -> None:
    cluster = train_cluster(tmp_path, trainers={2: CopyingMLP})
    verdicts = cluster.verdicts(3)
    assert verdicts[2] is not None and "contribution" in verdicts[2]
    assert verdicts[0] is None and verdicts[1] is None


def test_a_node_on_other_shard_indices_is_blamed_alone(tmp_path: Path) -> None:
    def first_half(indices: np.ndarray, rank: int, world: int) -> np.ndarray:
        return np.ascontiguousarray(indices[: len(indices) // world])

    cluster = train_cluster(tmp_path, shards={1: first_half})
    ctx = context(tmp_path, 3)
    honest = shard_commitments(SCHEDULE, ctx.data_seed, 1, 3)
    assert [s.data for s in cluster.proofs[1].segments] != honest  # seen without any replay
    verdicts = cluster.verdicts(2)
    assert verdicts[1] is not None and "shard indices" in verdicts[1]
    assert verdicts[0] is None and verdicts[2] is None


def _garbage(rank: int) -> object:
    def tamper(r: int, step: int, sent: Contribution) -> Contribution:
        if r != rank:
            return sent
        return sent[0], {k: v + 1.0 for k, v in sent[1].items()}

    return tamper


def test_a_node_that_sends_other_than_it_records_is_blamed_by_the_witnesses(
    tmp_path: Path,
) -> None:
    # Node 0 records its honest gradient but sends something else into the all-reduce: the
    # checkpoint does not replay, and the other nodes' records of what arrived name it.
    cluster = train_cluster(tmp_path, tamper=_garbage(0))  # type: ignore[arg-type]
    verdicts = cluster.verdicts(1)
    assert verdicts[0] is not None and "other nodes received" in verdicts[0]
    assert verdicts[1] is None and verdicts[2] is None


def test_a_false_witness_is_blamed_and_its_target_is_not(tmp_path: Path) -> None:
    cluster = train_cluster(tmp_path)
    lying = cluster.proofs[2]
    path = steps_path(cluster.pot_dir(2), 1)
    record = StepRecord.decode(path.read_bytes(), 3)
    (step, digests), *rest = record.steps
    forged = StepRecord(3, ((step, ("0" * 64, *digests[1:])), *rest))
    path.write_bytes(forged.encode())
    segments = (replace(lying.segments[0], steps=forged.digest), *lying.segments[1:])
    cluster.proofs[2] = replace(lying, segments=segments)
    (cluster.pot_dir(2) / "cluster.json").write_bytes(cluster.proofs[2].encode())
    verdicts = cluster.verdicts(1)
    assert verdicts[2] is not None and "testifies" in verdicts[2]
    assert verdicts[0] is None and verdicts[1] is None


def test_a_step_record_other_than_committed_is_refused(tmp_path: Path) -> None:
    cluster = train_cluster(tmp_path, 2)
    path = steps_path(cluster.pot_dir(1), 2)
    path.write_bytes(path.read_bytes()[:-1] + b"\0")
    with pytest.raises(ProofError, match="step record"):
        load_evidence(cluster.pot_dir(1), 2, root=cluster.proofs[1].root)


def test_a_proof_on_another_data_order_is_refused(tmp_path: Path) -> None:
    cluster = train_cluster(tmp_path, 2)
    ctx = context(tmp_path / "v", 3)  # the seed of another set of nonces
    with pytest.raises(ProofError, match="data seed"):
        replay_node(
            DataParallelMLP(ctx), ctx, cluster.pot_dir(0), root=cluster.proofs[0].root, segments=[1]
        )


def test_a_tampered_cluster_file_is_not_the_attested_root(tmp_path: Path) -> None:
    cluster = train_cluster(tmp_path, 2)
    path = cluster.pot_dir(1) / "cluster.json"
    path.write_bytes(path.read_bytes().replace(b'"rank":1', b'"rank":0'))
    with pytest.raises(ProofError, match="attested root"):
        load_node(cluster.pot_dir(1), root=cluster.proofs[1].root)


def test_average_is_in_rank_order_and_shards_partition_the_batch() -> None:
    batch = np.arange(10)
    parts = [shard(batch, r, 3) for r in range(3)]
    assert sorted(np.concatenate(parts).tolist()) == batch.tolist()
    a = {"w": np.array([1e16, 1.0])}
    b = {"w": np.array([-1e16, 1.0])}
    c = {"w": np.array([1.0, 1.0])}
    assert average([a, b, c])["w"][0] == pytest.approx(1 / 3)
    assert average([a, c, b])["w"][0] == 0.0  # another order, other bits: the order is fixed


def test_two_nodes_a_saboteur_that_also_lies_about_the_other_takes_both_down(
    tmp_path: Path,
) -> None:
    """The limit docs/protocol.md states: with no third witness, a node that sends other
    than it records and testifies falsely against the other cannot be told apart from it;
    both are blamed (the saboteur forfeits its own payment to do it)."""
    cluster = train_cluster(tmp_path, 2, tamper=_garbage(0))  # type: ignore[arg-type]
    path = steps_path(cluster.pot_dir(0), 1)
    record = StepRecord.decode(path.read_bytes(), 2)
    (step, digests), *rest = record.steps
    forged = StepRecord(2, ((step, (digests[0], "0" * 64)), *rest))
    path.write_bytes(forged.encode())
    saboteur = cluster.proofs[0]
    segments = (replace(saboteur.segments[0], steps=forged.digest), *saboteur.segments[1:])
    cluster.proofs[0] = replace(saboteur, segments=segments)
    (cluster.pot_dir(0) / "cluster.json").write_bytes(cluster.proofs[0].encode())
    verdicts = cluster.verdicts(1)
    assert verdicts[0] is not None and verdicts[1] is not None
    # Its honest twin: the saboteur alone, not lying about the other, is blamed alone.
    alone = train_cluster(tmp_path / "alone", 2, tamper=_garbage(0))  # type: ignore[arg-type]
    verdicts = alone.verdicts(1)
    assert verdicts[0] is not None and verdicts[1] is None
