"""Resume grants for sealed jobs, relayed from the submitter to the resuming provider.

A lease that resumed a sealed checkpoint (`Lease.resume_sealed`, api/services/resume.py)
cannot start until the submitter re-wraps the checkpoint files' content keys for the
lease's provider (proofnet/messages/resume_grant.py). The submitter reads what to grant
(`pending`: the provider's worker key and the sealed files' hashes), posts the stanzas
(`record`), and the provider's worker reads them (`for_lease`).

The API checks what it can: the job is the caller's, the lease is the job's running one and
resumed a sealed checkpoint, the grant names exactly that checkpoint's files and each stanza
is wrapped for that lease's provider (so a grant meant for another provider or job is
refused here). It keeps the stanzas as posted and can open none of them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from api.errors import BadRequest, Conflict, NotFound
from api.models import Job, Lease, Provider, User
from api.services import resume
from api.services.jobs import get_job
from api.services.leases import active_lease
from api.storage import BlobMissing, BlobStore
from proofnet.messages.claim import ResumeFile
from proofnet.messages.envelope import MAGIC_BYTES, MAX_HEADER_BYTES
from proofnet.messages.resume_grant import ResumeGrantError, check_resume_grant


@dataclass(frozen=True)
class PendingGrant:
    """What the submitter must grant: these sealed files, for this provider."""

    attempt: int
    provider_worker_key: str
    from_attempt: int
    at: int
    files: tuple[ResumeFile, ...]
    granted: bool
    # Each file's clear envelope header (hex): all the submitter needs to unwrap its key.
    headers: dict[str, str]


def _sealed_files(session: Session, lease: Lease) -> tuple[ResumeFile, ...]:
    """The resumed checkpoint's files (the prefix, first, is never sealed)."""
    found = []
    for position in range(1, 4):
        ref = resume.resume_file(session, lease, position)
        if ref is None:
            raise Conflict("the checkpoint this lease resumed is no longer stored")
        found.append(ref)
    return tuple(found)


def _resuming_lease(session: Session, job: Job) -> Lease:
    lease = session.exec(
        select(Lease).where(
            Lease.job_id == job.id,
            col(Lease.unit_id).is_(None),
            col(Lease.outcome).is_(None),
            col(Lease.resume_sealed).is_(True),
        )
    ).first()
    if lease is None:
        raise NotFound(f"job {job.job_id} has no running lease waiting for a resume grant")
    return lease


def _header(store: BlobStore, ref: ResumeFile) -> str:
    """The clear header of a stored sealed file (magic, length, JSON), never its body."""
    head = b""
    try:
        for chunk in store.open_chunks(ref.sha256):
            head += chunk
            if len(head) >= MAGIC_BYTES + 4:
                (n,) = struct.unpack(">I", head[MAGIC_BYTES : MAGIC_BYTES + 4])
                if n > MAX_HEADER_BYTES or len(head) >= MAGIC_BYTES + 4 + n:
                    return head[: MAGIC_BYTES + 4 + min(n, MAX_HEADER_BYTES)].hex()
    except (OSError, BlobMissing) as e:
        raise Conflict(f"the checkpoint file {ref.name} cannot be read: {e}") from e
    return head.hex()


def pending(session: Session, user: User, job_id: str, store: BlobStore) -> PendingGrant:
    job = get_job(session, user, job_id)
    lease = _resuming_lease(session, job)
    provider = session.get(Provider, lease.provider_id)
    lost = None if lease.resumed_lease_id is None else session.get(Lease, lease.resumed_lease_id)
    if provider is None or lost is None or lease.resumed_at is None:
        raise Conflict("the lease's provider or the attempt it resumed is gone")
    files = _sealed_files(session, lease)
    return PendingGrant(
        attempt=lease.attempt,
        provider_worker_key=provider.worker_key,
        from_attempt=lost.attempt,
        at=lease.resumed_at,
        files=files,
        granted=lease.resume_grants is not None,
        headers={f.name: _header(store, f) for f in files},
    )


def record(
    session: Session, user: User, job_id: str, grants: dict[str, Any], now: datetime
) -> Lease:
    """Keep the submitter's grant for the running lease (posting the same grant twice: one)."""
    job = get_job(session, user, job_id)
    lease = _resuming_lease(session, job)
    provider = session.get(Provider, lease.provider_id)
    if provider is None:
        raise Conflict("the lease's provider is gone")
    names = [f.name for f in _sealed_files(session, lease)]
    try:
        checked = check_resume_grant(names, provider.worker_key, grants)
    except ResumeGrantError as e:
        raise BadRequest(str(e)) from e
    stanzas = {name: s.to_json() for name, s in checked.items()}
    if lease.resume_grants is not None:
        if lease.resume_grants != stanzas:
            raise Conflict("this lease's resume grant was already posted otherwise")
        return lease
    lease.resume_grants = stanzas
    session.add(lease)
    session.commit()
    return lease


def for_lease(
    session: Session, provider: Provider, token: str, now: datetime
) -> dict[str, dict[str, str]] | None:
    """The grant for the lease `token` (its holder only); None while the submitter has not
    posted it (not a refusal: the lease stands while it waits)."""
    active = active_lease(session, provider, token, now)
    lease = active.lease
    grants = lease.resume_grants
    session.rollback()  # release the job lock
    if not lease.resume_sealed:
        raise NotFound("this lease did not resume a sealed checkpoint")
    if grants is None:
        return None
    return {str(k): dict(v) for k, v in grants.items()}
