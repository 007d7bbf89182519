"""Storage providers' offers and the placements of jobs' content with them.

An offer is accepted only when the key that signed the request also signed the offer, over
a nonce this API issued to that key for an offer (not a compute binding's) and not yet used.
A placement is recorded by the job's owner once the copy is on the provider's endpoint; it
must fit the spec's storage placement (a kind it names, no more copies of an object than
`replicas`, a price at most the spec's cap) and the provider's free capacity, and only
while the job's escrow is unspent (storage is paid from it at settlement).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import BadRequest, Conflict, Forbidden, NotFound, Unauthorized
from api.models import AuthChallenge, Job, JobEscrow, User
from api.models import StorageOffer as OfferRow
from api.models import StoragePlacement as PlacementRow
from api.services import movements
from api.services.auth import consume_challenge
from api.services.tokens import new_nonce
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.storage import Commitment, StorageError, StorageOffer, verify_offer

PURPOSE_STORAGE_OFFER = "storage-offer"
ACTIVE = "active"


def issue_offer_challenge(
    session: Session, config: ApiConfig, provider_key: str, now: datetime
) -> AuthChallenge:
    """A nonce the provider signs into its storage offer; good for one offer."""
    challenge = AuthChallenge(
        purpose=PURPOSE_STORAGE_OFFER,
        nonce=new_nonce(32),
        subject=provider_key,
        message="",
        created_at=now,
        expires_at=now + timedelta(seconds=config.challenge_ttl_s),
    )
    session.add(challenge)
    session.commit()
    return challenge


def offer(
    session: Session, config: ApiConfig, *, provider_key: str, body: StorageOffer, now: datetime
) -> OfferRow:
    """Record (or replace) the offer of the key that signed this request."""
    if body.provider_pubkey != provider_key:
        # Checked before the nonce is spent: the request's key is the only one offering.
        raise Unauthorized("storage offer is signed by a different key than this request")
    consume_challenge(
        session, purpose=PURPOSE_STORAGE_OFFER, nonce=body.nonce, subject=provider_key, now=now
    )
    try:
        verify_offer(body, network=config.network, nonce=body.nonce, provider_pubkey=provider_key)
    except StorageError as exc:
        session.commit()  # the nonce stays burnt: one attempt per challenge
        raise Unauthorized(f"storage offer rejected: {exc}") from exc
    held = _held_bytes(session, provider_key)
    if body.terms.capacity_bytes < held:
        raise BadRequest(
            f"capacity_bytes {body.terms.capacity_bytes} is less than the {held} bytes this "
            "provider already holds for jobs"
        )
    row = session.exec(select(OfferRow).where(OfferRow.provider_key == provider_key)).first()
    row = row or OfferRow(provider_key=provider_key)  # type: ignore[call-arg]
    row.payout_address = body.payout_address
    row.endpoint = body.terms.endpoint
    row.bucket = body.terms.bucket
    row.capacity_bytes = body.terms.capacity_bytes
    row.ntx_per_gb_month = body.terms.ntx_per_gb_month
    row.offer = body.model_dump(mode="json")
    row.offered_at = now
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


@dataclass(frozen=True)
class OfferView:
    row: OfferRow
    held_bytes: int

    @property
    def free_bytes(self) -> int:
        return max(0, self.row.capacity_bytes - self.held_bytes)


def list_offers(session: Session, *, max_price: int | None = None) -> list[OfferView]:
    """Every current offer, cheapest first (ties: the earliest offered)."""
    query = select(OfferRow).order_by(col(OfferRow.ntx_per_gb_month), col(OfferRow.offered_at))
    if max_price is not None:
        query = query.where(col(OfferRow.ntx_per_gb_month) <= max_price)
    return [OfferView(r, _held_bytes(session, r.provider_key)) for r in session.exec(query)]


def offer_of(session: Session, provider_key: str) -> OfferView:
    row = session.exec(select(OfferRow).where(OfferRow.provider_key == provider_key)).first()
    if row is None:
        raise NotFound(f"no storage offer from provider {provider_key}")
    return OfferView(row, _held_bytes(session, provider_key))


def _held_bytes(session: Session, provider_key: str) -> int:
    total = session.exec(
        select(func.coalesce(func.sum(PlacementRow.size), 0)).where(
            PlacementRow.provider_key == provider_key, PlacementRow.status == ACTIVE
        )
    ).one()
    return int(total)


def place(
    session: Session,
    *,
    owner: User,
    job_id: str,
    kind: str,
    object_key: str,
    provider_key: str,
    commitment: Commitment,
    now: datetime,
) -> PlacementRow:
    """Record one copy of `object_key` with `provider_key`, refused unless the job's spec
    places this kind with storage, the copies stay within `replicas`, the provider's price
    is within the spec's cap and its free capacity holds the object."""
    job = session.exec(select(Job).where(Job.job_id == job_id)).first()
    if job is None:
        raise NotFound(f"no job {job_id}")
    if job.owner_id != owner.id:
        raise Forbidden("only the job's owner records where its content is placed")
    placement = JobSpec.from_dict(job.spec).storage
    if placement is None:
        raise BadRequest("the job's spec places no storage (its 'storage' field is absent)")
    escrow = session.exec(select(JobEscrow).where(JobEscrow.job_id == job.id)).first()
    if escrow is not None and movements.closed_escrows(
        session, [(escrow.tx_id, escrow.output_index)]
    ):
        # Storage is paid out of the job's escrow in its settlement: once that was spent
        # (settled, refunded or cancelled) nothing is left to pay a new copy from.
        raise Conflict(
            f"job {job_id}'s escrow {escrow.tx_id}#{escrow.output_index} was already spent "
            "(settled, refunded or cancelled): a copy placed now would never be paid"
        )
    if kind not in placement.kinds:
        raise BadRequest(f"the job's spec places {list(placement.kinds)} in storage, not {kind!r}")
    view = offer_of(session, provider_key)
    if view.row.ntx_per_gb_month > placement.max_ntx_per_gb_month:
        raise BadRequest(
            f"provider {provider_key} asks {view.row.ntx_per_gb_month} NTX per GB-month, more "
            f"than the spec's max_ntx_per_gb_month {placement.max_ntx_per_gb_month}"
        )
    if commitment.size > view.free_bytes:
        raise BadRequest(
            f"provider {provider_key} has {view.free_bytes} bytes free, the object is "
            f"{commitment.size}"
        )
    copies = active_copies(session, job_id, object_key)
    if len(copies) >= placement.replicas:
        raise Conflict(f"{object_key} already has the {placement.replicas} copies the spec asks")
    if any(c.content_root != commitment.content_root for c in copies):
        raise BadRequest(f"{object_key} is already placed under another content root")
    row = PlacementRow(
        job_id=job_id,
        kind=kind,
        object_key=object_key,
        provider_key=provider_key,
        content_root=commitment.content_root,
        size=commitment.size,
        chunk_size=commitment.chunk_size,
        ntx_per_gb_month=view.row.ntx_per_gb_month,
        placed_at=now,
        ends_at=now + timedelta(seconds=placement.term_s),
    )
    session.add(row)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise Conflict(f"provider {provider_key} already holds {object_key} of this job") from None
    session.refresh(row)
    return row


