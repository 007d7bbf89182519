"""Spot checks of cluster nodes on their shards: the oracle draws segments of a node's proof,
one replay recomputes every rank's contribution, and only the node whose own contribution
does not replay is blamed (`oracle.verification.cluster_checks`, `node_replay`).

A real 3-node data-parallel run (pot.examples.numpy_dp, ranks as threads) is uploaded as the
API serves unit uploads (`units/<rank>/pot/...`); the demo's local checker replays it with
the network's harness (`python -m pot replay-node`) over the repository's trainer.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest
from nacl.signing import SigningKey
from oracle_fixtures import FakeFeed, trainer_repo

from oracle.inputs.feed import ArtifactMissing, JobInfo
from oracle.verification.node_replay import LocalNodeSpotChecker
from oracle.verification.spotcheck import RepoCache
from oracle.verification.verifiers import (
    FEE_EVIDENCE,
    Candidate,
    VerifierSpotChecker,
    fee_mismatch,
)
from oracle.verification.verify import NodeChecker, Reason
from pot import cluster_harness
from pot.cluster import NodeProof, cluster_data_seed
from pot.cluster_harness import Contribution, LocalCluster, ShardTrainer, replay_node
from pot.examples.numpy_dp import DataParallelMLP
from pot.trainer import TrainContext
from proofnet.messages.attestation import Attestation
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.key_grant import KeyRequest
from proofnet.messages.topology import Unit
from proofnet.messages.verification import (
    NodeSegmentResult,
    VerificationReport,
    VerificationTask,
)
from proofnet.messages.verification_fee import FeeEvidence

SPEC_URL = "https://example.org/cluster.git"
DP_PY = "from pot.examples.numpy_dp import DataParallelMLP  # noqa: F401\n"
ORACLE_KEY = SigningKey(b"\x09" * 32)
NODES = 3


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return trainer_repo(tmp_path_factory.mktemp("dp-repo"), {"dp.py": DP_PY}, "dp trainer")


def _spec(commit: str) -> JobSpec:
    return JobSpec.from_dict(
        {
            "model": {"repo_url": SPEC_URL, "commit": commit},
            "framework": "numpy",
            "image": "proofnet/test@sha256:" + "e" * 64,
            "commands": [["python", "-m", "pot", "train"]],
            "resources": {
                "gpus": 0,
                "gpu_memory_mb": 0,
                "cpus": 1,
                "ram_mb": 1024,
                "disk_mb": 100,
                "max_duration_s": 60,
            },
            "results": [{"path": "pot/**", "kind": "model"}],
            "pricing": {"kind": "fixed", "amount": 300},
            "seed": secrets.randbelow(2**63),
            "proof": {
                "trainer": "dp:DataParallelMLP",
                "config": {"hidden": 16},
                "schedule": {"steps": 24, "dataset_size": 192, "batch_size": 24},
                "steps_per_checkpoint": 6,
                "spot_checks": 2,
                "tolerance_ppm": 0,
            },
            "topology": {"kind": "multi_node", "nodes": NODES, "node_amount": 100},
        }
    )


class FakingMLP(DataParallelMLP):
    """Contributes zeros instead of its shard's gradient (saves the compute)."""

    def gradient(self, step: int, rank: int, indices: np.ndarray) -> Contribution:
        return 0.0, {k: np.zeros_like(v) for k, v in self.params.items()}


def _cluster(
    work: Path,
    spec: JobSpec,
    nonces: list[str],
    trainers: dict[int, Callable[[TrainContext], ShardTrainer]] | None = None,
) -> tuple[dict[tuple[str, str], bytes], dict[int, str]]:
    """A real cluster run: every node's uploads by feed name, and each node's proof root."""
    schedule = spec.schedule
    assert schedule is not None
    raw = [bytes.fromhex(n) for n in nonces]

    def train(rank: int, gather: cluster_harness.Gather) -> Any:
        ctx = TrainContext(
            job_dir=work / f"node{rank}",
            job_seed=spec.seed,
            data_seed=cluster_data_seed(spec.seed, raw),
            schedule=schedule,
            config=dict(spec.proof.config or {}),
        )
        trainer = (trainers or {}).get(rank, DataParallelMLP)(ctx)
        return cluster_harness.train_node(
            trainer, ctx, ctx.job_dir / "pot", rank=rank, nonces=raw, gather=gather
        )

    proofs = LocalCluster(NODES).run(train)
    files = {
        (spec.job_id, f"units/{rank}/pot/{p.name}"): p.read_bytes()
        for rank in range(NODES)
        for p in sorted((work / f"node{rank}" / "pot").iterdir())
    }
    return files, {rank: proof.root for rank, proof in proofs.items()}


