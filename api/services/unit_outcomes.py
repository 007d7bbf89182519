"""What happens to a job with a topology when one of its unit leases ends.

A completion is checked (a stage's or aggregation's output must be the checkpoint its lease
uploaded), recorded, and moves the job on: units whose waits are now all satisfied are
queued with their input checkpoints, a failed evaluation stops the pipeline, and the last
completion completes the job. A lease that ends otherwise puts its unit back in the queue
until it has failed `max_attempts` times, which fails the job. Cluster attempts of
multi-node jobs are in `api.services.clusters`.

Every function here runs under the job's row lock, taken by the caller, who commits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlmodel import Session, col, select

from api.errors import Conflict, Unprocessable
from api.models import Job, JobResult, JobUnit, Lease
from api.services.notifications import notify_job_completed
from api.services.units import job_progress, job_units, plan_of, touch_job, touch_unit
from proofnet.messages.attestation import Metrics
from proofnet.messages.topology import Evaluation, Relay, final_unit

_HEX64 = re.compile(r"[0-9a-f]{64}")
_METRICS: TypeAdapter[dict[str, int | str]] = TypeAdapter(Metrics)


# --- completing a unit ------------------------------------------------------------------


@dataclass(frozen=True)
class UnitReport:
    """`result.unit` of a completion, checked for shape."""

    index: int
    output: str | None
    metrics: dict[str, int | str]


def parse_report(result: dict[str, Any], unit: JobUnit) -> UnitReport:
    raw = result.get("unit")
    if not isinstance(raw, dict):
        raise Unprocessable(
            f"this lease is for unit {unit.index} ({unit.kind}): the completion needs "
            'result.unit = {"index", "output", "metrics"}'
        )
    index = raw.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or index != unit.index:
        raise Unprocessable(f"result.unit.index must be {unit.index} (this lease's unit)")
    output = raw.get("output")
    if output is not None and (not isinstance(output, str) or not _HEX64.fullmatch(output)):
        raise Unprocessable("result.unit.output must be a SHA-256 (64 lowercase hex) or null")
    try:
        # The attestation's own metric rules: what the oracle later reads back must parse.
        metrics = _METRICS.validate_python(raw.get("metrics") or {}, strict=True)
    except ValidationError as e:
        problem = e.errors()[0]
        where = f"[{str(problem['loc'][0])!r}]" if problem["loc"] else ""
        raise Unprocessable(
            f"result.unit.metrics{where}: {problem['msg']} "
            "(metrics are at most 64 names [A-Za-z0-9_.:/-], each an integer or a decimal "
            "string)"
        ) from None
    return UnitReport(index=index, output=output, metrics=dict(metrics))


def _uploaded(session: Session, lease_ids: Sequence[int], name: str) -> list[JobResult]:
    if not lease_ids:
        return []
    return list(
        session.exec(
            select(JobResult)
            .where(col(JobResult.lease_id).in_(list(lease_ids)), JobResult.name == name)
            .order_by(col(JobResult.id))
        ).all()
    )


def checked_output(
    session: Session, job: Job, unit: JobUnit, lease: Lease, report: UnitReport
) -> JobResult | None:
    """The upload the reported output names (None when the unit has no output), or a clear
    refusal: a stage's or aggregation's output must be this lease's uploaded checkpoint."""
    jp = plan_of(job)
    name = jp.checkpoint_result
    assert lease.id is not None
    if unit.kind == "eval" or name is None:
        if report.output is not None:
            raise Unprocessable(
                f"unit {unit.index} ({unit.kind}) produces no checkpoint: output must be null"
            )
        return None
    if report.output is None:
        raise Unprocessable(
            f"unit {unit.index} ({unit.kind}) must report its output: the SHA-256 of {name}"
        )
    own = _uploaded(session, [lease.id], name)
    if unit.kind == "node" and not own:
        # Node rank 0 writes the file; the others attest the same hash. Another node's upload
        # of this cluster attempt is the reference; before any upload the oracle compares
        # the nodes' attestations with one another.
        others = session.exec(
            select(Lease.id).where(
                Lease.job_id == job.id,
                col(Lease.unit_id).is_not(None),
                Lease.attempt == lease.attempt,
            )
        ).all()
        found = _uploaded(session, [i for i in others if i is not None], name)
        if found and all(r.sha256 != report.output for r in found):
            raise Conflict(
                f"output {report.output} is not the hash of the {name} uploaded in cluster "
                f"attempt {lease.attempt} ({found[-1].sha256})"
            )
        return found[-1] if found else None
    if not own:
        raise Conflict(
            f"unit {unit.index} ({unit.kind}) has no uploaded checkpoint: upload it as "
            f"{name!r} (PUT .../results/{name}) before completing"
        )
    if own[0].sha256 != report.output:
        raise Conflict(
            f"output {report.output} is not the hash of this lease's uploaded {name} "
            f"({own[0].sha256})"
        )
    return own[0]


