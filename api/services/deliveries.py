"""Each result destination's acknowledgement, and when each may be delivered.

A spec's `destinations` (`proofnet.messages.destinations`) are where the submitter wants the
results. They are delivered in two phases, because the submitter may have the results only
with the oracles' verdict (issue 12.4; `api.services.result_release`):

- before completion, the `api` destination (our own store, which the oracles verify from
  and which serves the submitter only once released): reported under the lease (`record`),
  checked against the lease's uploads rather than taken on the worker's word;
  `leases.complete` refuses to complete the job while it is unacknowledged;
- after a releasing verdict, the submitter's own destinations (`EXTERNAL`: webhook, S3
  pre-signed URL): the provider that completed the job delivers them and reports
  (`record_released`); a report of one before the release is refused (an honest worker
  never sends them early; one that did gave the submitter results the verdict may refuse,
  which harms only its own pay).

A spec without destinations has nothing to wait for (the API's store got the results by
upload). I/O: the session it is given; never contacts a destination itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from api.errors import BadRequest, Conflict, NotFound
from api.models import Job, JobDelivery, JobResult, Lease, Provider
from api.services.result_release import ReleasePolicy, completed_by, release_of
from proofnet.messages.destinations import DeliveryReport

# Destinations delivered only after a releasing verdict; the others (`api`) before completion.
EXTERNAL = frozenset({"webhook", "s3_presigned"})
BEFORE_COMPLETION = frozenset({"api"})


def destinations_of(job: Job) -> list[dict[str, Any]]:
    """The destinations the job's (validated) spec names; [] when it names none."""
    spec = job.spec if isinstance(job.spec, dict) else {}
    found = spec.get("destinations") or []
    return [d for d in found if isinstance(d, dict)]


def record(
    session: Session,
    job: Job,
    lease: Lease,
    reports: Sequence[DeliveryReport],
    now: datetime,
    *,
    released: bool = False,
) -> list[JobDelivery]:
    """Store the lease's reports (one per destination; a new report replaces the old). The
    submitter's own destinations only once the results are `released`."""
    wanted = destinations_of(job)
    early = [r for r in reports if r.kind in EXTERNAL and not released]
    if early:
        raise Conflict(
            f"destination {early[0].index} ({early[0].kind}) is delivered only once the oracles'"
            " verdict releases the results (GET /api/v1/worker/jobs/{job_id}/release)"
        )
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


def unacknowledged(
    session: Session, job: Job, lease: Lease, kinds: frozenset[str] | None = None
) -> list[str]:
    """Why each destination (of `kinds`; default all) does not count as delivered by
    `lease` (empty: all did)."""
    wanted = destinations_of(job)
    if not wanted:
        return []
    rows = {d.position: d for d in rows_of(session, job)}
    missing = []
    for i, dest in enumerate(wanted):
        row = rows.get(i)
        kind = dest.get("kind")
        if kinds is not None and kind not in kinds:
            continue
        if row is None or row.lease_id != lease.id:
            missing.append(f"destination {i} ({kind}) was not reported")
        elif not row.acknowledged:
            missing.append(f"destination {i} ({kind}) was not acknowledged: {row.reason}")
    return missing


def record_released(
    session: Session,
    provider: Provider,
    job_id: str,
    reports: Sequence[DeliveryReport],
    policy: ReleasePolicy,
    now: datetime,
) -> list[str]:
    """The reports of the provider that completed the job on the submitter's own
    destinations, once the results are released; returns what is still unacknowledged."""
    job, lease = completed_by(session, job_id, provider)
    if job is None or lease is None:
        raise NotFound(f"job {job_id} was not completed by this worker")
    release = release_of(session, lease, policy)
    if not release.released:
        raise Conflict(f"the results are not released: {release.detail}")
    if any(r.kind not in EXTERNAL for r in reports):
        raise BadRequest("after completion only the submitter's own destinations are reported")
    record(session, job, lease, reports, now, released=True)
    session.flush()
    pending = unacknowledged(session, job, lease, EXTERNAL)
    session.commit()
    return pending


WAITING_FOR_VERDICT = "delivered once the oracles' verdict releases the results"


def view(session: Session, job: Job) -> list[dict[str, Any]]:
    """Each destination of the spec with its state for the job's current (or completing)
    lease: pending, acknowledged or refused, with the reason and per-result answers (a
    pending destination of the submitter's own says it waits for the verdict)."""
    rows = {d.position: d for d in rows_of(session, job)}
    lease_id = job.current_lease_id
    out = []
    for i, dest in enumerate(destinations_of(job)):
        row = rows.get(i)
        current = row is not None and (lease_id is None or row.lease_id == lease_id)
        if row is None or not current:
            kind = str(dest.get("kind", ""))
            waits = WAITING_FOR_VERDICT if kind in EXTERNAL else ""
            out.append({"index": i, "kind": kind, "state": "pending", "reason": waits})
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
