"""The worker's parts for topology units: the claimed unit checked against the plan, verified
input downloads, heartbeats with a rendezvous, metrics, the unit environment, the cluster
wait and torchrun wrapping, and the numpy relay model's entry points."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
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
from unit_fakes import FakeApi, claim_body

from pot import env, harness
from pot.examples import numpy_relay
from pot.manifest import Manifest, weights_path
from pot.schedule import Schedule
from pot.tensors import read_tensors
from pot.trainer import TrainContext
from proofnet.messages.jobspec import JobSpec
from worker import units
from worker.api_client import ApiClient, BadClaim, InputRejected, LeaseLost, parse_claim
from worker.cluster import (
    ClusterTimeout,
    Rendezvous,
    free_endpoint,
    node_commands,
    torchrun_argv,
    wait_for_cluster,
)
from worker.identity import load_or_create_key
from worker.lease_keeper import LeaseKeeper
from worker.unit_claim import parse_cluster

SHA = "1" * 64


def _client(tmp_path: Path, fake: FakeApi) -> ApiClient:
    key, _ = load_or_create_key(tmp_path / "w.skey")
    return ApiClient("http://api.test", key, "devnet", transport=fake.transport)


# --- the claim ------------------------------------------------------------------------------


def test_claimed_units_must_be_the_planned_ones(
    relay_repo: RelayRepo,  # noqa: F811
    shards: Shards,  # noqa: F811
) -> None:
    spec = relay_spec(relay_repo, shards)
    stage = claim_unit(
        1, "stage", amount=300_000, shards=[1], inputs=[{"unit": 0, "sha256": SHA, "size": 9}]
    )
    claimed = parse_claim(claim_body(spec, stage, token="t"))
    assert claimed.unit is not None
    assert (claimed.unit.index, claimed.unit.kind, claimed.unit.shards) == (1, "stage", (1,))
    assert claimed.unit.input_hashes == (SHA,) and claimed.unit.amount == 300_000
    ev = claim_unit(
        4,
        "eval",
        amount=50_000,
        shards=[0],
        evaluates=2,
        inputs=[{"unit": 2, "sha256": SHA, "size": 9}],
    )
    assert parse_claim(claim_body(spec, ev, token="t")).unit.evaluates == 2  # type: ignore[union-attr]

    wrong = [
        ({**stage, "amount": 2_000_000}, "amount 2000000"),  # more than the plan pays
        ({**stage, "shards": [2]}, "shards"),
        ({**stage, "inputs": [{"unit": 2, "sha256": SHA, "size": 9}]}, "inputs"),
        ({**stage, "inputs": [{"unit": 0, "sha256": "XY", "size": 9}]}, "sha256"),
        ({**stage, "kind": "eval"}, "kind"),
        ({**stage, "index": 9}, "0..4"),
        ({**stage, "cluster": {"state": "ready"}}, "cluster"),
    ]
    for unit, said in wrong:
        with pytest.raises(BadClaim, match=said):
            parse_claim(claim_body(spec, unit, token="t"))
    with pytest.raises(BadClaim, match="names no unit"):
        parse_claim(claim_body(spec, None, token="t"))
    single = {k: v for k, v in spec.items() if k not in ("topology", "data")}
    single["pricing"] = {"kind": "fixed", "amount": 5}
    assert parse_claim(claim_body(single, None, token="t")).unit is None
    with pytest.raises(BadClaim, match="no topology"):
        parse_claim(claim_body(single, stage, token="t"))


def test_node_claims_carry_their_cluster(relay_repo: RelayRepo) -> None:  # noqa: F811
    spec = multinode_spec(relay_repo)
    job_id = JobSpec.from_dict(spec).job_id
    cluster = {
        "state": "waiting",
        "world_size": 2,
        "rank": 1,
        "endpoint": None,
        "rdzv_id": f"{job_id}-1",
    }
    node = claim_unit(1, "node", amount=400_000, rank=1, cluster=cluster)
    claimed = parse_claim(claim_body(spec, node, token="t"))
    assert claimed.unit is not None and claimed.unit.cluster is not None
    assert claimed.unit.cluster.state == "waiting" and not claimed.unit.cluster.ready
    with pytest.raises(BadClaim, match="rank 0 of 2"):
        parse_claim(claim_body(spec, {**node, "cluster": {**cluster, "rank": 0}}, token="t"))
    with pytest.raises(BadClaim, match="has no cluster"):
        parse_claim(claim_body(spec, {**node, "cluster": None}, token="t"))
    for bad in ("nohost", "h:0", "h:70000", "a b:1"):
        with pytest.raises(ValueError, match="host:port"):
            parse_cluster({**cluster, "endpoint": bad})
    assert parse_cluster({**cluster, "state": "ready", "endpoint": "[::1]:29500"}).ready


# --- inputs and heartbeats over HTTP ----------------------------------------------------------


def test_input_checkpoints_are_verified_on_arrival(tmp_path: Path) -> None:
    data = b"checkpoint bytes" * 1000
    good = hashlib.sha256(data).hexdigest()
    # Input 1 is announced under another hash; input 2 under the pinned one, but its bytes
    # are not those.
    fake = FakeApi(inputs={0: data, 1: data, 2: data}, announce={1: "2" * 64, 2: "3" * 64})
    dest = tmp_path / "in" / "input-0"
    with _client(tmp_path, fake) as api:
        assert api.download_input("tok", 0, dest, good) == (len(data), good)
        assert dest.read_bytes() == data
        # Bytes that do not hash to the pinned value are refused and deleted.
        with pytest.raises(InputRejected, match="arrived with SHA-256 .* not the 3{64}"):
            api.download_input("tok", 2, tmp_path / "in" / "bad", "3" * 64)
        # An announced hash other than the pinned one is refused before any byte is kept.
        with pytest.raises(InputRejected, match="announced as SHA-256 2{64}"):
            api.download_input("tok", 1, tmp_path / "in" / "bad", good)
    assert sorted(p.name for p in (tmp_path / "in").iterdir()) == ["input-0"]

    gone = FakeApi()
    gone.handler = lambda request: httpx.Response(409, json={"detail": "lease ended"})  # type: ignore[method-assign]
    with _client(tmp_path, gone) as api, pytest.raises(LeaseLost, match="lease ended"):
        api.download_input("tok", 0, tmp_path / "in" / "x", good)
    assert sorted(p.name for p in (tmp_path / "in").iterdir()) == ["input-0"]


def test_heartbeat_publishes_the_rendezvous_and_reads_the_cluster(tmp_path: Path) -> None:
    cluster = {"state": "ready", "world_size": 2, "rank": 0, "endpoint": "10.0.0.5:29500"}
    fake = FakeApi(cluster=lambda beats: {**cluster, "rdzv_id": "job-1"})
    with _client(tmp_path, fake) as api:
        state = api.lease_heartbeat("tok", message="m", rendezvous="10.0.0.5:29500")
        plain = api.lease_heartbeat("tok")
    assert fake.heartbeats == [{"message": "m", "rendezvous": "10.0.0.5:29500"}, {}]
    assert state.cluster is not None and state.cluster.ready
    assert state.cluster.endpoint == "10.0.0.5:29500" and plain.cluster == state.cluster


# --- the cluster ------------------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_node_zero_publishes_a_free_port_and_starts_when_the_cluster_is_ready(
    tmp_path: Path,
) -> None:
    def cluster(beats: list[dict[str, Any]]) -> dict[str, Any]:
        published = beats[-1].get("rendezvous")
        ready = len(beats) >= 3 and published is not None
        return {
            "state": "ready" if ready else "waiting",
            "world_size": 2,
            "rank": 0,
            "endpoint": published,
            "rdzv_id": "job-7",
        }

    fake = FakeApi(cluster=cluster)
    clock = _Clock()
    with _client(tmp_path, fake) as api:
        keeper = LeaseKeeper(api, "tok", interval_s=5, ttl_s=30)
        rdzv = wait_for_cluster(
            keeper,
            rank=0,
            advertise_host="127.0.0.1",
            timeout_s=60,
            clock=clock,
            sleep=clock.sleep,
        )
    host, port = rdzv.endpoint.rsplit(":", 1)
    assert host == "127.0.0.1" and 1024 <= int(port) <= 65535
    assert all(b["rendezvous"] == rdzv.endpoint for b in fake.heartbeats)
    assert (rdzv.rdzv_id, rdzv.nnodes, rdzv.rank) == ("job-7", 2, 0) and len(fake.heartbeats) == 3


def test_cluster_wait_is_bounded_and_ends_with_the_lease(tmp_path: Path) -> None:
    waiting = {"state": "waiting", "world_size": 2, "rank": 1, "endpoint": None, "rdzv_id": "j-1"}
    fake = FakeApi(cluster=lambda beats: waiting)
    clock = _Clock()
    with _client(tmp_path, fake) as api:
        keeper = LeaseKeeper(api, "tok", interval_s=5, ttl_s=30)
        with pytest.raises(ClusterTimeout, match="within 10s .*waiting"):
            wait_for_cluster(
                keeper,
                rank=1,
                advertise_host="127.0.0.1",
                timeout_s=10,
                clock=clock,
                sleep=clock.sleep,
            )
        assert "rendezvous" not in fake.heartbeats[0]  # only node 0 publishes
        # The API ends the lease (another node was lost): 409, and the wait stops at once.
        lost = FakeApi(cluster=lambda beats: waiting, lost=lambda beats: len(beats) >= 2)
    with _client(tmp_path, lost) as api:
        keeper = LeaseKeeper(api, "tok", interval_s=5, ttl_s=30)
        with pytest.raises(LeaseLost, match="lost node 1"):
            wait_for_cluster(
                keeper,
                rank=1,
                advertise_host="127.0.0.1",
                timeout_s=100,
                clock=clock,
                sleep=clock.sleep,
            )
        assert keeper.lost.is_set()
    with pytest.raises(ValueError, match="advertised host"):
        free_endpoint("192.0.2.99")  # TEST-NET: not an address of this machine


def test_the_last_command_runs_under_torchrun() -> None:
    rdzv = Rendezvous(endpoint="10.1.2.3:29400", rdzv_id="abc-2", nnodes=3, rank=0)
    commands = node_commands([["python3", "prep.py"], ["python3", "train.py", "-x"]], rdzv, 2)
    assert commands[0] == ("python3", "prep.py")
    assert commands[1] == (
        "torchrun",
        "--nnodes",
        "3",
        "--node_rank",
        "0",
        "--nproc_per_node",
        "2",
        "--rdzv_backend",
        "static",
        "--rdzv_endpoint",
        "10.1.2.3:29400",
        "--rdzv_id",
        "abc-2",
        "--rdzv_conf",
        "is_host=1",
        "--no-python",
        "python3",
        "train.py",
        "-x",
    )
    other = Rendezvous(endpoint="10.1.2.3:29400", rdzv_id="abc-2", nnodes=3, rank=2)
    assert "is_host=0" in torchrun_argv(["a"], other, 1)


# --- metrics, environment ---------------------------------------------------------------------


def test_evaluation_metrics_are_integers_or_decimal_strings() -> None:
    assert units.parse_metrics(b'{"loss": "0.1234", "n": 7}', required="loss") == {
        "loss": "0.1234",
        "n": 7,
    }
    refused = {
        b'{"loss": 0.1234}': "not a float",
        b'{"loss": "1e-3"}': "decimal string",
        b'{"loss": true}': "decimal string",
        b'{"loss": "NaN"}': "decimal string",
        b'["loss"]': "JSON object",
        b"{loss": "not JSON",
        b'{"bad name": "1"}': "metric name",
        b'{"accuracy": "0.9"}': "not 'loss'",
        b'{"loss": 99999999999999999999}': "64 bits",
    }
    for raw, said in refused.items():
        with pytest.raises(units.UnitError, match=said):
            units.parse_metrics(raw, required="loss")


def test_unit_environment_names_paths_as_the_job_sees_them(
    tmp_path: Path,
    relay_repo: RelayRepo,  # noqa: F811
    shards: Shards,  # noqa: F811
) -> None:
    spec = relay_spec(relay_repo, shards)
    stage = claim_unit(
        1, "stage", amount=300_000, shards=[1], inputs=[{"unit": 0, "sha256": SHA, "size": 9}]
    )
    unit = parse_claim(claim_body(spec, stage, token="t")).unit
    assert unit is not None
    job = tmp_path / "job"
    environ = units.unit_env(
        JobSpec.from_dict(spec),
        unit,
        job_dir=job,
        seen_as=Path("/work"),
        inputs=(job / units.INPUTS_DIR / "input-0",),
        shards=(job / "data" / "shard-1.bin",),
    )
    assert environ == {
        env.UNIT_KIND: "stage",
        env.UNIT_INDEX: "1",
        env.INPUT_CHECKPOINTS: "/work/.proofnet/inputs/input-0",
        env.SHARDS: "/work/data/shard-1.bin",
        env.CHECKPOINT_OUT: f"/work/{CHECKPOINT}",
    }
    assert env.UnitEnv.read(environ).input_checkpoints == (Path("/work/.proofnet/inputs/input-0"),)
    first = claim_unit(0, "stage", amount=300_000, shards=[0])
    unit0 = parse_claim(claim_body(spec, first, token="t")).unit
    assert unit0 is not None
    environ0 = units.unit_env(
        JobSpec.from_dict(spec), unit0, job_dir=job, seen_as=job, inputs=(), shards=()
    )
    assert environ0[env.INPUT_CHECKPOINTS] == ""  # a branch start: no input
    assert env.UnitEnv.read(environ0).input_checkpoints == ()
    with pytest.raises(units.UnitError, match="contains ':'"):
        units.unit_env(
            JobSpec.from_dict(spec),
            unit,
            job_dir=job,
            seen_as=Path("/a:b"),
            inputs=(job / "in",),
            shards=(),
        )


# --- the numpy relay model --------------------------------------------------------------------


def test_relay_model_trains_on_from_a_checkpoint_evaluates_and_averages(
    tmp_path: Path,
    shards: Shards,  # noqa: F811
) -> None:
    def train_stage(job_dir: Path, unit: env.UnitEnv, steps: int, hidden: int) -> Manifest:
        """A stage as the worker's harness trains it."""
        job_dir.mkdir()
        schedule = Schedule(
            total_steps=steps, steps_per_checkpoint=10, dataset_size=512, batch_size=32
        )
        ctx = TrainContext(
            job_dir, 5, unit.index + 7, schedule, {"hidden": hidden, "classes": 4}, unit
        )
        trainer = numpy_relay.StageTrainer(ctx)
        manifest = harness.train(trainer, ctx, job_dir / "pot")
        trainer.finish()
        return manifest

    first = env.UnitEnv(
        kind="stage", index=0, shards=(shards.train[0],), checkpoint_out=tmp_path / "c0"
    )
    manifest = train_stage(tmp_path / "s0", first, steps=30, hidden=16)
    assert manifest.total_steps == 30
    c0, _ = read_tensors(tmp_path / "c0")
    assert set(c0) == set(numpy_relay.CHECKPOINT_NAMES) and c0["W1"].shape == (32, 16)
    # The proof's first checkpoint is the model the stage started from.
    start, _ = read_tensors(weights_path(tmp_path / "s0" / "pot", 0))
    init = numpy_relay._trainer(
        *numpy_relay.load_shards(first.shards),
        start=None,
        hidden=16,
        classes=4,
        batch_size=32,
        lr=0.05,
        job_seed=5,
        unit_index=0,
    )
    assert all(np.array_equal(start[n], init.params[n]) for n in numpy_relay.PARAM_NAMES)

    second = env.UnitEnv(
        kind="stage",
        index=1,
        input_checkpoints=(tmp_path / "c0",),
        shards=(shards.train[1],),
        checkpoint_out=tmp_path / "c1",
    )
    # The input checkpoint's shape wins over the configured one when a stage continues.
    train_stage(tmp_path / "s1", second, steps=20, hidden=99)
    started, _ = read_tensors(weights_path(tmp_path / "s1" / "pot", 0))
    assert all(np.array_equal(started[n], c0[n]) for n in numpy_relay.PARAM_NAMES)

    ev = env.UnitEnv(
        kind="eval",
        index=3,
        input_checkpoints=(tmp_path / "c1",),
        shards=shards.held_out,
        metrics_out=tmp_path / "m.json",
    )
    metrics = numpy_relay.evaluate(ev)
    assert json.loads((tmp_path / "m.json").read_text()) == metrics
    assert units.parse_metrics((tmp_path / "m.json").read_bytes(), required="loss") == metrics
    assert 0 < float(metrics["loss"]) < 5

    avg = env.UnitEnv(
        kind="aggregate",
        index=3,
        input_checkpoints=(tmp_path / "c0", tmp_path / "c1"),
        checkpoint_out=tmp_path / "avg",
    )
    digest = numpy_relay.average_inputs(avg)
    averaged, got = read_tensors(tmp_path / "avg")
    c1, _ = read_tensors(tmp_path / "c1")
    assert got == digest and np.allclose(averaged["W2"], (c0["W2"] + c1["W2"]) / 2)
    with pytest.raises(numpy_relay.RelayError, match="not a relay checkpoint"):
        numpy_relay.read_checkpoint(shards.train[0])


