"""Relay stages are measured runs of their workload, on SQLite and PostgreSQL: each
completed stage records its time per share of the data it trained on, so estimates of the
workload (a relay's, or a single run's over the same data) narrow from the stages that ran.
Evaluations are not measurements of the workload."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from api_support import FakeClock, Wallet, Worker
from fastapi.testclient import TestClient
from sqlmodel import Session, col, select
from unit_support import UnitWorker, chain, evaluation, relay_spec, submit

from api.config import ApiConfig
from api.models import Job, MeasuredRun
from api.storage import LocalBlobStore

Approved = tuple[Wallet, dict[str, str]]


@pytest.fixture
def config(make_config: Callable[..., ApiConfig], database_url: str) -> ApiConfig:
    return make_config(database_url=database_url, lease_ttl_s=3600)


def _estimate(client: TestClient, auth: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/api/v1/estimates", json={"spec": spec}, headers=auth)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _measured(session: Session) -> list[tuple[str, str, int, float, float]]:
    """The measured runs (job id, GPU model and count, seconds, share of the data)."""
    rows = session.exec(
        select(Job.job_id, MeasuredRun).join(Job, col(Job.id) == col(MeasuredRun.job_id))
    ).all()
    out = [
        (j, m.gpu_model, m.gpu_count, round(m.elapsed_s, 6), round(m.progress, 6)) for j, m in rows
    ]
    session.rollback()  # SQLite: every transaction holds the write lock
    return out


def test_completed_stages_narrow_estimates_of_their_workload(
    client: TestClient,
    approved: Approved,
    worker_factory: Callable[[], Worker],
    store: LocalBlobStore,
    session: Session,
    clock: FakeClock,
) -> None:
    _, auth = approved
    # Three stages over one of the four data shards each; an evaluation after the 2nd.
    spec = relay_spec(chain(3), evaluation=evaluation())
    assert _estimate(client, auth, spec)["basis"] == "resources"
    job_id = submit(client, auth, spec)
    worker = worker_factory()
    worker.register([("NVIDIA L4", 24576)])
    w = UnitWorker(worker)

    stage = w.claim()
    clock.advance(100)  # no metered usage reported: the lease's time stands
    w.finish_stage(stage, b"checkpoint 0")
    stage = w.claim()
    clock.advance(300)
    w.finish_stage(stage, b"checkpoint 1")
    ev = w.claim()
    assert ev["unit"]["kind"] == "eval"
    clock.advance(50)
    assert w.complete(ev["lease_token"], 3, None, {"loss": "0.1"}).status_code == 200

    # 400 s for 2 of the 4 shards on one L4; the evaluation's 50 s are not the workload's.
    assert _measured(session) == [(job_id, "NVIDIA L4", 1, 400.0, 0.5)]

    for other in (
        dict(spec, seed=spec["seed"] + 1),  # the same relay again
        {k: v for k, v in spec.items() if k != "topology"},  # one run over all the data
    ):
        narrowed = _estimate(client, auth, other)
        assert narrowed["basis"] == "measured", narrowed
        (measured,) = narrowed["measurements"]
        assert measured["gpu_model"] == "NVIDIA L4" and measured["projected_s"] == 800
        assert narrowed["time_s"]["low"] == pytest.approx(800 * 0.95)
        assert narrowed["time_s"]["high"] == pytest.approx(800 * 1.05)

    # The last stage adds its own measurement to the job's row: 200 s for one more shard.
    stage = w.claim()
    assert stage["unit"]["index"] == 2
    clock.advance(200)
    w.finish_stage(stage, b"checkpoint 2")
    assert _measured(session) == [(job_id, "NVIDIA L4", 1, 600.0, 0.75)]


def test_a_relay_is_bounded_by_its_stages_runs_not_one_run() -> None:
    """max_duration_s bounds each stage's run: a 3-stage relay's pass over the data may take
    three times as long without being "cut off"; a single run may not."""
    from api.services.estimates import Market, Measurement, estimate
    from proofnet.messages.jobspec import JobSpec

    relay = relay_spec(chain(3))
    relay["resources"] = dict(relay["resources"], max_duration_s=300)
    single = {k: v for k, v in relay.items() if k != "topology"}
    market = Market(gpu_models=("NVIDIA L4",), rates=())
    measured = [Measurement("NVIDIA L4", 1, 800.0, "completed")]

    pipeline = estimate(JobSpec.from_dict(relay), market, measured)
    assert (pipeline.time_s.low, pipeline.time_s.high) == pytest.approx((760, 840))
    assert not any("cut off" in n for n in pipeline.notes)

    one_run = estimate(JobSpec.from_dict(single), market, measured)
    assert (one_run.time_s.low, one_run.time_s.high) == (300, 300)
    assert any("cut off" in n for n in one_run.notes)