def _checker(tmp_path: Path, repo: tuple[str, str], files: dict[Any, bytes]) -> Any:
    return LocalNodeSpotChecker(
        FakeFeed(artifacts=files),  # type: ignore[arg-type]
        RepoCache(tmp_path / "repos", url_map={SPEC_URL: repo[0]}),
        sign=lambda message: ORACLE_KEY.sign(message).signature,
        timeout_s=120,
    )


def _verdicts(
    tmp_path: Path,
    repo: tuple[str, str],
    spec: JobSpec,
    files: dict[Any, bytes],
    roots: dict[int, str],
    nonces: list[str],
    lease_nonces: list[str] | None = None,
) -> dict[int, Any]:
    checker = _checker(tmp_path, repo, files)
    assert isinstance(checker, NodeChecker)
    leases = lease_nonces or nonces
    units = {r: SimpleNamespace(lease=SimpleNamespace(nonce=leases[r])) for r in range(NODES)}
    job = SimpleNamespace(job_id=spec.job_id, spec=spec, unit=units.get)
    out = {}
    for rank in range(NODES):
        att = SimpleNamespace(
            unit=SimpleNamespace(index=rank, kind="node", inputs=()),
            pot_root=roots[rank],
            nonce=nonces[rank],
            leaf_hash=lambda rank=rank: bytes.fromhex(roots[rank]),
        )
        unit = Unit(rank, "node", (), (), (), 100, rank=rank)
        scope = cast(JobInfo, job)
        out[rank] = checker.check_node(cast(Attestation, att), scope, unit, scope)
    return out


def test_an_honest_cluster_is_verified_node_by_node(tmp_path: Path, repo: tuple[str, str]) -> None:
    spec = _spec(repo[1])
    nonces = [secrets.token_hex(16) for _ in range(NODES)]
    files, roots = _cluster(tmp_path / "run", spec, nonces)
    verdicts = _verdicts(tmp_path, repo, spec, files, roots, nonces)
    for rank, verdict in verdicts.items():
        assert verdict.passed, (rank, verdict)
        assert verdict.segments and verdict.report["results"]


def test_the_node_that_fakes_its_shard_is_rejected_and_the_others_paid(
    tmp_path: Path, repo: tuple[str, str]
) -> None:
    spec = _spec(repo[1])
    nonces = [secrets.token_hex(16) for _ in range(NODES)]
    files, roots = _cluster(tmp_path / "run", spec, nonces, {1: FakingMLP})
    verdicts = _verdicts(tmp_path, repo, spec, files, roots, nonces)
    faked = verdicts[1]
    assert (faked.passed, faked.reason, faked.fault) == (
        False,
        Reason.SPOT_CHECK_FAILED,
        "provider",
    ), faked
    assert "not the gradient of its shard" in faked.message
    assert verdicts[0].passed and verdicts[2].passed, verdicts


def test_a_node_that_trained_on_other_nonces_than_the_leases_is_refused(
    tmp_path: Path, repo: tuple[str, str]
) -> None:
    spec = _spec(repo[1])
    nonces = [secrets.token_hex(16) for _ in range(NODES)]
    files, roots = _cluster(tmp_path / "run", spec, nonces)
    # The API's leases say node 2 claimed with another nonce: the data order was chosen.
    leases = [*nonces[:2], secrets.token_hex(16)]
    verdicts = _verdicts(tmp_path, repo, spec, files, roots, nonces, leases)
    assert verdicts[0].reason == Reason.NODE_NONCES_MISMATCH


