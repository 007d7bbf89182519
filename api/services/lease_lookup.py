"""A job's lease named by an oracle's signed message (job id and lease nonce).

Oracles name leases this way in key requests and verification tasks; both must refuse a
job or lease the API does not hold rather than record a request for nothing.
"""

from __future__ import annotations

from sqlmodel import Session, col, select

from api.errors import NotFound
from api.models import Job, Lease, Provider


def job_lease(
    session: Session, job_id: str, nonce: str, provider_key: str | None = None
) -> tuple[Job, Lease]:
    """The job's lease with `nonce` (held by the worker `provider_key`, when given). A
    lease that resumed a lost one shares its nonce (`api.services.resume`): the newest such
    lease of the provider is the one named, the attempt whose proof is verified."""
    job = session.exec(select(Job).where(Job.job_id == job_id)).first()
    if job is None:
        raise NotFound(f"no job {job_id}")
    query = select(Lease).where(Lease.job_id == job.id, Lease.nonce == nonce)
    if provider_key is not None:
        query = query.join(Provider, col(Provider.id) == col(Lease.provider_id)).where(
            Provider.worker_key == provider_key
        )
    lease = session.exec(query.order_by(col(Lease.id).desc())).first()
    if lease is None or lease.id is None:
        raise NotFound(f"job {job_id} has no lease with nonce {nonce}")
    return job, lease