def active_copies(session: Session, job_id: str, object_key: str) -> list[PlacementRow]:
    return list(
        session.exec(
            select(PlacementRow).where(
                PlacementRow.job_id == job_id,
                PlacementRow.object_key == object_key,
                PlacementRow.status == ACTIVE,
            )
        )
    )


def placements(
    session: Session, *, job_id: str | None = None, provider_key: str | None = None
) -> list[PlacementRow]:
    query = select(PlacementRow).order_by(col(PlacementRow.id))
    if job_id is not None:
        query = query.where(PlacementRow.job_id == job_id)
    if provider_key is not None:
        query = query.where(PlacementRow.provider_key == provider_key)
    return list(session.exec(query))


# --- the oracle's side ----------------------------------------------------------------


@dataclass(frozen=True)
class OracleView:
    """An active placement with what the oracle needs of its job's spec."""

    row: PlacementRow
    budget: int
    max_ntx_per_gb_month: int


def active_for_oracle(session: Session) -> list[OracleView]:
    rows = list(
        session.exec(
            select(PlacementRow).where(PlacementRow.status == ACTIVE).order_by(col(PlacementRow.id))
        )
    )
    specs: dict[str, JobSpec] = {}
    views = []
    for row in rows:
        if row.job_id not in specs:
            job = session.exec(select(Job).where(Job.job_id == row.job_id)).first()
            if job is None:
                continue
            specs[row.job_id] = JobSpec.from_dict(job.spec)
        placement = specs[row.job_id].storage
        if placement is None:
            continue
        views.append(OracleView(row, placement.budget, placement.max_ntx_per_gb_month))
    return views


