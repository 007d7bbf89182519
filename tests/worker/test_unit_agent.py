"""The agent running units of topology jobs, against a stand-in API (tests/worker/unit_fakes):
a relay stage from a verified input checkpoint, a refused input, an evaluation with good and
bad metrics, and a cluster node whose run is killed when its cluster fails."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pycardano import Address, Network, PaymentSigningKey
from relay_fixtures import (  # noqa: F401  (fixtures)
    CHECKPOINT,
    RelayRepo,
    Shards,
    claim_unit,
    multinode_spec,
    relay_repo,
    relay_spec,
    shards,
)
from unit_fakes import ESCROW, FakeApi, FakeOracle, claim_body, published_rendezvous

from pot import env, harness
from pot.examples import numpy_relay
from pot.manifest import Manifest, weights_path
from pot.schedule import Schedule
from pot.tensors import read_tensors
from pot.trainer import TrainContext
from proofnet.messages.attestation import verify_attestation
from proofnet.messages.jobspec import JobSpec
from worker import units
from worker.agent import Agent, AgentConfig
from worker.api_client import ApiClient
from worker.data_fetch import DataFetchPolicy
from worker.identity import create_key
from worker.oracle_client import OracleClient
from worker.runtime.process_runtime import ProcessRuntime
from worker.telemetry import TelemetrySampler
from worker.workspace import RepoCache


@pytest.fixture(autouse=True)
def _job_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Process-runtime jobs find `python3` (with numpy) and `torchrun` of this interpreter."""
    bin_dir = Path(sys.executable).parent
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


class Rig:
    def __init__(self, tmp: Path, repo: RelayRepo, fake: FakeApi, **config: Any) -> None:
        self.fake, self.oracle = fake, FakeOracle()
        key = create_key(tmp / "worker.skey")
        payout = str(
            Address(
                PaymentSigningKey.generate().to_verification_key().hash(), network=Network.TESTNET
            )
        )
        self.config = AgentConfig(
            work_dir=tmp / "work",
            network="devnet",
            payout_address=payout,
            heartbeat_s=0.3,
            poll_interval_s=0.1,
            oracle_retry_base_s=0.01,
            keep_workspaces=True,
            **config,
        )
        self.api = ApiClient("http://api.test", key, "devnet", transport=fake.transport)
        self.oracle_client = OracleClient("http://oracle.test", transport=self.oracle.transport)
        self.sampler = TelemetrySampler(interval_s=1.0)
        self.agent = Agent(
            self.config,
            api=self.api,
            oracle=self.oracle_client,
            runtime=ProcessRuntime(),
            sampler=self.sampler,
            key=key,
            repos=RepoCache(self.config.repo_cache_dir, rewrites=repo.rewrites),
        )

    def close(self) -> None:
        self.api.close()
        self.oracle_client.close()
        self.sampler.close()


@pytest.fixture
def rig_factory(
    tmp_path: Path,
    relay_repo: RelayRepo,  # noqa: F811
    shards: Shards,  # noqa: F811
) -> Iterator[Any]:
    rigs: list[Rig] = []
    # The shards are local files: the one directory this provider lets jobs read.
    data = DataFetchPolicy(local_dirs=(shards.root,))

    def make(fake: FakeApi, **config: Any) -> Rig:
        rig = Rig(tmp_path / f"rig{len(rigs)}", relay_repo, fake, data=data, **config)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.close()


def _stage0_checkpoint(tmp_path: Path, data: Shards) -> bytes:
    """Stage 0's checkpoint, trained by the harness as another worker would."""
    job_dir = tmp_path / "s0"
    job_dir.mkdir()
    unit = env.UnitEnv(kind="stage", index=0, shards=(data.train[0],), checkpoint_out=job_dir / "c")
    schedule = Schedule(total_steps=20, steps_per_checkpoint=10, dataset_size=512, batch_size=32)
    ctx = TrainContext(job_dir, 3, 7, schedule, {"hidden": 32, "classes": 4}, unit)
    trainer = numpy_relay.StageTrainer(ctx)
    harness.train(trainer, ctx, job_dir / "pot")
    trainer.finish()
    return (job_dir / "c").read_bytes()


