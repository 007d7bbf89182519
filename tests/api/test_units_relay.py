"""Relay pipelines through the HTTP API: units are claimed in dependency order, each stage
starts from the checkpoints its predecessors uploaded, evaluations gate what follows, and a
failed evaluation stops the pipeline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from api_support import (
    FakeClock,
    Wallet,
    Worker,
    job_spec,
    lease_nonces,
    post_verdict,
    release_every_lease,
)
from fastapi.testclient import TestClient
from unit_support import (
    CHECKPOINT,
    UnitWorker,
    chain,
    evaluation,
    job,
    relay_spec,
    sha,
    submit,
    unit_statuses,
    unit_workers,
)

from api.config import ApiConfig
from api.storage import LocalBlobStore
from proofnet.messages.envelope import seal_bytes
from proofnet.messages.sealing import generate_sealing_key

Approved = tuple[Wallet, dict[str, str]]


@pytest.fixture
def workers(worker_factory: Callable[[], Worker]) -> Callable[[], UnitWorker]:
    # Several GPUs each: some tests have one worker hold a stage and a job at once.
    return unit_workers(worker_factory, ("NVIDIA L4", 24576), count=4)


def test_three_stage_relay_with_passing_evaluations_completes(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    store: LocalBlobStore,
) -> None:
    _, auth = approved
    job_id = submit(client, auth, relay_spec(chain(3), evaluation=evaluation()))
    # Units: stages 0-2, then the evaluations of stage 1 (depth 2) and of the final stage.
    created = job(client, auth, job_id)
    assert created["status"] == "running"
    assert [(u["index"], u["kind"], u["status"]) for u in created["units"]] == [
        (0, "stage", "queued"),
        (1, "stage", "blocked"),
        (2, "stage", "blocked"),
        (3, "eval", "blocked"),
        (4, "eval", "blocked"),
    ]
    a, b = workers(), workers()

    first = a.claim()
    assert first["job_id"] == job_id and first["spec"]["topology"]["kind"] == "relay"
    assert first["unit"] == {
        "index": 0,
        "kind": "stage",
        "inputs": [],
        "shards": [0],
        "amount": 100,
        "evaluates": None,
        "rank": None,
        "cluster": None,
    }
    assert first["attempt"] == 1
    b.claim_nothing()  # stage 1 waits for stage 0
    c0 = b"checkpoint after stage 0"
    a.finish_stage(first, c0)

    second = b.claim()
    assert second["unit"]["index"] == 1
    assert second["unit"]["inputs"] == [{"unit": 0, "sha256": sha(c0), "size": len(c0)}]
    got = b.input(second["lease_token"], 0)
    assert got.status_code == 200, got.text
    assert got.content == c0 and got.headers["X-Content-SHA256"] == sha(c0)
    c1 = b"checkpoint after stage 1"
    b.finish_stage(second, c1)
    assert job(client, auth, job_id)["progress"] == pytest.approx(2 / 5)

    # Stage 2 builds on stage 1 but waits for stage 1's evaluation to pass.
    ev = a.claim()
    assert ev["unit"]["kind"] == "eval" and ev["unit"]["evaluates"] == 1
    assert ev["unit"]["inputs"] == [{"unit": 1, "sha256": sha(c1), "size": len(c1)}]
    assert ev["unit"]["shards"] == [0] and ev["unit"]["amount"] == 10
    b.claim_nothing()
    done = a.complete(ev["lease_token"], 3, None, {"loss": "0.42", "acc": 91})
    assert done.status_code == 200, done.text

    third = b.claim()
    assert third["unit"]["index"] == 2
    assert [i["sha256"] for i in third["unit"]["inputs"]] == [sha(c1)]
    c2 = b"final checkpoint"
    b.finish_stage(third, c2)
    final_eval = a.claim()
    assert final_eval["unit"]["evaluates"] == 2
    assert a.complete(final_eval["lease_token"], 4, None, {"loss": 0}).status_code == 200

    finished = job(client, auth, job_id)
    assert finished["status"] == "completed" and finished["progress"] == 1.0
    assert finished["result"] == {
        "final_unit": 2,
        "checkpoint": f"units/2/checkpoint/{CHECKPOINT}",
        "sha256": sha(c2),
    }
    assert [u["status"] for u in finished["units"]] == ["completed"] * 5
    assert finished["units"][3]["metrics"] == {"loss": "0.42", "acc": 91}
    assert finished["units"][0]["provider"] is not None
    assert [u["output"] for u in finished["units"]] == [sha(c0), sha(c1), sha(c2), None, None]
    # Before any verdict the submitter reads nothing; each unit's uploads are released
    # with its own attestation's verdict.
    early = client.get(f"/api/v1/jobs/{job_id}/results", headers=auth)
    assert early.status_code == 409 and "unit 0" in early.json()["detail"], early.text
    # Unit 0 released alone: its checkpoint is served, unit 2's (the model) still is not.
    post_verdict(client, job_id, nonce=lease_nonces(client, job_id)[0])
    listed = client.get(f"/api/v1/jobs/{job_id}/results", headers=auth).json()
    assert [r["name"] for r in listed] == [f"units/0/checkpoint/{CHECKPOINT}"]
    model = client.get(
        f"/api/v1/jobs/{job_id}/results/units/2/checkpoint/{CHECKPOINT}", headers=auth
    )
    assert model.status_code == 409 and "unit 2" in model.json()["detail"], model.text
    assert client.get(f"/api/v1/jobs/{job_id}/release", headers=auth).json()["state"] == "waiting"
    release_every_lease(client, job_id)
    assert client.get(f"/api/v1/jobs/{job_id}/release", headers=auth).json()["state"] == "released"
    # The submitter reads every unit's uploads, named by unit.
    listed = client.get(f"/api/v1/jobs/{job_id}/results", headers=auth).json()
    assert [r["name"] for r in listed] == [
        f"units/0/checkpoint/{CHECKPOINT}",
        f"units/1/checkpoint/{CHECKPOINT}",
        f"units/2/checkpoint/{CHECKPOINT}",
    ]
    final = client.get(
        f"/api/v1/jobs/{job_id}/results/units/2/checkpoint/{CHECKPOINT}", headers=auth
    )
    assert final.status_code == 200 and final.content == c2
    a.claim_nothing()


def test_failed_evaluation_stops_the_pipeline_and_cancels_the_rest(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    store: LocalBlobStore,
) -> None:
    _, auth = approved
    assert (
        client.put(
            "/api/v1/notifications/email", json={"address": "me@example.org"}, headers=auth
        ).status_code
        == 200
    )
    # Two branches (evaluated every stage) averaged into the final model.
    spec = relay_spec(
        [{"shards": [0]}, {"shards": [1]}],
        evaluation=evaluation(every=1, threshold="0.5"),
        aggregation="average",
        aggregate_command=["python", "average.py"],
        aggregate_amount=20,
    )
    job_id = submit(client, auth, spec)
    a, b = workers(), workers()
    branch0, branch1 = a.claim(), b.claim()
    assert {branch0["unit"]["index"], branch1["unit"]["index"]} == {0, 1}
    if branch0["unit"]["index"] == 1:
        a, b, branch0, branch1 = b, a, branch1, branch0
    a.finish_stage(branch0, b"branch 0")
    ev = a.claim()
    assert ev["unit"]["kind"] == "eval" and ev["unit"]["evaluates"] == 0
    # Branch 1 is still running when branch 0's evaluation fails.
    stopped = a.complete(ev["lease_token"], ev["unit"]["index"], None, {"loss": "0.9"})
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["status"] == "stopped"

    view = job(client, auth, job_id)
    assert view["status"] == "stopped"
    assert "loss = 0.9" in view["last_error"] and "<= 0.5" in view["last_error"]
    # Stage 0 and its evaluation completed; the rest (running stage 1, the aggregation,
    # the other evaluations) were cancelled.
    assert [u["status"] for u in view["units"]] == [
        "completed",
        "cancelled",
        "cancelled",
        "completed",
        "cancelled",
        "cancelled",
    ]
    lost = b.heartbeat(branch1["lease_token"])
    assert lost.status_code == 409
    assert "cancelled" in lost.json()["detail"] and "pipeline stopped" in lost.json()["detail"]
    assert b.upload(branch1["lease_token"], f"checkpoint/{CHECKPOINT}", b"x").status_code == 409
    a.claim_nothing()
    status = client.get(f"/api/v1/jobs/{job_id}/status", headers=auth).json()
    assert status["status"] == "stopped" and status["reason"].startswith("stopped: ")
    deliveries = client.get("/api/v1/notifications/deliveries", headers=auth).json()["data"]
    assert [(d["event"], d["payload"]["status"]) for d in deliveries] == [
        ("job.completed", "stopped")
    ]
    # A stopped job is over: it cannot be cancelled any more.
    assert client.post(f"/api/v1/jobs/{job_id}/cancel", headers=auth).status_code == 409


def test_evaluation_missing_its_metric_stops_the_pipeline(
    client: TestClient, approved: Approved, workers: Callable[[], UnitWorker], store: LocalBlobStore
) -> None:
    _, auth = approved
    job_id = submit(client, auth, relay_spec(chain(2), evaluation=evaluation(every=1)))
    w = workers()
    w.finish_stage(w.claim(), b"c0")
    ev = w.claim()
    assert w.complete(ev["lease_token"], ev["unit"]["index"], None, {"acc": 3}).status_code == 200
    view = job(client, auth, job_id)
    assert view["status"] == "stopped" and "reported no metric 'loss'" in view["last_error"]


def test_completion_must_name_the_uploaded_checkpoint(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    store: LocalBlobStore,
    tmp_path: Any,
) -> None:
    _, auth = approved
    job_id = submit(client, auth, relay_spec(chain(2), evaluation=evaluation(every=1)))
    w = workers()
    claim = w.claim()
    token = claim["lease_token"]
    name = f"checkpoint/{CHECKPOINT}"

    nothing = w.complete(token, 0, sha(b"never uploaded"))
    assert nothing.status_code == 409 and f"upload it as '{name}'" in nothing.json()["detail"]
    # The checkpoint is declared by the topology, not by the spec's result globs; other
    # undeclared names stay refused.
    assert w.upload(token, name, b"real checkpoint").status_code == 200
    assert w.upload(token, "checkpoint/other.pt", b"x").status_code == 400
    # Checkpoints are never sealed: the next provider must read them.
    sealed = seal_bytes(
        b"secret",
        name=name,
        recipients=[bytes.fromhex(_public(generate_sealing_key(tmp_path / "s.key"))).hex()],
    )
    refused = w.upload(token, name, sealed)
    assert refused.status_code == 400 and "never sealed" in refused.json()["detail"]

    wrong = w.complete(token, 0, sha(b"something else"))
    assert wrong.status_code == 409
    assert "is not the hash of this lease's uploaded" in wrong.json()["detail"]
    assert w.complete(token, 0, None).status_code == 422
    assert w.complete(token, 1, sha(b"real checkpoint")).status_code == 422
    assert w.lease(token, "complete", {"result": {}}).status_code == 422
    bad_metrics = w.complete(token, 0, sha(b"real checkpoint"), {"loss": 0.5})
    assert bad_metrics.status_code == 422 and "decimal string" in bad_metrics.json()["detail"]
    assert "metrics['loss']" in bad_metrics.json()["detail"]
    # Only what the oracle can read back: metric names and decimal strings are checked.
    for metrics in ({"a b": 1}, {"loss": "abc"}, {"ok": True}):
        refused = w.complete(token, 0, sha(b"real checkpoint"), metrics)
        assert refused.status_code == 422, metrics
    assert unit_statuses(client, auth, job_id)[0] == "leased"
    ok = w.complete(token, 0, sha(b"real checkpoint"))
    assert ok.status_code == 200, ok.text

    ev = w.claim()
    assert ev["unit"]["kind"] == "eval"
    # An evaluation uploads no checkpoint and reports no output.
    assert w.upload(ev["lease_token"], name, b"y").status_code == 400
    assert w.complete(ev["lease_token"], ev["unit"]["index"], "ab" * 32).status_code == 422


def _public(private_key: bytes) -> str:
    from nacl.public import PrivateKey

    return bytes(PrivateKey(private_key).public_key).hex()


def test_inputs_are_read_only_by_the_lease_holder(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    store: LocalBlobStore,
) -> None:
    _, auth = approved
    submit(client, auth, relay_spec(chain(2)))
    a, b, c = workers(), workers(), workers()
    first = a.claim()
    # The first stage starts from the model's initialisation: nothing to read.
    assert a.input(first["lease_token"], 0).status_code == 404
    c0 = b"c0 bytes" * 1000
    a.finish_stage(first, c0)
    second = b.claim()
    token = second["lease_token"]
    assert b.input(token, 0).content == c0
    assert b.input(token, 1).status_code == 404
    # Another worker cannot use the token; the previous stage's ended lease reads nothing.
    assert c.input(token, 0).status_code == 404
    ended = a.input(first["lease_token"], 0)
    assert ended.status_code == 409 and "ended (completed)" in ended.json()["detail"]
    # A single-unit job's lease has no inputs.
    submit(client, auth, job_spec(gpus=1))
    plain = c.worker.claim().json()
    assert plain["unit"] is None
    assert c.input(plain["lease_token"], 0).status_code == 404
    # Once the unit's lease ends, its holder cannot read the input either.
    b.finish_stage(second, b"c1")
    assert b.input(token, 0).status_code == 409


def test_expired_stage_lease_requeues_only_that_stage_with_the_same_inputs(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    clock: FakeClock,
    config: ApiConfig,
    store: LocalBlobStore,
) -> None:
    _, auth = approved
    job_id = submit(client, auth, relay_spec(chain(3)))
    a, b, c = workers(), workers(), workers()
    a.finish_stage(a.claim(), b"stage zero")
    second = b.claim()
    clock.advance(config.lease_ttl_s + 1)
    again = c.claim()  # the claim sweeps expired leases first
    assert again["unit"]["index"] == 1 and again["attempt"] == 2
    assert again["unit"]["inputs"] == second["unit"]["inputs"]
    assert c.input(again["lease_token"], 0).content == b"stage zero"
    lost = b.heartbeat(second["lease_token"])
    assert lost.status_code == 409 and "expired" in lost.json()["detail"]
    view = job(client, auth, job_id)
    assert [u["status"] for u in view["units"]] == ["completed", "leased", "blocked"]
    assert view["units"][1]["attempts"] == 2 and view["failures"] == 1
    assert view["status"] == "running" and "stopped heartbeating" in view["last_error"]


def test_parallel_branches_and_aggregation_waits_for_both(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    store: LocalBlobStore,
) -> None:
    _, auth = approved
    spec = relay_spec(
        [{"shards": [0]}, {"shards": [1]}, {"shards": [2], "after": [1]}],
        aggregation="average",
        aggregate_command=["python", "average.py"],
        aggregate_amount=20,
    )
    job_id = submit(client, auth, spec)
    a, b = workers(), workers()
    left, right = a.claim(), b.claim()
    assert (left["unit"]["index"], right["unit"]["index"]) == (0, 1)
    a.finish_stage(left, b"left")
    a.claim_nothing()  # the aggregation waits for both branches
    b.finish_stage(right, b"right-1")
    right2 = b.claim()
    assert right2["unit"]["index"] == 2
    a.claim_nothing()
    b.finish_stage(right2, b"right-2")
    agg = a.claim()
    assert agg["unit"]["kind"] == "aggregate" and agg["unit"]["index"] == 3
    assert agg["unit"]["amount"] == 20 and agg["unit"]["shards"] == []
    assert agg["unit"]["inputs"] == [
        {"unit": 0, "sha256": sha(b"left"), "size": 4},
        {"unit": 2, "sha256": sha(b"right-2"), "size": 7},
    ]
    assert [a.input(agg["lease_token"], i).content for i in (0, 1)] == [b"left", b"right-2"]
    a.finish_stage(agg, b"averaged")
    done = job(client, auth, job_id)
    assert done["status"] == "completed"
    assert done["result"]["final_unit"] == 3 and done["result"]["sha256"] == sha(b"averaged")


def test_a_unit_out_of_attempts_fails_the_job(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    config: ApiConfig,
    store: LocalBlobStore,
) -> None:
    _, auth = approved
    job_id = submit(client, auth, relay_spec(chain(2)))
    w = workers()
    # A polite release does not use up an attempt.
    released = w.lease(w.claim()["lease_token"], "release", {"reason": "shutting down"})
    assert released.status_code == 200
    for attempt in range(config.max_attempts):
        claim = w.claim()
        assert claim["attempt"] == attempt + 2
        failed = w.lease(claim["lease_token"], "fail", {"reason": "CUDA out of memory"})
        assert failed.status_code == 200, failed.text
    view = job(client, auth, job_id)
    assert view["status"] == "failed"
    assert "unit 0 (stage)" in view["last_error"] and "CUDA out of memory" in view["last_error"]
    assert [u["status"] for u in view["units"]] == ["failed", "cancelled"]
    w.claim_nothing()


def test_cancel_ends_the_units_and_their_leases(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    store: LocalBlobStore,
) -> None:
    _, auth = approved
    job_id = submit(client, auth, relay_spec(chain(2)))
    w = workers()
    claim = w.claim()
    status = client.get(f"/api/v1/jobs/{job_id}/status", headers=auth).json()
    assert status["status"] == "running"
    assert "0 of 2 units completed" in status["reason"]
    assert "unit 0 (stage) running on provider" in status["reason"]
    assert [u["status"] for u in status["units"]] == ["leased", "blocked"]
    assert status["last_heartbeat_at"] is None
    assert w.heartbeat(claim["lease_token"]).status_code == 200
    assert client.get(f"/api/v1/jobs/{job_id}/status", headers=auth).json()["last_heartbeat_at"]

    cancelled = client.post(f"/api/v1/jobs/{job_id}/cancel", headers=auth)
    assert cancelled.status_code == 200
    assert [u["status"] for u in cancelled.json()["units"]] == ["cancelled", "cancelled"]
    lost = w.heartbeat(claim["lease_token"])
    assert lost.status_code == 409 and "cancelled by the owner" in lost.json()["detail"]
    w.claim_nothing()
    listed = client.get("/api/v1/jobs?status=cancelled", headers=auth).json()
    assert [j["job_id"] for j in listed["data"]] == [job_id]


def test_single_unit_jobs_are_claimed_in_order_with_units(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    clock: FakeClock,
    store: LocalBlobStore,
) -> None:
    """The claim hands out the oldest claimable job or unit."""
    _, auth = approved
    submit(client, auth, job_spec(gpus=1))
    clock.advance(1)
    relay_id = submit(client, auth, relay_spec(chain(2)))
    clock.advance(1)
    submit(client, auth, job_spec(gpus=1))
    w = workers()
    assert w.worker.claim().json()["unit"] is None
    unit = w.claim()
    assert unit["job_id"] == relay_id and unit["unit"]["index"] == 0
    assert w.worker.claim().json()["unit"] is None
    # Stage 1 of the older pipeline goes before any job submitted after it.
    submit(client, auth, job_spec(gpus=1))
    w.finish_stage(unit, b"c0")
    assert w.claim()["unit"]["index"] == 1
