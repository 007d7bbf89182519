"""The oracle reads a topology job's `units` from the API's feed strictly: the units must be
the plan's, with well-formed leases, digests, metrics and uploads; single-unit jobs are
read as before."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from oracle_fixtures import job_spec
from unit_fixtures import relay_topology, topology_spec

from oracle.inputs.feed import FeedDataError, parse_job
from oracle.inputs.feed_units import unit_result_name

LEASE = {
    "worker_key": "ab" * 32,
    "payout_address": "addr_test1vq",
    "nonce": "cd" * 32,
    "gpus": 1,
    "started_at": "2025-01-01T00:00:00+00:00",
    "completed_at": "2025-01-01T01:00:00Z",
    "attempt": 2,
}


def _feed(units: Any, status: str = "running") -> dict[str, Any]:
    spec = topology_spec(relay_topology(stages=2, every=1), seed=7)
    return {
        "job_id": spec.job_id,
        "spec": spec.canonical_bytes().decode(),
        "status": status,
        "escrow": {"tx_id": "ee" * 32, "index": 1},
        "lease": None,
        "results": {},
        "units": units,
    }


def _units() -> list[dict[str, Any]]:
    # Stages 0 and 1; evaluation 2 of stage 0, evaluation 3 of stage 1 (every stage).
    return [
        {
            "index": 0,
            "kind": "stage",
            "status": "completed",
            "lease": LEASE,
            "inputs": [],
            "output": "11" * 32,
            "metrics": {"loss": "0.5", "steps": 100},
            "results": {"checkpoint/model.npz": "11" * 32, "pot/manifest.json": "22" * 32},
        },
        {
            "index": 1,
            "kind": "stage",
            "status": "leased",
            "lease": None,
            "inputs": [{"unit": 0, "sha256": "11" * 32, "size": 10}],
            "output": None,
            "metrics": {},
            "results": {},
        },
        {"index": 2, "kind": "eval", "status": "queued", "lease": None, "inputs": ["11" * 32]},
        {"index": 3, "kind": "eval", "status": "blocked", "lease": None},
    ]


def _parse(feed: dict[str, Any]) -> Any:
    return parse_job(feed, expected_job_id=feed["job_id"])


def test_units_are_parsed_into_frozen_values() -> None:
    job = _parse(_feed(_units()))
    assert [(u.index, u.kind, u.status) for u in job.units] == [
        (0, "stage", "completed"),
        (1, "stage", "leased"),
        (2, "eval", "queued"),
        (3, "eval", "blocked"),
    ]
    stage = job.unit(0)
    assert stage.completed and stage.lease.attempt == 2 and stage.lease.gpus == 1
    assert stage.lease.completed_ms - stage.lease.started_ms == 3_600_000
    assert stage.output == "11" * 32 and dict(stage.metrics) == {"loss": "0.5", "steps": 100}
    assert job.unit(1).inputs == ("11" * 32,) and job.unit(2).inputs == ("11" * 32,)
    assert job.unit(3).inputs == () and job.unit(3).output is None
    # A unit's uploads are addressed as units/<index>/<name>; job-level names as before.
    assert job.result_hash(unit_result_name(0, "pot/manifest.json")) == "22" * 32
    assert job.result_hash(unit_result_name(1, "pot/manifest.json")) is None
    assert job.result_hash("pot/manifest.json") is None
    with pytest.raises(TypeError):
        stage.results["x"] = "y"  # type: ignore[index]
    # The plan's units may be listed in any order.
    assert _parse(_feed(list(reversed(_units())))).units == job.units


def _broken(mutate: Any) -> str:
    units = copy.deepcopy(_units())
    mutate(units)
    with pytest.raises(FeedDataError) as info:
        _parse(_feed(units))
    return str(info.value)


def test_units_that_are_not_the_plans_are_refused() -> None:
    assert "not in the job's plan" in _broken(lambda u: u[0].update(index=9))
    assert "not in the job's plan" in _broken(lambda u: u[2].update(kind="stage"))
    assert "listed twice" in _broken(lambda u: u.append(dict(u[0])))
    with pytest.raises(FeedDataError, match="must list its units"):
        _parse(_feed(None))


def test_malformed_units_are_refused() -> None:
    assert "units[0].lease" in _broken(lambda u: u[0]["lease"].update(nonce=5))
    assert "started_at" in _broken(lambda u: u[0]["lease"].update(started_at="yesterday"))
    assert "lease that completed it" in _broken(lambda u: u[0].update(lease=None))
    assert "output" in _broken(lambda u: u[0].update(output="XYZ"))
    assert "inputs[0]" in _broken(lambda u: u[1].update(inputs=[{"unit": 0}]))
    assert "inputs must be a list" in _broken(lambda u: u[1].update(inputs="11" * 32))
    assert "metrics" in _broken(lambda u: u[0].update(metrics={"loss": 0.5}))
    assert "metrics" in _broken(lambda u: u[0].update(metrics={"bad name!": 1}))
    assert "results" in _broken(lambda u: u[0].update(results={"a": "not a digest"}))
    assert "status" in _broken(lambda u: u[0].update(status="Done!"))
    assert "index" in _broken(lambda u: u[0].update(index="0"))
    assert "must be an object" in _broken(lambda u: u.__setitem__(0, "stage"))


def test_single_unit_jobs_are_read_as_before() -> None:
    spec = job_spec(seed=3)
    feed = {
        "job_id": spec.job_id,
        "spec": spec.canonical_bytes().decode(),
        "status": "completed",
        "escrow": None,
        "lease": LEASE,
        "results": {"metrics.json": "33" * 32},
    }
    job = _parse(feed)
    assert job.units == () and job.lease is not None and job.lease.attempt == 2
    assert job.result_hash("metrics.json") == "33" * 32
    # A unit-looking name is just a job-level name here.
    assert job.result_hash(unit_result_name(0, "metrics.json")) is None
    with pytest.raises(FeedDataError, match="no units"):
        _parse({**feed, "units": _units()})
    assert _parse({**feed, "units": []}).units == ()
