"""A drawn verifier replays a cluster node: the worker answers a "node" task with the
network's harness (`python -m pot replay-node`, every rank's contribution recomputed) and
signs what it computed; the oracle judges it against every node's commitments. A real
3-node data-parallel run passes node by node; the node that contributed zeros instead of
its shard's gradient is the only one rejected.

An in-memory relay stands in for the API (as in test_verifier_relay.py); the verifier runs
the process runtime, as a test may (`allow_unisolated`).
"""

from __future__ import annotations

import hashlib
import secrets
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from agent_fixtures import job_path  # noqa: F401  (fixture)
from nacl.signing import SigningKey

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))
from test_spotcheck_cluster import NODES, FakingMLP, _cluster, _spec, repo  # noqa: E402, F401

from oracle.inputs.feed import ArtifactMissing, JobInfo  # noqa: E402
from oracle.verification.spotcheck import SpotCheckUnavailable  # noqa: E402
from oracle.verification.verifiers import Candidate, VerifierSpotChecker  # noqa: E402
from oracle.verification.verify import Reason  # noqa: E402
from proofnet.messages.attestation import Attestation  # noqa: E402
from proofnet.messages.jobspec import JobSpec  # noqa: E402
from proofnet.messages.key_grant import KeyRequest  # noqa: E402
from proofnet.messages.topology import Unit  # noqa: E402
from proofnet.messages.verification import VerificationTask  # noqa: E402
from worker.identity import WorkerKey  # noqa: E402
from worker.runtime.process_runtime import ProcessRuntime  # noqa: E402
from worker.verifier import Verifier  # noqa: E402
from worker.workspace import RepoCache  # noqa: E402

ORACLE = SigningKey(b"\x0b" * 32)
ORACLE_KEY = bytes(ORACLE.verify_key).hex()
VERIFIER = WorkerKey(SigningKey(b"\x0c" * 32))
SPEC_URL = "https://example.org/cluster.git"


@dataclass
class Relay:
    """The API's part, in memory: every node's uploads, the posted tasks, the reports."""

    spec: JobSpec
    artifacts: dict[tuple[str, str], bytes]
    tasks: dict[str, VerificationTask] = field(default_factory=dict)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)

    # --- the oracle's desk ---
    def artifact(self, job_id: str, name: str) -> bytes:
        try:
            return self.artifacts[(job_id, name)]
        except KeyError:
            raise ArtifactMissing(name) from None

    def worker_payout(self, worker_key: str) -> str | None:
        return f"addr_test1provider{worker_key[:4]}"

    def verifier_candidates(self, device_class: str, exclude: str) -> list[Candidate]:
        return [Candidate(VERIFIER.public_key_hex, "addr_test1verifier")]

    def post_verification(self, task: VerificationTask) -> dict[str, Any]:
        self.tasks.setdefault(task.digest, task)
        return {"id": 1, "digest": task.digest, "report": self.reports.get(task.digest)}

    def request_keys(self, request: KeyRequest) -> int:
        raise AssertionError("the job is not sealed")

    # --- the verifier's API client ---
    def verification_tasks(self) -> list[dict[str, Any]]:
        pending = [t for d, t in self.tasks.items() if d not in self.reports]
        return [
            {
                "id": i,
                "task": t.to_json(),
                "spec": self.spec.model_dump(mode="json", exclude_none=True),
                "files": [
                    {
                        "name": n,
                        "sha256": hashlib.sha256(self.artifacts[(t.job_id, n)]).hexdigest(),
                    }
                    for n in t.files
                ],
                "key_requests": [],
            }
            for i, t in enumerate(pending)
        ]

    def download_task_file(self, unit_id: int, name: str, dest: Path, sha256: str) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(self.artifacts[(self.spec.job_id, name)])

    def report_verification(self, unit_id: int, report: dict[str, Any]) -> dict[str, Any]:
        self.reports[str(report["task"])] = report
        return {"id": unit_id}


def test_a_verifier_worker_replays_the_nodes_and_only_the_faker_is_rejected(
    tmp_path: Path,
    repo: tuple[str, str],  # noqa: F811
    job_path: None,  # noqa: F811
) -> None:
    spec = _spec(repo[1])
    nonces = [secrets.token_hex(16) for _ in range(NODES)]
    files, roots = _cluster(tmp_path / "run", spec, nonces, {0: FakingMLP})
    relay = Relay(spec, files)
    checker = VerifierSpotChecker(relay, ORACLE)
    units = {r: SimpleNamespace(lease=SimpleNamespace(nonce=nonces[r])) for r in range(NODES)}
    job = cast(
        JobInfo, SimpleNamespace(job_id=spec.job_id, spec=spec, unit=units.get, sealed=False)
    )

    def check(rank: int) -> Any:
        att = SimpleNamespace(
            unit=SimpleNamespace(index=rank, kind="node", inputs=()),
            pot_root=roots[rank],
            nonce=nonces[rank],
            worker_key=f"{rank + 1:02x}" * 32,
            gpu_model="cpu",
            leaf_hash=lambda: bytes.fromhex(roots[rank]),
        )
        unit = Unit(rank, "node", (), (), (), 100, rank=rank)
        return checker.check_node(cast(Attestation, att), job, unit, job)

    for rank in range(NODES):
        with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
            check(rank)
    verifier = Verifier(
        relay,  # type: ignore[arg-type]
        ProcessRuntime(),
        VERIFIER,
        tmp_path / "verifier",
        RepoCache(tmp_path / "repos", rewrites={SPEC_URL: repo[0]}),
        trusted_oracle_keys={ORACLE_KEY},
        allow_unisolated=True,
        timeout_s=120,
    )
    verifier.run_once()
    assert len(relay.reports) == NODES
    verdicts = {rank: check(rank) for rank in range(NODES)}
    assert (verdicts[0].reason, verdicts[0].fault) == (Reason.SPOT_CHECK_FAILED, "provider")
    assert "not the gradient of its shard" in verdicts[0].message
    assert verdicts[1].passed and verdicts[2].passed, verdicts
