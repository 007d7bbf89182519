"""The agent claims cluster nodes only when its runtime can network them, gives back a node
it cannot run (an API that ignored its claim body), and runs a node's torchrun, and only
that command, as a cluster node pointed at the worker's advertised host."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pycardano import Address, Network, PaymentSigningKey
from relay_fixtures import RelayRepo, claim_unit, multinode_spec, relay_repo  # noqa: F401
from unit_fakes import FakeApi, FakeOracle, claim_body, published_rendezvous

from proofnet.messages.jobspec import JobSpec
from worker.agent import Agent, AgentConfig
from worker.api_client import ApiClient
from worker.identity import create_key
from worker.oracle_client import OracleClient
from worker.runtime.base import LogCallback, RunSpec
from worker.runtime.process_runtime import ProcessRunHandle, ProcessRuntime
from worker.telemetry import TelemetrySampler
from worker.workspace import RepoCache

CLAIM_PATH = "/api/v1/worker/claim"
# What runs instead of torchrun: the test needs neither torch nor a second node, only a
# run that lasts until the cluster "fails".
STAND_IN = ("python3", "-c", "import time; time.sleep(60)")


@pytest.fixture(autouse=True)
def _job_path(monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = Path(sys.executable).parent
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


class RecordingRuntime(ProcessRuntime):
    """The process runtime, saying it can (or cannot) network cluster nodes, recording what
    it is asked to run and running a stand-in for a cluster node's torchrun."""

    def __init__(self, *, cluster_networking: bool) -> None:
        super().__init__()
        self.cluster_networking = cluster_networking
        self.specs: list[RunSpec] = []

    def run(
        self, spec: RunSpec, on_log: LogCallback | None = None, log_file: Path | None = None
    ) -> ProcessRunHandle:
        self.specs.append(spec)
        if spec.cluster_node:
            spec = dataclasses.replace(spec, argv=STAND_IN)
        return super().run(spec, on_log=on_log, log_file=log_file)


class Rig:
    def __init__(self, tmp: Path, repo: RelayRepo, fake: FakeApi, runtime: RecordingRuntime):
        self.fake, self.runtime, self.claims = fake, runtime, []
        key = create_key(tmp / "worker.skey")
        payout = str(
            Address(
                PaymentSigningKey.generate().to_verification_key().hash(), network=Network.TESTNET
            )
        )
        config = AgentConfig(
            work_dir=tmp / "work",
            network="devnet",
            payout_address=payout,
            # Beats come faster than a checkout: node 0 always beats before it publishes
            # its rendezvous, as on a loaded machine (the fakes must not read beats[0]).
            heartbeat_s=0.05,
            poll_interval_s=0.1,
            oracle_retry_base_s=0.01,
            advertise_host="127.0.0.1",
        )

        def handler(request: httpx.Request) -> httpx.Response:
            if request.url.path == CLAIM_PATH:
                self.claims.append(json.loads(request.content))
            return fake.handler(request)

        self.api = ApiClient(
            "http://api.test", key, "devnet", transport=httpx.MockTransport(handler)
        )
        self.oracle = OracleClient("http://oracle.test", transport=FakeOracle().transport)
        self.sampler = TelemetrySampler(interval_s=1.0)
        self.agent = Agent(
            config,
            api=self.api,
            oracle=self.oracle,
            runtime=runtime,
            sampler=self.sampler,
            key=key,
            repos=RepoCache(config.repo_cache_dir, rewrites=repo.rewrites),
        )

    def close(self) -> None:
        self.api.close()
        self.oracle.close()
        self.sampler.close()


@pytest.fixture
def rig_factory(tmp_path: Path, relay_repo: RelayRepo) -> Iterator[Any]:  # noqa: F811
    rigs: list[Rig] = []

    def make(fake: FakeApi, *, cluster_networking: bool) -> Rig:
        runtime = RecordingRuntime(cluster_networking=cluster_networking)
        rig = Rig(tmp_path / f"rig{len(rigs)}", relay_repo, fake, runtime)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.close()


