"""What the oracle reads about the units of a job with a topology (docs/topologies.md, "Feed").

Per unit: its kind and status, the lease whose completion stands (the same shape as the
job-level `lease` of a single-unit job), the SHA-256 of its input checkpoints, its output
and metrics, and the SHA-256 of every upload of that completing lease. Those uploads are
served as `units/<index>/<name>` by the oracle's results route.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session, col, select

from api.errors import NotFound
from api.models import Job, JobResult, JobUnit, Lease, Provider

UNIT_RESULT_PREFIX = "units/"


def _iso(at: datetime) -> str:
    # SQLite hands datetimes back naive; every time the API stores is UTC.
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).isoformat()


def _lease_view(lease: Lease, provider: Provider, gpus: int) -> dict[str, Any]:
    assert lease.ended_at is not None
    return {
        "worker_key": provider.worker_key,
        "payout_address": provider.payout_address,
        "nonce": lease.nonce,
        "gpus": gpus,
        "started_at": _iso(lease.created_at),
        "completed_at": _iso(lease.ended_at),
        "attempt": lease.attempt,
    }


def units_feed(session: Session, job: Job) -> list[dict[str, Any]]:
    """Every unit of `job`, in index order (four queries whatever the number of units)."""
    units = session.exec(
        select(JobUnit).where(JobUnit.job_id == job.id).order_by(col(JobUnit.index))
    ).all()
    lease_ids = [u.completed_lease_id for u in units if u.completed_lease_id is not None]
    leases: dict[int, Lease] = {}
    providers: dict[int, Provider] = {}
    results: dict[int, dict[str, str]] = {}
    if lease_ids:
        for row_lease in session.exec(select(Lease).where(col(Lease.id).in_(lease_ids))).all():
            assert row_lease.id is not None
            leases[row_lease.id] = row_lease
        provider_ids = list({held.provider_id for held in leases.values()})
        for provider in session.exec(
            select(Provider).where(col(Provider.id).in_(provider_ids))
        ).all():
            assert provider.id is not None
            providers[provider.id] = provider
        for row in session.exec(
            select(JobResult).where(col(JobResult.lease_id).in_(lease_ids))
        ).all():
            results.setdefault(row.lease_id, {})[row.name] = row.sha256
    feed = []
    for unit in units:
        lease = leases.get(unit.completed_lease_id) if unit.completed_lease_id else None
        feed.append(
            {
                "index": unit.index,
                "kind": unit.kind,
                "status": unit.status,
                "lease": None
                if lease is None
                else _lease_view(lease, providers[lease.provider_id], job.gpu_count),
                "inputs": [str(i["sha256"]) for i in unit.inputs or []],
                "output": unit.output,
                "metrics": unit.metrics or {},
                "results": {}
                if lease is None
                else dict(sorted(results.get(lease.id or 0, {}).items())),
            }
        )
    return feed


def unit_result_row(session: Session, job: Job, name: str) -> JobResult:
    """Upload `units/<index>/<name>`: one of the lease that completed unit `index`."""
    prefix, _, rest = name.partition("/")
    index_text, _, inner = rest.partition("/")
    if f"{prefix}/" != UNIT_RESULT_PREFIX or not index_text.isdigit() or not inner:
        raise NotFound(
            f"job {job.job_id} has units: name a unit's upload as "
            f"units/<index>/<name>, not {name[:80]!r}"
        )
    unit = session.exec(
        select(JobUnit).where(JobUnit.job_id == job.id, JobUnit.index == int(index_text))
    ).first()
    row = None
    if unit is not None and unit.completed_lease_id is not None:
        row = session.exec(
            select(JobResult).where(
                JobResult.lease_id == unit.completed_lease_id, JobResult.name == inner
            )
        ).first()
    if row is None:
        raise NotFound(f"job {job.job_id} has no completed upload {name!r}")
    return row
