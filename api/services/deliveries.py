"""Each result destination's acknowledgement, and the rule that gates a job's completion.

A spec's `destinations` (`proofnet.messages.destinations`) are where the submitter wants the
results; the worker delivers to each and reports how each answered under its lease
(`record`; the `api` destination, our own store, is checked against the uploads of that
lease rather than taken on the worker's word). `unacknowledged` says which destinations still lack an acknowledgement from
that lease: `leases.complete` refuses to complete the job while any does. A spec without
destinations has nothing to wait for (the API's store got the results by upload).
I/O: the session it is given; never contacts a destination itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from api.errors import BadRequest
from api.models import Job, JobDelivery, JobResult, Lease
from proofnet.messages.destinations import DeliveryReport


def destinations_of(job: Job) -> list[dict[str, Any]]:
    """The destinations the job's (validated) spec names; [] when it names none."""
    spec = job.spec if isinstance(job.spec, dict) else {}
    found = spec.get("destinations") or []
    return [d for d in found if isinstance(d, dict)]


def record(
    session: Session, job: Job, lease: Lease, reports: Sequence[DeliveryReport], now: datetime
) -> list[JobDelivery]:
    """Store the lease's reports (one per destination; a new report replaces the old)."""
    wanted = destinations_of(job)
    for r in reports:
        if r.index >= len(wanted):
            raise BadRequest(f"the spec names {len(wanted)} destinations, not index {r.index}")
        if wanted[r.index].get("kind") != r.kind:
            raise BadRequest(
                f"destination {r.index} is {wanted[r.index].get('kind')!r}, not {r.kind!r}"
            )
    if len({r.index for r in reports}) != len(reports):
        raise BadRequest("a destination is reported twice")
    assert job.id is not None and lease.id is not None
    existing = {d.position: d for d in rows_of(session, job)}
    stored = []
    for r in reports:
        row = existing.get(r.index) or JobDelivery(
            job_id=job.id,
            lease_id=lease.id,
            position=r.index,
            kind=r.kind,
            acknowledged=False,
            results=[],
            reported_at=now,
        )
        row.lease_id = lease.id
        row.kind = r.kind
        row.acknowledged, row.reason = r.acknowledged, r.reason
        if r.kind == "api" and r.acknowledged:
            # Our own store: checked here, never taken on the worker's word.
            missing = _not_stored(session, lease, r)
            if missing:
                row.acknowledged, row.reason = False, missing
        row.results = [a.model_dump(mode="json") for a in r.results]
        row.reported_at = now
        session.add(row)
        stored.append(row)
    return stored


def _not_stored(session: Session, lease: Lease, report: DeliveryReport) -> str:
    """Why the API's store does not hold what `report` says it acknowledged ("" if it does)."""
    if not report.results:
        return "the report names no result the API store holds"
    stored = {
        r.name: r.sha256
        for r in session.exec(select(JobResult).where(JobResult.lease_id == lease.id)).all()
    }
    for ack in report.results:
        if stored.get(ack.name) != ack.sha256:
            return f"the API store holds no upload of {ack.name} with that hash under this lease"
    return ""


def rows_of(session: Session, job: Job) -> list[JobDelivery]:
    return list(
        session.exec(
            select(JobDelivery)
            .where(JobDelivery.job_id == job.id)
            .order_by(col(JobDelivery.position))
        ).all()
    )


def unacknowledged(session: Session, job: Job, lease: Lease) -> list[str]:
    """Why each destination does not count as delivered by `lease` (empty: all did)."""
    wanted = destinations_of(job)
    if not wanted:
        return []
    rows = {d.position: d for d in rows_of(session, job)}
    missing = []
    for i, dest in enumerate(wanted):
        row = rows.get(i)
        kind = dest.get("kind")
        if row is None or row.lease_id != lease.id:
            missing.append(f"destination {i} ({kind}) was not reported")
        elif not row.acknowledged:
            missing.append(f"destination {i} ({kind}) was not acknowledged: {row.reason}")
    return missing


def view(session: Session, job: Job) -> list[dict[str, Any]]:
    """Each destination of the spec with its state for the job's current (or completing)
    lease: pending, acknowledged or refused, with the reason and per-result answers."""
    rows = {d.position: d for d in rows_of(session, job)}
    lease_id = job.current_lease_id
    out = []
    for i, dest in enumerate(destinations_of(job)):
        row = rows.get(i)
        current = row is not None and (lease_id is None or row.lease_id == lease_id)
        if row is None or not current:
            out.append({"index": i, "kind": dest.get("kind", ""), "state": "pending"})
            continue
        out.append(
            {
                "index": i,
                "kind": row.kind,
                "state": "acknowledged" if row.acknowledged else "refused",
                "reason": row.reason,
                "results": row.results,
            }
        )
    return out