def test_stage_trains_from_its_verified_input_and_attests_the_chain(
    tmp_path: Path,
    relay_repo: RelayRepo,  # noqa: F811
    shards: Shards,  # noqa: F811
    rig_factory: Any,
) -> None:
    spec = relay_spec(relay_repo, shards, steps=30)
    start = _stage0_checkpoint(tmp_path, shards)
    start_sha = hashlib.sha256(start).hexdigest()
    unit = claim_unit(
        1,
        "stage",
        amount=300_000,
        shards=[1],
        inputs=[{"unit": 0, "sha256": start_sha, "size": len(start)}],
    )
    fake = FakeApi(claims=[claim_body(spec, unit, token="tok-1")], inputs={0: start})
    rig = rig_factory(fake)
    outcome = rig.agent.run(once=True).outcomes[0]
    assert outcome.status == "attested", outcome.reason
    assert outcome.unit == 1

    ckpt = fake.results[f"checkpoint/{CHECKPOINT}"]
    output = hashlib.sha256(ckpt).hexdigest()
    assert outcome.output == output
    (done,) = fake.completions
    assert done["unit"] == {"index": 1, "output": output, "metrics": done["metrics"]}
    assert done["metrics"]["steps"] == 30 and done["amount"] == 300_000
    att = verify_attestation(
        bytes.fromhex(done["attestation"]),
        expected_network="devnet",
        expected_script_hash=ESCROW["script_hash"],
    )
    assert att.unit is not None
    assert (att.unit.index, att.unit.kind) == (1, "stage")
    assert att.unit.inputs == (start_sha,) and att.unit.output == output
    assert att.amount == 300_000 < JobSpec.from_dict(spec).max_amount
    assert att.result_hashes[f"checkpoint/{CHECKPOINT}"] == output
    assert rig.oracle.received == [bytes.fromhex(done["attestation"])]

    # It trained from the input: its proof starts at the input's weights, on shard 1 only.
    job_dir = rig.config.jobs_dir / f"{att.job_id}-u1-a1"
    proof = Manifest.load(job_dir / "pot")
    assert att.pot_root == proof.root and proof.total_steps == 30
    first, _ = read_tensors(weights_path(job_dir / "pot", 0))
    given, _ = read_tensors(job_dir / units.INPUTS_DIR / "input-0")
    assert all(np.array_equal(first[n], given[n]) for n in numpy_relay.PARAM_NAMES)
    assert sorted(p.name for p in (job_dir / "data").iterdir()) == ["shard-1.bin"]
    assert any("input checkpoint of unit 0 verified" in t for t in fake.log_lines)
    assert "pot/manifest.json" in fake.results


def test_an_input_checkpoint_that_is_not_the_pinned_one_fails_the_unit(
    tmp_path: Path,
    relay_repo: RelayRepo,  # noqa: F811
    shards: Shards,  # noqa: F811
    rig_factory: Any,
) -> None:
    spec = relay_spec(relay_repo, shards)
    start = _stage0_checkpoint(tmp_path, shards)
    pinned = hashlib.sha256(start).hexdigest()
    unit = claim_unit(
        1, "stage", amount=300_000, shards=[1], inputs=[{"unit": 0, "sha256": pinned, "size": 1}]
    )
    tampered = start[:-1] + bytes([start[-1] ^ 1])
    fake = FakeApi(
        claims=[claim_body(spec, unit, token="tok-2")], inputs={0: tampered}, announce={0: pinned}
    )
    rig = rig_factory(fake)
    outcome = rig.agent.run(once=True).outcomes[0]
    assert outcome.status == "failed"
    ((how, reason),) = fake.ended
    assert how == "fail" and f"not the {pinned} the claim pinned" in reason
    assert fake.completions == [] and rig.oracle.received == [] and fake.results == {}
    job_dir = rig.config.jobs_dir / f"{JobSpec.from_dict(spec).job_id}-u1-a1"
    assert not (job_dir / units.INPUTS_DIR / "input-0").exists()


