"""A three-stage relay pipeline across three real worker processes, one SIGKILLed mid-stage.

The API runs as its own process; three `proofnet worker run` processes (process runtime)
share the pipeline. Stage 1 holds on its first attempt (hold.py in the fixture repository)
after its input checkpoint was downloaded and verified; the test SIGKILLs the worker that
runs it. Its lease lapses, another worker re-runs stage 1 from the same input checkpoint,
and the pipeline completes: every unit attested once, each stage and evaluation chaining its
inputs to the outputs before it, and the final model downloadable with the attested hash.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from real_process_support import (
    WorkerProcess,
    kill_processes_in,
    log_texts,
    recording_oracle,
    running_api,
    start_worker,
    wait_for,
    wait_for_attestations,
)
from relay_fixtures import (  # noqa: F401  (fixtures)
    CHECKPOINT,
    RelayRepo,
    Shards,
    relay_repo,
    relay_spec,
    shards,
)

from proofnet.processes import RoleGroup
from worker import units

LEASE_TTL_S = 3


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path) -> object:
    yield
    kill_processes_in(tmp_path)  # whatever a failed run left behind


@pytest.mark.slow
def test_relay_survives_a_worker_killed_mid_stage(
    tmp_path: Path,
    relay_repo: RelayRepo,  # noqa: F811
    shards: Shards,  # noqa: F811
) -> None:
    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "hold-1").touch()  # stage 1's first attempt waits here until the test lets go
    spec = relay_spec(relay_repo, shards, hold_dir=hold, steps=60)
    with (
        running_api(tmp_path, lease_ttl_s=LEASE_TTL_S) as api,
        recording_oracle(api) as oracle,
        RoleGroup() as group,
    ):
        job_id = api.submit(spec)
        workers = [
            start_worker(
                group, f"worker-{i}", api, oracle, relay_repo, tmp_path, data_dir=shards.root
            )
            for i in range(3)
        ]

        def holder() -> WorkerProcess | None:
            if not any(t.startswith("holding unit 1") for t in log_texts(api, job_id)):
                return None
            tag = f"{job_id}-u1-a1"
            return next((w for w in workers if (w.work_dir / "jobs" / tag).is_dir()), None)

        victim = wait_for("stage 1 to hold", holder, workers=workers)
        # What the victim verified and was about to train from.
        given = victim.work_dir / "jobs" / f"{job_id}-u1-a1" / units.INPUTS_DIR / "input-0"
        given_sha = hashlib.sha256(given.read_bytes()).hexdigest()
        victim.kill()
        (hold / "hold-1").unlink()

        def finished() -> dict[str, object] | None:
            job = api.job(job_id)
            return job if job["status"] in ("completed", "failed", "stopped") else None

        job = wait_for("the pipeline to finish", finished, workers=workers)
        assert job["status"] == "completed", job["last_error"]
        # The last unit's attestation reaches the oracle just after its lease completes the
        # job: wait for that event.
        accepted = wait_for_attestations(oracle, job_id, 5, workers=workers)
        # The pipeline's model (the last stage's checkpoint), as its submitter reads it.
        name = f"units/2/checkpoint/{CHECKPOINT}"
        api.release(job_id)  # each unit's verdict releases its checkpoint to the submitter
        listed = {r["name"]: r["sha256"] for r in api.get(f"/api/v1/jobs/{job_id}/results")}
        final = api.http.get(f"/api/v1/jobs/{job_id}/results/{name}", headers=api.submitter)

    byunit = {u["index"]: u for u in job["units"]}  # type: ignore[attr-defined]
    assert sorted(byunit) == [0, 1, 2, 3, 4]
    assert [byunit[i]["kind"] for i in range(5)] == ["stage"] * 3 + ["eval"] * 2
    assert all(u["status"] == "completed" for u in byunit.values())
    # Stage 1 ran again, on another worker, once the victim's lease lapsed. On a busy machine
    # a healthy worker's 3 s lease can lapse too (a heartbeat seconds late): the unit then
    # runs once more, which is the system working, not a fault; so "at least twice" here,
    # and below: attested once, never by the victim, from the input the victim verified.
    assert byunit[1]["attempts"] >= 2 and byunit[1]["provider"] != victim.key_id

    atts = {a.unit.index: a for a in accepted if a.unit is not None}
    assert len(accepted) == 5 and sorted(atts) == [0, 1, 2, 3, 4]
    # The victim may have run stage 0 before; the stage it was killed in is attested by
    # the worker that re-ran it, never by the victim.
    assert atts[1].worker_key != victim.public_key
    out = {i: atts[i].unit.output for i in range(5)}  # type: ignore[union-attr]
    assert atts[0].unit.inputs == ()  # type: ignore[union-attr]
    # The re-run started from the very checkpoint the killed worker had verified.
    assert atts[1].unit.inputs == (out[0],) == (given_sha,)  # type: ignore[union-attr]
    assert atts[2].unit.inputs == (out[1],)  # type: ignore[union-attr]
    assert atts[3].unit.kind == "eval" and atts[3].unit.inputs == (out[1],)  # type: ignore[union-attr]
    assert atts[4].unit.kind == "eval" and atts[4].unit.inputs == (out[2],)  # type: ignore[union-attr]
    assert out[3] is None and out[4] is None and len({out[0], out[1], out[2]}) == 3
    for i in range(5):
        assert byunit[i]["output"] == out[i]
        assert atts[i].amount == (300_000 if i < 3 else 50_000)
    assert float(str(atts[4].metrics["loss"])) <= 5 and byunit[4]["metrics"] == dict(
        atts[4].metrics
    )

    # The pipeline's model downloads with the hash its stage attested.
    assert listed[name] == out[2]
    assert final.status_code == 200 and hashlib.sha256(final.content).hexdigest() == out[2]