def jobs_for_oracle(
    session: Session, job_ids: list[str]
) -> list[tuple[str, bool, list[OracleView], list[OracleView]]]:
    """Per known job of `job_ids`: whether its spec keeps storage, its active copies, and
    its copies no longer active (failed): a co-signer checks a receipt's terms against
    either, since a copy that failed is still paid what it earned before."""
    out = []
    for job_id in dict.fromkeys(job_ids):
        job = session.exec(select(Job).where(Job.job_id == job_id)).first()
        if job is None:
            continue
        placement = JobSpec.from_dict(job.spec).storage
        active: list[OracleView] = []
        ended: list[OracleView] = []
        if placement is not None:
            rows = session.exec(
                select(PlacementRow)
                .where(PlacementRow.job_id == job_id)
                .order_by(col(PlacementRow.id))
            )
            for r in rows:
                view = OracleView(r, placement.budget, placement.max_ntx_per_gb_month)
                (active if r.status == ACTIVE else ended).append(view)
        out.append((job_id, placement is not None, active, ended))
    return out


def fail(
    session: Session,
    *,
    placement_id: int,
    reason: str,
    replacement_key: str | None,
    replacement: Commitment | None,
    now: datetime,
) -> tuple[PlacementRow, PlacementRow | None]:
    """An oracle found `placement_id` failing its challenges: it is not held any more; the
    copy the oracle made elsewhere (if any) takes its place for the rest of the term."""
    row = session.get(PlacementRow, placement_id)
    if row is None:
        raise NotFound(f"no storage placement {placement_id}")
    if row.status != ACTIVE:
        raise Conflict(f"storage placement {placement_id} is already {row.status}")
    if replacement is not None and replacement.content_root != row.content_root:
        raise BadRequest("the replacement holds another content root than the failed copy")
    row.status = "failed"
    row.reason = reason[:2000]
    session.add(row)
    new = None
    if replacement is not None and replacement_key is not None:
        view = offer_of(session, replacement_key)
        new = PlacementRow(
            job_id=row.job_id,
            kind=row.kind,
            object_key=row.object_key,
            provider_key=replacement_key,
            content_root=row.content_root,
            size=row.size,
            chunk_size=row.chunk_size,
            ntx_per_gb_month=view.row.ntx_per_gb_month,
            replaces_id=row.id,
            placed_at=now,
            ends_at=row.ends_at,
        )
        session.add(new)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise Conflict(f"provider {replacement_key} already holds {row.object_key}") from None
    session.refresh(row)
    if new is not None:
        session.refresh(new)
    return row, new


def record_accrual(
    session: Session,
    *,
    placement_id: int,
    accrued_ntx: int,
    paid_through: datetime,
    challenges_passed: int,
    strikes: int = 0,
    last_failure: str = "",
) -> PlacementRow:
    """An oracle's running total for one copy: it only grows, never past the end of the
    term, and all copies of a job together stay within the spec's storage budget."""
    row = session.get(PlacementRow, placement_id)
    if row is None:
        raise NotFound(f"no storage placement {placement_id}")
    if accrued_ntx < row.accrued_ntx:
        raise Conflict(
            f"placement {placement_id} has accrued {row.accrued_ntx}; a report of "
            f"{accrued_ntx} would take earnings back"
        )
    if _naive(paid_through) > _naive(row.ends_at):
        raise BadRequest(f"paid_through {paid_through} is after the term's end {row.ends_at}")
    job = session.exec(select(Job).where(Job.job_id == row.job_id)).first()
    placement = None if job is None else JobSpec.from_dict(job.spec).storage
    if placement is None:
        raise BadRequest(f"job {row.job_id} places no storage")
    others = session.exec(
        select(func.coalesce(func.sum(PlacementRow.accrued_ntx), 0)).where(
            PlacementRow.job_id == row.job_id, PlacementRow.id != placement_id
        )
    ).one()
    if int(others) + accrued_ntx > placement.budget:
        raise BadRequest(
            f"the job's copies would earn {int(others) + accrued_ntx}, more than its storage "
            f"budget {placement.budget}"
        )
    row.accrued_ntx = accrued_ntx
    row.paid_through = paid_through
    row.challenges_passed = max(row.challenges_passed, challenges_passed)
    row.strikes = strikes
    row.last_failure = last_failure[:2000] if strikes else ""
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def _naive(stamp: datetime) -> datetime:
    # SQLite hands back naive datetimes (UTC); compare like with like.
    return stamp.replace(tzinfo=None) if stamp.tzinfo else stamp


def earnings(session: Session, provider_key: str) -> tuple[OfferRow | None, list[PlacementRow]]:
    offer_row = session.exec(select(OfferRow).where(OfferRow.provider_key == provider_key)).first()
    return offer_row, placements(session, provider_key=provider_key)