def complete_unit(
    session: Session,
    job: Job,
    unit: JobUnit,
    lease: Lease,
    result: dict[str, Any],
    now: datetime,
) -> None:
    """Record a unit's completion and move the job on (the caller holds the job lock and
    commits). Node completions go through `clusters.complete_node` first."""
    report = parse_report(result, unit)
    upload = checked_output(session, job, unit, lease, report)
    end_lease(lease, "completed", "", now)
    unit.status = "completed"
    unit.current_lease_id = None
    unit.completed_lease_id = lease.id
    unit.output = report.output
    unit.output_size = upload.size if upload is not None else None
    unit.metrics = report.metrics
    unit.finished_at = now
    unit.progress = 1.0
    touch_unit(unit, now)
    session.add_all([lease, unit])
    units = job_units_after(session, job, unit)
    done = sum(1 for u in units if u.status == "completed")
    job.progress = job_progress(units)
    touch_job(job, now)
    evaluation = plan_of(job).evaluation
    if unit.kind == "eval" and evaluation is not None:
        target = plan_of(job).units[unit.index].evaluates
        failed = evaluation_failure(evaluation, unit.index, target, report.metrics)
        if failed is not None:
            stop_pipeline(session, job, units, failed, now)
            return
    if done == len(units):
        finish_job(session, job, units, now)
        return
    release_ready(job, units, now)
    session.add_all(units)
    session.add(job)


def job_units_after(session: Session, job: Job, changed: JobUnit) -> list[JobUnit]:
    """The job's units with `changed` as the caller holds it (flushed first)."""
    session.flush()
    units = job_units(session, job)
    return [changed if u.id == changed.id else u for u in units]


def evaluation_failure(
    ev: Evaluation, index: int, target: int | None, metrics: dict[str, Any]
) -> str | None:
    """Why evaluation unit `index` (of unit `target`) stops the pipeline, or None when its
    metric passes."""
    if ev.metric not in metrics:
        return (
            f"evaluation unit {index} (of unit {target}) reported no metric "
            f"{ev.metric!r} (threshold {ev.threshold}, goal {ev.goal})"
        )
    value = metrics[ev.metric]
    if ev.passes(value):
        return None
    need = "<=" if ev.goal == "min" else ">="
    return (
        f"evaluation unit {index} (of unit {target}) failed: {ev.metric} = {value}, "
        f"needs {need} {ev.threshold}"
    )


def release_ready(job: Job, units: list[JobUnit], now: datetime) -> list[JobUnit]:
    """Queue every blocked unit whose waits all completed, fixing its inputs: the outputs of
    its input units, in plan order. Returns the units released."""
    by_index = {u.index: u for u in units}
    released = []
    for planned in plan_of(job).units:
        row = by_index[planned.index]
        if row.status != "blocked":
            continue
        if not all(by_index[a].status == "completed" for a in planned.after):
            continue
        inputs = []
        for j in planned.inputs:
            source = by_index[j]
            if source.output is None:  # pragma: no cover - stages always report outputs
                raise Conflict(
                    f"unit {j} completed without a checkpoint; unit {row.index} needs it"
                )
            inputs.append({"unit": j, "sha256": source.output, "size": source.output_size or 0})
        row.inputs = inputs
        row.status = "queued"
        touch_unit(row, now)
        released.append(row)
    return released


# --- ending a job -----------------------------------------------------------------------


def end_lease(lease: Lease, outcome: str, reason: str, now: datetime) -> None:
    lease.ended_at = now
    lease.outcome = outcome
    lease.reason = reason[:2000]


