"""Submitter approval: an application plus N wallet-signed endorsements by senior members.

An endorser is a payment key, not an address: one key has many addresses (enterprise, base
with any stake key, ...) and each can be an account here. So a key endorses an application
at most once whichever of its addresses it signs in with, never an application filed under
any address of its own, and the count is of distinct keys (a race that slips a second row in
for the same key still counts once).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import Conflict, Forbidden, NotFound, Unauthorized
from api.models import Application, Endorsement, User
from api.wallet import verify_sign_data
from proofnet.messages.endorsement import endorsement_message


@dataclass(frozen=True)
class Endorser:
    """One key's endorsement: the address it signed in with, its key hash, when."""

    address: str
    key_hash: str
    endorsed_at: datetime


@dataclass(frozen=True)
class ApplicationState:
    application: Application
    applicant: User
    # One per endorsing key, first endorsement first.
    endorsers: tuple[Endorser, ...]
    required: int

    @property
    def endorsements(self) -> int:
        return len(self.endorsers)

    @property
    def approved(self) -> bool:
        return self.applicant.is_approved


def _endorsers(session: Session, application_id: int) -> tuple[Endorser, ...]:
    rows = session.exec(
        select(Endorsement, User)
        .join(User, col(User.id) == col(Endorsement.endorser_id))
        .where(Endorsement.application_id == application_id)
        .order_by(col(Endorsement.created_at), col(Endorsement.id))
    ).all()
    seen: dict[str, Endorser] = {}
    for endorsement, user in rows:
        seen.setdefault(
            user.payment_key_hash,
            Endorser(user.address, user.payment_key_hash, endorsement.created_at),
        )
    return tuple(seen.values())


def _state(session: Session, config: ApiConfig, application: Application) -> ApplicationState:
    applicant = session.get(User, application.user_id)
    assert applicant is not None and application.id is not None
    return ApplicationState(
        application=application,
        applicant=applicant,
        endorsers=_endorsers(session, application.id),
        required=config.approval_endorsements,
    )


def apply(
    session: Session, config: ApiConfig, user: User, statement: str, now: datetime
) -> ApplicationState:
    if user.is_approved:
        raise Conflict("you are already an approved submitter")
    existing = session.exec(select(Application).where(Application.user_id == user.id)).first()
    if existing is not None:
        raise Conflict("you have already applied; ask senior members to endorse you")
    assert user.id is not None
    application = Application(user_id=user.id, statement=statement, created_at=now)
    session.add(application)
    session.commit()
    return _state(session, config, application)


def get_application(session: Session, config: ApiConfig, application_id: int) -> ApplicationState:
    application = session.get(Application, application_id)
    if application is None:
        raise NotFound(f"no application {application_id}")
    return _state(session, config, application)


def own_application(session: Session, config: ApiConfig, user: User) -> ApplicationState:
    application = session.exec(select(Application).where(Application.user_id == user.id)).first()
    if application is None:
        raise NotFound("you have not applied")
    return _state(session, config, application)


def pending_applications(session: Session, config: ApiConfig) -> list[ApplicationState]:
    rows = session.exec(
        select(Application)
        .where(col(Application.approved_at).is_(None))
        .order_by(col(Application.created_at), col(Application.id))
    ).all()
    return [_state(session, config, a) for a in rows]


def endorse(
    session: Session,
    config: ApiConfig,
    *,
    endorser: User,
    application_id: int,
    signature: str,
    key: str,
    now: datetime,
) -> ApplicationState:
    if not endorser.is_senior:
        raise Forbidden("only senior members may endorse applicants")
    application = session.get(Application, application_id)
    if application is None:
        raise NotFound(f"no application {application_id}")
    applicant = session.get(User, application.user_id)
    assert applicant is not None and endorser.id is not None
    if applicant.payment_key_hash == endorser.payment_key_hash:
        # Also under another address of the same key: a key never vouches for itself.
        raise Forbidden(
            "you cannot endorse your own application (it is filed under an address of your "
            "wallet's payment key)"
        )
    if applicant.is_approved:
        raise Conflict(f"application {application_id} is already approved")
    expected = endorsement_message(
        network=config.network, applicant_address=applicant.address, application_id=application_id
    )
    signed = verify_sign_data(signature, key)
    if signed.message != expected:
        raise Unauthorized("signed message is not the endorsement message for this application")
    if signed.key_hash != endorser.payment_key_hash:
        raise Unauthorized("endorsement was not signed by your wallet's payment key")
    for earlier in _endorsers(session, application_id):
        if earlier.key_hash == endorser.payment_key_hash:
            via = "" if earlier.address == endorser.address else f" (as {earlier.address})"
            raise Conflict(f"your key has already endorsed this application{via}")
    session.add(
        Endorsement(
            application_id=application_id,
            endorser_id=endorser.id,
            message=expected,
            signature=signature,
            key=key,
            created_at=now,
        )
    )
    try:
        session.flush()
    except IntegrityError as e:  # a concurrent duplicate on PostgreSQL
        session.rollback()
        raise Conflict("you have already endorsed this application") from e
    if (
        len(_endorsers(session, application_id)) >= config.approval_endorsements
        and not applicant.is_approved
    ):
        applicant.is_approved = True
        applicant.approved_at = now
        application.approved_at = now
        session.add(applicant)
        session.add(application)
    session.commit()
    return _state(session, config, application)
