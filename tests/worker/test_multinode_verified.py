"""A replayable two-node job end to end: two real worker processes train it under torchrun
(gloo on CPU, `pot.examples.torch_dp`), each attests its node proof's root, and the oracle
spot-checks every node on its shard through a drawn verifier worker (`python -m pot
replay-node` under the process runtime), with the API relaying the tasks, files and
reports: both nodes are verified.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from pathlib import Path

import pytest
from agent_fixtures import NETWORK, RecordingOracle, _oracle_app, make_api_server, register_worker
from nacl.signing import SigningKey
from real_process_support import kill_processes_in, start_worker, wait_for, wait_for_attestations
from relay_fixtures import RelayRepo, multinode_spec, relay_repo  # noqa: F401

from chain.devnet.testing import serve_app
from oracle.inputs.feed import JobInfo
from oracle.intake.feed_client import HttpApiFeed
from oracle.verification.spotcheck import SpotCheckUnavailable
from oracle.verification.verifiers import VerifierSpotChecker
from proofnet.messages.topology import plan
from proofnet.processes import RoleGroup
from worker.api_client import ApiClient
from worker.runtime.process_runtime import ProcessRuntime
from worker.verifier import Verifier
from worker.workspace import RepoCache

ORACLE = SigningKey(b"\x0d" * 32)
ORACLE_KEY = bytes(ORACLE.verify_key).hex()

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
    kill_processes_in(tmp_path)


def test_a_replayable_two_node_job_is_verified_node_by_node(
    tmp_path: Path,
    relay_repo: RelayRepo,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The verifier's replay finds this interpreter's python3 (numpy, torch) first.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    spec = multinode_spec(relay_repo)
    spec["commands"] = [
        ["python3", "-c", "print('node ready')"],
        ["python3", "-m", "pot.examples.torch_dp"],
    ]
    spec["proof"] = {
        "trainer": "dp_torch:TorchDataParallelMLP",
        "config": {"hidden": 8},
        "schedule": {"steps": 12, "dataset_size": 96, "batch_size": 16},
        "steps_per_checkpoint": 4,
        "spot_checks": 1,
        "tolerance_ppm": 0,
    }
    (tmp_path / "api").mkdir()
    with contextlib.ExitStack() as stack:
        api = stack.enter_context(
            contextlib.contextmanager(make_api_server)(
                tmp_path / "api", lease_ttl_s=10, oracle_keys=(ORACLE_KEY,)
            )
        )
        oracle = RecordingOracle(escrows=api.escrows)
        oracle.url = stack.enter_context(serve_app(_oracle_app(oracle)))
        group = stack.enter_context(RoleGroup())
        job_id = api.submit(spec)
        workers = [
            start_worker(group, f"worker-{i}", api, oracle, relay_repo, tmp_path)  # type: ignore[arg-type]
            for i in (0, 1)
        ]

        def finished() -> dict[str, object] | None:
            job = api.job(job_id)
            return job if job["status"] in ("completed", "failed", "stopped") else None

        job = wait_for("the job to finish", finished, workers=workers)
        assert job["status"] == "completed", job["last_error"]
        # Unit R trained as torch's rank R (its proof is that rank's), whichever node's
        # torchrun started first: torchrun's c10d rendezvous once ranked them by process id.
        assert [u["metrics"]["rank"] for u in job["units"]] == [0, 1], job["units"]  # type: ignore[index]
        atts = wait_for_attestations(oracle, job_id, 2, workers=workers)  # type: ignore[arg-type]

        registered = register_worker(api, tmp_path / "verifier.skey")
        client = stack.enter_context(
            contextlib.closing(ApiClient(api.url, registered.key, NETWORK))
        )
        verifier = Verifier(
            client,
            ProcessRuntime(),
            registered.key,
            tmp_path / "verifier",
            RepoCache(tmp_path / "verifier-repos", rewrites=relay_repo.rewrites),
            trusted_oracle_keys={ORACLE_KEY},
            allow_unisolated=True,
            timeout_s=300,
        )
        assert verifier.run_once() == []  # a candidate from now on
        feed = stack.enter_context(
            contextlib.closing(HttpApiFeed(api.url, ORACLE, NETWORK, ttl_s=0))
        )
        checker = VerifierSpotChecker(feed, ORACLE)
        info = feed.job(job_id)
        assert isinstance(info, JobInfo) and info.spec.topology is not None
        units = {u.index: u for u in plan(info.spec.topology)}
        for att in atts:
            assert att.unit is not None
            with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
                checker.check_node(att, info, units[att.unit.index], info)
        assert len(verifier.run_once()) == 2
        for att in atts:
            assert att.unit is not None
            verdict = checker.check_node(att, info, units[att.unit.index], info)
            assert verdict.passed, verdict
            assert verdict.segments and verdict.verifier == registered.key.public_key_hex
