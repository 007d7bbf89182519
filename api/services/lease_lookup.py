"""A job's lease named by an oracle's signed message (job id and lease nonce).

Oracles name leases this way in key requests and verification tasks; both must refuse a
job or lease the API does not hold rather than record a request for nothing.
"""

from __future__ import annotations

from sqlmodel import Session, select

from api.errors import NotFound
from api.models import Job, Lease


def job_lease(session: Session, job_id: str, nonce: str) -> tuple[Job, Lease]:
    job = session.exec(select(Job).where(Job.job_id == job_id)).first()
    if job is None:
        raise NotFound(f"no job {job_id}")
    lease = session.exec(select(Lease).where(Lease.job_id == job.id, Lease.nonce == nonce)).first()
    if lease is None or lease.id is None:
        raise NotFound(f"job {job_id} has no lease with nonce {nonce}")
    return job, lease