def test_a_node_that_commits_other_shard_indices_is_refused_without_a_replay(
    tmp_path: Path, repo: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _spec(repo[1])
    nonces = [secrets.token_hex(16) for _ in range(NODES)]
    honest = cluster_harness.shard

    def lazy(indices: np.ndarray, rank: int, world: int) -> np.ndarray:
        # Node 2 trains on a shard of its choosing (the batch's first examples).
        return indices[:2].copy() if rank == 2 else honest(indices, rank, world)

    monkeypatch.setattr(cluster_harness, "shard", lazy)
    files, roots = _cluster(tmp_path / "run", spec, nonces)
    monkeypatch.setattr(cluster_harness, "shard", honest)
    verdicts = _verdicts(tmp_path, repo, spec, files, roots, nonces)
    assert verdicts[2].reason == Reason.NODE_SHARD_MISMATCH, verdicts[2]
    assert not verdicts[2].segments  # refused before any draw


# -- the same, through a drawn verifier (`VerifierSpotChecker.check_node`) ------------------


@dataclass
class ReplayingDesk:
    """The API relay, with verifiers that answer a node task by replaying it as
    `python -m pot replay-node` does (in-process here; the worker's container run is
    `worker.verifier._node_task`)."""

    files: dict[tuple[str, str], bytes]
    work: Path
    spec: JobSpec
    verifiers: dict[str, SigningKey]
    tasks: list[VerificationTask] = field(default_factory=list)

    def artifact(self, job_id: str, name: str) -> bytes:
        try:
            return self.files[(job_id, name)]
        except KeyError:
            raise ArtifactMissing(name) from None

    def worker_payout(self, worker_key: str) -> str | None:
        return None

    def verifier_candidates(self, device_class: str, exclude: str) -> list[Candidate]:
        return [Candidate(k, f"addr-{k[:8]}") for k in self.verifiers if k != exclude]

    def request_keys(self, request: KeyRequest) -> int:
        raise AssertionError("the job is not sealed")

    def post_verification(self, task: VerificationTask) -> dict[str, Any]:
        self.tasks.append(task)
        pot = self.work / task.digest[:16] / "pot"
        pot.mkdir(parents=True)
        for name in task.files:
            (pot / name.rsplit("/", 1)[-1]).write_bytes(self.files[(task.job_id, name)])
        proof = NodeProof.from_bytes((pot / "cluster.json").read_bytes())
        schedule = self.spec.schedule
        assert schedule is not None
        ctx = TrainContext(
            job_dir=pot.parent,
            job_seed=self.spec.seed,
            data_seed=cluster_data_seed(self.spec.seed, [bytes.fromhex(n) for n in proof.nonces]),
            schedule=schedule,
            config=dict(self.spec.proof.config or {}),
        )
        replayed = replay_node(
            DataParallelMLP(ctx), ctx, pot, root=task.pot_root, segments=task.segments
        ).to_json()
        report = VerificationReport.sign(
            self.verifiers[task.verifier],
            task,
            status="passed",
            initial_weights_hash=replayed["initial_weights_hash"],
            node_results=[
                NodeSegmentResult.from_harness(r).model_dump(mode="json")
                for r in replayed["results"]
            ],
            replay_ms=1,
            payout_address=f"addr-{task.verifier[:8]}",
        )
        return {"report": report.to_json(), "created_at": datetime.now(UTC).isoformat()}


def test_a_drawn_verifier_replays_the_nodes_and_only_the_faker_is_rejected(
    tmp_path: Path, repo: tuple[str, str]
) -> None:
    spec = _spec(repo[1])
    nonces = [secrets.token_hex(16) for _ in range(NODES)]
    files, roots = _cluster(tmp_path / "run", spec, nonces, {2: FakingMLP})
    keys = [SigningKey.generate() for _ in range(2)]
    desk = ReplayingDesk(
        files, tmp_path / "verifier", spec, {bytes(k.verify_key).hex(): k for k in keys}
    )
    checker = VerifierSpotChecker(desk, ORACLE_KEY)
    assert isinstance(checker, NodeChecker)
    units = {r: SimpleNamespace(lease=SimpleNamespace(nonce=nonces[r])) for r in range(NODES)}
    job = cast(
        JobInfo, SimpleNamespace(job_id=spec.job_id, spec=spec, unit=units.get, sealed=False)
    )
    verdicts = {}
    for rank in range(NODES):
        att = SimpleNamespace(
            unit=SimpleNamespace(index=rank, kind="node", inputs=()),
            pot_root=roots[rank],
            nonce=nonces[rank],
            worker_key=f"{rank + 1:02x}" * 32,
            gpu_model="cpu",
            leaf_hash=lambda rank=rank: bytes.fromhex(roots[rank]),
        )
        unit = Unit(rank, "node", (), (), (), 100, rank=rank)
        verdicts[rank] = checker.check_node(cast(Attestation, att), job, unit, job)
    assert [t.kind for t in desk.tasks] == ["node"] * NODES
    assert all(t.files[0] == f"units/{t.unit}/pot/cluster.json" for t in desk.tasks)
    assert verdicts[0].passed and verdicts[1].passed, verdicts
    assert (verdicts[2].reason, verdicts[2].fault) == (Reason.SPOT_CHECK_FAILED, "provider")
    assert verdicts[2].verifier in desk.verifiers
    # The honest nodes' verifiers earned their fee; the evidence a co-signer re-judges.
    assert FEE_EVIDENCE in (verdicts[0].report or {})
    evidence = FeeEvidence.from_json((verdicts[0].report or {})[FEE_EVIDENCE])
    att0 = SimpleNamespace(unit=SimpleNamespace(index=0), pot_root=roots[0])
    assert fee_mismatch(evidence, cast(Attestation, att0), job, desk) is None
