"""Submitter approval: an application plus N wallet-signed endorsements by senior members."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import Conflict, Forbidden, NotFound, Unauthorized
from api.models import Application, Endorsement, User
from api.wallet import verify_sign_data


@dataclass(frozen=True)
class ApplicationState:
    application: Application
    applicant: User
    endorsements: int
    required: int

    @property
    def approved(self) -> bool:
        return self.applicant.is_approved


def endorsement_message(*, network: str, applicant_address: str, application_id: int) -> str:
    # Domain-separated so that a sign-in signature (or an endorsement of someone else, or on
    # another network) can never count as this endorsement.
    return (
        "proofnet endorsement v1\n"
        f"network: {network}\n"
        f"applicant: {applicant_address}\n"
        f"application: {application_id}\n"
        "I vouch that this applicant may submit training jobs."
    )


def _count(session: Session, application_id: int) -> int:
    return session.exec(
        select(func.count(col(Endorsement.endorser_id).distinct())).where(
            Endorsement.application_id == application_id
        )
    ).one()


def _state(session: Session, config: ApiConfig, application: Application) -> ApplicationState:
    applicant = session.get(User, application.user_id)
    assert applicant is not None and application.id is not None
    return ApplicationState(
        application=application,
        applicant=applicant,
        endorsements=_count(session, application.id),
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
    if application.user_id == endorser.id:
        raise Forbidden("you cannot endorse your own application")
    applicant = session.get(User, application.user_id)
    assert applicant is not None and endorser.id is not None
    expected = endorsement_message(
        network=config.network, applicant_address=applicant.address, application_id=application_id
    )
    signed = verify_sign_data(signature, key)
    if signed.message != expected:
        raise Unauthorized("signed message is not the endorsement message for this application")
    if signed.key_hash != endorser.payment_key_hash:
        raise Unauthorized("endorsement was not signed by your wallet's payment key")
    already = session.exec(
        select(Endorsement).where(
            Endorsement.application_id == application_id, Endorsement.endorser_id == endorser.id
        )
    ).first()
    if already is not None:
        raise Conflict("you have already endorsed this application")
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
        _count(session, application_id) >= config.approval_endorsements
        and not applicant.is_approved
    ):
        applicant.is_approved = True
        applicant.approved_at = now
        application.approved_at = now
        session.add(applicant)
        session.add(application)
    session.commit()
    return _state(session, config, application)
