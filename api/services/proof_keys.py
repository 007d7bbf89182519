"""Key requests for sealed proof files, relayed between an oracle, a provider and a verifier.

An oracle posts a signed `KeyRequest` (proofnet/messages/key_grant.py) naming a lease of a
job, a drawn verifier and some of the lease's uploads; the provider that held the lease
reads its pending requests and answers each with a grant (the files' content keys wrapped
for the verifier); the verifier reads the grant and downloads the files' ciphertexts. The
API checks what it can (the oracle's signature, that the verifier is a registered worker
other than the provider, that the files are the lease's uploads, that the grant is shaped
for the verifier) and can open nothing. A request naming the lease's provider is the lease
of that nonce held by that provider (a resumed job's attempts share a nonce): a lost
attempt's files are asked of the lost provider, whose secret sealed them, never of the
provider that resumed it, and a provider is asked only for files of its own lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from api.errors import BadRequest, Conflict, Forbidden, NotFound
from api.models import JobResult, ProofKeyRequest, Provider
from api.services.lease_lookup import job_lease
from proofnet.messages.key_grant import KeyGrantError, KeyRequest, check_grant

MAX_PENDING_LISTED = 100


@dataclass(frozen=True)
class KeyRequestView:
    row: ProofKeyRequest
    request: KeyRequest
    files: list[JobResult]


def record_request(
    session: Session, oracle_key: str, request: KeyRequest, now: datetime
) -> ProofKeyRequest:
    """Keep an oracle's request for the provider to answer (the same request twice: one)."""
    if request.oracle_key != oracle_key:
        raise Forbidden("an oracle posts only key requests it signed itself")
    try:
        request.verify({oracle_key})
    except KeyGrantError as e:
        raise BadRequest(str(e)) from e
    existing = session.exec(
        select(ProofKeyRequest).where(ProofKeyRequest.digest == request.digest)
    ).first()
    if existing is not None:
        return existing
    try:
        job, lease = job_lease(session, request.job_id, request.nonce, request.provider)
    except NotFound:
        if request.provider is None:
            raise
        job_lease(session, request.job_id, request.nonce)  # NotFound: no such lease at all
        raise BadRequest("the key request names another provider than the lease's") from None
    provider = session.get(Provider, lease.provider_id)
    verifier = session.exec(
        select(Provider).where(Provider.worker_key == request.recipient)
    ).first()
    if verifier is None:
        raise BadRequest(f"the verifier {request.recipient} is not a registered worker")
    if provider is None or (
        verifier.id == provider.id or verifier.payout_address == provider.payout_address
    ):
        raise BadRequest("a verifier is another worker than the provider, paid elsewhere")
    uploads = {
        r.name: r
        for r in session.exec(select(JobResult).where(JobResult.lease_id == lease.id)).all()
    }
    missing = [name for name in request.files if name not in uploads]
    if missing:
        raise BadRequest(f"the lease uploaded no {', '.join(repr(m) for m in missing[:5])}")
    assert job.id is not None and lease.id is not None and provider.id is not None
    row = ProofKeyRequest(
        digest=request.digest,
        job_id=job.id,
        lease_id=lease.id,
        provider_id=provider.id,
        recipient_key=request.recipient,
        request=request.to_json(),
        created_at=now,
    )
    session.add(row)
    try:
        session.commit()
    except IntegrityError:  # the same request, posted concurrently
        session.rollback()
        return session.exec(
            select(ProofKeyRequest).where(ProofKeyRequest.digest == request.digest)
        ).one()
    return row


def _view(session: Session, row: ProofKeyRequest) -> KeyRequestView:
    request = KeyRequest.from_json(row.request)
    uploads = {
        r.name: r
        for r in session.exec(
            select(JobResult).where(
                JobResult.lease_id == row.lease_id, col(JobResult.name).in_(request.files)
            )
        ).all()
    }
    return KeyRequestView(row, request, [uploads[n] for n in request.files if n in uploads])


def pending_for(session: Session, provider: Provider) -> list[KeyRequestView]:
    """Requests for keys of this provider's leases it has not answered yet, oldest first."""
    rows = session.exec(
        select(ProofKeyRequest)
        .where(
            ProofKeyRequest.provider_id == provider.id,
            col(ProofKeyRequest.answered_at).is_(None),
        )
        .order_by(col(ProofKeyRequest.id))
        .limit(MAX_PENDING_LISTED)
    ).all()
    return [_view(session, r) for r in rows]


def answer(
    session: Session, provider: Provider, request_id: int, grants: dict[str, Any], now: datetime
) -> ProofKeyRequest:
    """The provider's grant for one of its requests; answering twice alike is one answer."""
    row = session.get(ProofKeyRequest, request_id)
    if row is None or row.provider_id != provider.id:
        raise NotFound(f"no key request {request_id} for this worker")
    try:
        checked = check_grant(KeyRequest.from_json(row.request), grants)
    except KeyGrantError as e:
        raise BadRequest(str(e)) from e
    stanzas = {name: s.to_json() for name, s in checked.items()}
    if row.grants is not None:
        if row.grants != stanzas:
            raise Conflict(f"key request {request_id} was already answered otherwise")
        return row
    row.grants, row.answered_at = stanzas, now
    session.add(row)
    session.commit()
    return row


def grant_for(session: Session, verifier: Provider, request_id: int) -> KeyRequestView:
    """A request naming this worker as verifier, once answered."""
    row = session.get(ProofKeyRequest, request_id)
    if row is None or row.recipient_key != verifier.worker_key:
        raise NotFound(f"no key request {request_id} names this worker as verifier")
    if row.grants is None:
        raise Conflict(f"the provider has not answered key request {request_id} yet")
    return _view(session, row)


def granted_file(session: Session, verifier: Provider, request_id: int, name: str) -> JobResult:
    """An upload the request names, for its verifier only (the ciphertext)."""
    row = session.get(ProofKeyRequest, request_id)
    if row is None or row.recipient_key != verifier.worker_key:
        raise NotFound(f"no key request {request_id} names this worker as verifier")
    view = _view(session, row)
    for upload in view.files:
        if upload.name == name:
            return upload
    raise NotFound(f"key request {request_id} names no file {name!r}")
