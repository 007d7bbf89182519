"""A two-node torchrun job (gloo on CPU) across two real worker processes, and its failover.

Each node's worker leases its node, waits until both are leased and node 0 has published
where it hosts the c10d store, and runs the last command under torchrun. The job completes
with both nodes attesting the same checkpoint. When one node's worker is SIGKILLed while the
cluster runs, its lease lapses, the API ends the cluster attempt, the other node's worker
finds its lease gone at its next heartbeat and kills its run within the lease TTL, and both
nodes run again as the next attempt.
"""

from __future__ import annotations

import hashlib
import importlib.util
import time
from pathlib import Path

import pytest
from agent_fixtures import RecordingOracle
from real_process_support import (
    WorkerProcess,
    kill_processes_in,
    log_texts,
    processes_in,
    recording_oracle,
    running_api,
    start_worker,
    wait_for,
    wait_for_attestations,
)
from relay_fixtures import CHECKPOINT, RelayRepo, multinode_spec, relay_repo  # noqa: F401

from proofnet.processes import RoleGroup

LEASE_TTL_S = 3

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None,
        reason="torch is not installed: a multi-node job needs torchrun (pip install torch)",
    ),
]


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path) -> object:
    yield
    kill_processes_in(tmp_path)  # whatever a failed run left behind


def _finished(api: object, job_id: str) -> object:
    def check() -> dict[str, object] | None:
        job = api.job(job_id)  # type: ignore[attr-defined]
        return job if job["status"] in ("completed", "failed", "stopped") else None

    return check


def _check_agreeing_nodes(
    api: object,
    oracle: RecordingOracle,
    job_id: str,
    job: dict,  # type: ignore[type-arg]
    workers: list[WorkerProcess],
) -> str:
    # The job reads "completed" when the last node completes its lease, just before that
    # node sends its attestation: wait for the oracle to have both.
    atts = wait_for_attestations(oracle, job_id, 2, workers=workers)
    assert len(atts) == 2
    assert sorted((a.unit.index, a.unit.kind) for a in atts) == [(0, "node"), (1, "node")]
    (output,) = {a.unit.output for a in atts}
    assert output is not None and all(a.unit.inputs == () for a in atts)
    assert all(a.amount == 400_000 for a in atts) and len({a.worker_key for a in atts}) == 2
    assert [u["output"] for u in job["units"]] == [output, output]
    api.release(job_id)  # type: ignore[attr-defined]
    for rank in (0, 1):
        name = f"units/{rank}/checkpoint/{CHECKPOINT}"
        raw = api.http.get(f"/api/v1/jobs/{job_id}/results/{name}", headers=api.submitter)  # type: ignore[attr-defined]
        assert raw.status_code == 200 and hashlib.sha256(raw.content).hexdigest() == output
    return str(output)


def test_two_node_torchrun_job_completes_with_agreeing_attestations(
    tmp_path: Path,
    relay_repo: RelayRepo,  # noqa: F811
) -> None:
    with (
        running_api(tmp_path, lease_ttl_s=10) as api,
        recording_oracle(api) as oracle,
        RoleGroup() as group,
    ):
        job_id = api.submit(multinode_spec(relay_repo, steps=30))
        workers = [
            start_worker(group, f"worker-{i}", api, oracle, relay_repo, tmp_path) for i in (0, 1)
        ]
        job = wait_for("the job to finish", _finished(api, job_id), workers=workers)
        assert job["status"] == "completed", job["last_error"]
        texts = log_texts(api, job_id)
        _check_agreeing_nodes(api, oracle, job_id, job, workers)
    assert all(u["attempts"] == 1 for u in job["units"])
    assert any("torchrun --nnodes 2 --node_rank 0" in t and "is_host=1" in t for t in texts)
    assert any("torchrun --nnodes 2 --node_rank 1" in t and "is_host=0" in t for t in texts)
    assert any(t.startswith("node 1: process") and "(gloo)" in t for t in texts)


def test_a_lost_node_fails_the_cluster_attempt_and_both_nodes_run_again(
    tmp_path: Path,
    relay_repo: RelayRepo,  # noqa: F811
) -> None:
    hold = tmp_path / "hold"
    hold.mkdir()
    for rank in (0, 1):
        (hold / f"hold-{rank}").touch()
    with (
        running_api(tmp_path, lease_ttl_s=LEASE_TTL_S) as api,
        recording_oracle(api) as oracle,
        RoleGroup() as group,
    ):
        job_id = api.submit(multinode_spec(relay_repo, steps=30, hold_dir=hold))
        workers = [
            start_worker(group, f"worker-{i}", api, oracle, relay_repo, tmp_path) for i in (0, 1)
        ]

        def running() -> bool:
            texts = log_texts(api, job_id)
            return all(any(t == f"holding unit {r}" for t in texts) for r in (0, 1))

        # Both training processes started: torchrun's rendezvous formed the cluster.
        wait_for("the cluster to run", running, workers=workers)

        def runs(rank: int) -> WorkerProcess | None:
            tag = f"{job_id}-u{rank}-a1"
            return next((w for w in workers if (w.work_dir / "jobs" / tag).is_dir()), None)

        lost, survivor = runs(1), runs(0)
        assert lost is not None and survivor is not None and lost is not survivor
        survivor_run = survivor.work_dir / "jobs" / f"{job_id}-u0-a1"
        assert processes_in(survivor_run)
        lost.kill()
        killed_at = time.monotonic()
        # The event: the survivor's next heartbeat finds its lease gone and it kills its run
        # (its log says why, checked below). How soon is a figure, not a test budget.
        wait_for(
            "the surviving node's run to be killed",
            lambda: not processes_in(survivor_run),
            workers=[survivor],
            interval=0.1,
        )
        stopped_after = time.monotonic() - killed_at
        print(f"the surviving node's run was killed {stopped_after:.1f}s after node 1 died")

        # The next attempt: the survivor and a fresh worker run both nodes again.
        for rank in (0, 1):
            (hold / f"hold-{rank}").unlink()
        workers.append(start_worker(group, "worker-2", api, oracle, relay_repo, tmp_path))
        job = wait_for("the job to finish", _finished(api, job_id), workers=workers)
        assert job["status"] == "completed", job["last_error"]
        _check_agreeing_nodes(api, oracle, job_id, job, workers)
    assert "cluster attempt 1 failed" in job["last_error"] and "lost node 1" in job["last_error"]
    assert all(u["attempts"] == 2 for u in job["units"])
    # Attempt 1 never completed, so nothing of it was attested; the lost worker attested nothing.
    assert lost.public_key not in {a.worker_key for a in oracle.accepted[job_id]}
    assert "stopping the job: the lease is lost" in survivor.role.tail(2000)