def test_evaluation_reports_its_metrics_and_trains_nothing(
    tmp_path: Path,
    relay_repo: RelayRepo,  # noqa: F811
    shards: Shards,  # noqa: F811
    rig_factory: Any,
) -> None:
    spec = relay_spec(relay_repo, shards)
    model = _stage0_checkpoint(tmp_path, shards)
    digest = hashlib.sha256(model).hexdigest()
    unit = claim_unit(
        3,
        "eval",
        amount=50_000,
        shards=[0],
        evaluates=1,
        inputs=[{"unit": 1, "sha256": digest, "size": len(model)}],
    )
    fake = FakeApi(claims=[claim_body(spec, unit, token="tok-3")], inputs={0: model})
    rig = rig_factory(fake)
    outcome = rig.agent.run(once=True).outcomes[0]
    assert outcome.status == "attested", outcome.reason
    (done,) = fake.completions
    metrics = done["unit"]["metrics"]
    assert set(metrics) == {"loss", "accuracy"} and 0 < float(metrics["loss"]) < 5
    assert done["unit"] == {"index": 3, "output": None, "metrics": metrics}
    att = verify_attestation(
        bytes.fromhex(done["attestation"]),
        expected_network="devnet",
        expected_script_hash=ESCROW["script_hash"],
    )
    assert att.unit is not None and att.unit.kind == "eval" and att.unit.output is None
    assert att.unit.inputs == (digest,) and att.metrics == metrics and att.amount == 50_000
    assert att.pot_root == units.NO_TRAINING_POT_ROOT and fake.results == {}

    # An evaluation that reports a float is refused, clearly.
    spec["topology"]["evaluation"]["command"] = [
        "python3",
        "-c",
        "import json, os; json.dump({'loss': 0.5}, open(os.environ['PROOFNET_METRICS_OUT'], 'w'))",
    ]
    bad = FakeApi(claims=[claim_body(spec, unit, token="tok-4")], inputs={0: model})
    outcome = rig_factory(bad).agent.run(once=True).outcomes[0]
    assert outcome.status == "failed"
    ((how, reason),) = bad.ended
    assert how == "fail" and "metric loss = 0.5" in reason and "not a float" in reason


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed (no torchrun)"
)
def test_node_run_is_killed_when_its_cluster_fails(
    relay_repo: RelayRepo,  # noqa: F811
    rig_factory: Any,
) -> None:
    spec = multinode_spec(relay_repo)
    job_id = JobSpec.from_dict(spec).job_id

    def cluster(beats: list[dict[str, Any]]) -> dict[str, Any]:
        endpoint = published_rendezvous(beats)
        return {
            "state": "ready" if endpoint else "waiting",
            "world_size": 2,
            "rank": 0,
            "endpoint": endpoint,
            "rdzv_id": f"{job_id}-1",
        }

    torchrun_since: list[float] = []

    def lost(beats: list[dict[str, Any]]) -> bool:
        # Node 1 "dies" two seconds into node 0's last command (torchrun, waiting for it).
        if not torchrun_since and beats[-1].get("message") == "running command 2/2":
            torchrun_since.append(time.monotonic())
        return bool(torchrun_since) and time.monotonic() - torchrun_since[0] > 2.0

    node = claim_unit(0, "node", amount=400_000, rank=0, cluster=cluster([]))
    fake = FakeApi(claims=[claim_body(spec, node, token="tok-5")], cluster=cluster, lost=lost)
    rig = rig_factory(fake)
    outcome = rig.agent.run(once=True).outcomes[0]
    assert outcome.status == "lost" and "lost node 1" in outcome.reason
    assert fake.completions == [] and rig.oracle.received == [] and fake.ended == []
    endpoint = published_rendezvous(fake.heartbeats)
    assert endpoint is not None
    assert endpoint.startswith("127.0.0.1:")
    assert any(f"--rdzv_endpoint {endpoint}" in t for t in fake.log_lines)
    assert any("is_host=1" in t for t in fake.log_lines)