def test_advertise_host_comes_from_the_flag_or_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    import worker.agent
    from worker.cli import app

    seen: list[str] = []

    class _Agent:
        def __init__(self, config: Any, **_: Any) -> None:
            seen.append(config.advertise_host)
            self.stopping = False

        def run(self, **_: Any) -> Any:
            return worker.agent.AgentStats(jobs=0, outcomes=(), stopped_by_signal=False)

    monkeypatch.setattr(worker.agent, "Agent", _Agent)
    load_or_create_key(tmp_path / "w.skey")
    args = ["run", "--runtime", "process", "--key-file", str(tmp_path / "w.skey")]
    args += ["--work-dir", str(tmp_path / "work"), "--payout-address", "addr_test1x"]
    runner = CliRunner()
    assert runner.invoke(app, args).exit_code == 0
    monkeypatch.setenv("PROOFNET_WORKER_ADVERTISE_HOST", "10.0.0.7")
    assert runner.invoke(app, args).exit_code == 0
    assert runner.invoke(app, [*args, "--advertise-host", "node-a.lan"]).exit_code == 0
    assert seen == ["127.0.0.1", "10.0.0.7", "node-a.lan"]


def test_process_runtime_verification_is_refused_off_the_devnet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PROOFNET_WORKER_DEMO_PROCESS_VERIFY runs other providers' job code unisolated: the
    worker will not start with it on any network but the devnet (its honest twin starts)."""
    from typer.testing import CliRunner

    import worker.agent
    from worker.cli import app

    started: list[bool] = []

    class _Agent:
        def __init__(self, config: Any, **_: Any) -> None:
            started.append(config.demo_process_verify)
            self.stopping = False

        def run(self, **_: Any) -> Any:
            return worker.agent.AgentStats(jobs=0, outcomes=(), stopped_by_signal=False)

    monkeypatch.setattr(worker.agent, "Agent", _Agent)
    monkeypatch.setenv("PROOFNET_WORKER_DEMO_PROCESS_VERIFY", "true")
    load_or_create_key(tmp_path / "w.skey")
    args = ["run", "--runtime", "process", "--key-file", str(tmp_path / "w.skey")]
    args += ["--work-dir", str(tmp_path / "work"), "--payout-address", "addr_test1x"]
    refused = CliRunner().invoke(app, [*args, "--network", "preprod"])
    assert refused.exit_code == 2 and "devnet only" in refused.output, refused.output
    assert started == []
    assert CliRunner().invoke(app, [*args, "--network", "devnet"]).exit_code == 0
    assert started == [True]