def _node_claim(repo: RelayRepo, token: str) -> tuple[dict[str, Any], str]:
    spec = multinode_spec(repo)
    job_id = JobSpec.from_dict(spec).job_id
    waiting = {"state": "waiting", "world_size": 2, "rank": 0, "endpoint": None}
    node = claim_unit(
        0, "node", amount=400_000, rank=0, cluster={**waiting, "rdzv_id": f"{job_id}-1"}
    )
    return claim_body(spec, node, token=token), job_id


@pytest.mark.parametrize("networking", [True, False])
def test_the_claim_says_whether_the_worker_runs_cluster_nodes(
    rig_factory: Any, networking: bool
) -> None:
    rig = rig_factory(FakeApi(), cluster_networking=networking)
    assert rig.agent.run(once=True).jobs == 0  # nothing queued
    assert rig.claims == [{"accepts": {"cluster": networking, "egress": False}}]


def test_a_node_this_runtime_cannot_network_is_given_back_unrun(
    rig_factory: Any,
    relay_repo: RelayRepo,  # noqa: F811
) -> None:
    body, _ = _node_claim(relay_repo, "tok-1")
    fake = FakeApi(claims=[body])
    rig = rig_factory(fake, cluster_networking=False)
    outcome = rig.agent.run(once=True).outcomes[0]
    assert outcome.status == "released"
    ((how, reason),) = fake.ended
    assert how == "release" and "--allow-cluster-networking" in reason
    # Released without fault, before joining the cluster or running anything.
    assert rig.runtime.specs == []
    assert not any("rendezvous" in beat for beat in fake.heartbeats)


def test_only_a_nodes_torchrun_runs_as_a_cluster_node_at_the_advertised_host(
    rig_factory: Any,
    relay_repo: RelayRepo,  # noqa: F811
) -> None:
    body, job_id = _node_claim(relay_repo, "tok-2")

    def cluster(beats: list[dict[str, Any]]) -> dict[str, Any]:
        endpoint = published_rendezvous(beats)
        return {
            "state": "ready" if endpoint else "waiting",
            "world_size": 2,
            "rank": 0,
            "endpoint": endpoint,
            "rdzv_id": f"{job_id}-1",
        }

    since: list[float] = []

    def lost(beats: list[dict[str, Any]]) -> bool:
        # The other node "dies" a moment into this node's torchrun.
        if not since and beats[-1].get("message") == "running command 2/2":
            since.append(time.monotonic())
        return bool(since) and time.monotonic() - since[0] > 0.5

    fake = FakeApi(claims=[body], cluster=cluster, lost=lost)
    rig = rig_factory(fake, cluster_networking=True)
    outcome = rig.agent.run(once=True).outcomes[0]
    assert outcome.status == "lost", outcome.reason

    prep, train = rig.runtime.specs
    assert not prep.cluster_node and prep.argv == ("python3", "-c", "print('node ready')")
    assert train.cluster_node and train.argv[0] == "torchrun"
    assert train.argv[train.argv.index("--local-addr") + 1] == "127.0.0.1"
    assert train.argv[-4:] == ("python3", "ddp.py", "--steps", "30")
    for spec in (prep, train):
        assert not spec.network_egress  # the spec asks for none: only the node is networked
        assert spec.env["GLOO_SOCKET_IFNAME"] == spec.env["NCCL_SOCKET_IFNAME"] == "lo"
        assert spec.env["PROOFNET_RDZV_ENDPOINT"] == published_rendezvous(fake.heartbeats)


def test_an_egress_job_from_an_api_that_ignored_the_claim_is_given_back_unrun(
    rig_factory: Any,
    relay_repo: RelayRepo,  # noqa: F811
) -> None:
    """The worker's own check, for an API that hands out an egress job anyway."""
    spec = {**multinode_spec(relay_repo), "topology": None, "egress": True}
    fake = FakeApi(claims=[claim_body(spec, None, token="tok-e")])
    rig = rig_factory(fake, cluster_networking=False)
    outcome = rig.agent.run(once=True).outcomes[0]
    assert outcome.status == "released"
    ((how, reason),) = fake.ended
    assert how == "release" and "egress" in reason
    assert rig.runtime.specs == []