def close_units(
    session: Session,
    units: list[JobUnit],
    *,
    status: str,
    lease_outcome: str,
    reason: str,
    now: datetime,
) -> None:
    """Move every unfinished unit to `status`, ending the live leases among them."""
    for unit in units:
        if unit.status not in ("blocked", "queued", "leased"):
            continue
        if unit.current_lease_id is not None:
            lease = session.get(Lease, unit.current_lease_id)
            if lease is not None and lease.ended_at is None:
                end_lease(lease, lease_outcome, reason, now)
                session.add(lease)
        unit.status = status
        unit.current_lease_id = None
        unit.finished_at = now
        touch_unit(unit, now)
        session.add(unit)


def _end_job(job: Job, status: str, now: datetime, *, error: str | None = None) -> None:
    job.status = status
    job.current_lease_id = None
    job.finished_at = now
    if error is not None:
        job.last_error = error[:2000]
    touch_job(job, now)


def stop_pipeline(
    session: Session, job: Job, units: list[JobUnit], reason: str, now: datetime
) -> None:
    """A failed evaluation: cancel what remains; settlement pays the verified units and
    refunds the rest. The owner is told as on completion."""
    close_units(
        session,
        units,
        status="cancelled",
        lease_outcome="cancelled",
        reason=f"the pipeline stopped: {reason}",
        now=now,
    )
    _end_job(job, "stopped", now, error=reason)
    session.add(job)
    notify_job_completed(session, job, now)


def finish_job(session: Session, job: Job, units: list[JobUnit], now: datetime) -> None:
    jp = plan_of(job)
    if isinstance(jp.topology, Relay):
        last = units[final_unit(jp.topology)]
        job.result = {
            "final_unit": last.index,
            "checkpoint": f"units/{last.index}/{jp.checkpoint_result}",
            "sha256": last.output,
        }
    else:
        outputs = sorted({u.output for u in units if u.output is not None})
        job.result = {"nodes": len(units), "sha256": outputs[0] if len(outputs) == 1 else None}
    job.progress = 1.0
    _end_job(job, "completed", now)
    session.add(job)
    session.add_all(units)
    notify_job_completed(session, job, now)


def fail_job(
    session: Session,
    job: Job,
    units: list[JobUnit],
    failed: Sequence[JobUnit],
    error: str,
    now: datetime,
) -> None:
    """Attempts ran out: the units that exhausted them fail, the rest are cancelled."""
    for unit in failed:
        unit.status = "failed"
        unit.current_lease_id = None
        unit.finished_at = now
        touch_unit(unit, now)
        session.add(unit)
    close_units(
        session,
        units,
        status="cancelled",
        lease_outcome="cancelled",
        reason=f"the job failed: {error}",
        now=now,
    )
    _end_job(job, "failed", now, error=error)
    session.add(job)


def cancel_units(session: Session, job: Job, reason: str, now: datetime) -> None:
    """The owner cancelled a running topology job: its units and their leases end."""
    close_units(
        session,
        job_units(session, job),
        status="cancelled",
        lease_outcome="cancelled",
        reason=reason,
        now=now,
    )


# --- a relay unit's lease ends without completion ---------------------------------------


def requeue_unit(
    session: Session,
    job: Job,
    unit: JobUnit,
    error: str,
    now: datetime,
    *,
    counts_as_failure: bool,
) -> None:
    """Back to the queue with the same inputs; `max_attempts` failures fail the job."""
    unit.current_lease_id = None
    reported = unit.progress
    unit.progress, unit.progress_message = 0.0, ""
    job.last_error = error[:2000]
    if counts_as_failure:
        unit.failures += 1
        job.failures += 1
    if unit.failures >= job.max_attempts:
        units = job_units_after(session, job, unit)
        fail_job(
            session,
            job,
            units,
            [u for u in units if u.id == unit.id],
            f"unit {unit.index} ({unit.kind}): {error} "
            f"(gave up after {unit.failures} failed attempts)",
            now,
        )
        return
    unit.status = "queued"
    touch_unit(unit, now)
    if reported:  # what the lost lease had done no longer counts in the job's progress
        job.progress = job_progress(job_units_after(session, job, unit))
    touch_job(job, now)
    session.add_all([unit, job])
