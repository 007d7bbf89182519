from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status

from api.config import ApiConfig
from api.deps import ConfigDep, CurrentUser, NowDep, SeniorUser, SessionDep
from api.schemas.approval import ApplicationCreate, ApplicationPublic, ApplicationsPublic
from api.schemas.auth import SignedData
from api.services import approvals as service
from api.services.approvals import ApplicationState

# Row ids are 64-bit: a larger number cannot name a row (and would overflow the driver).
ApplicationId = Annotated[int, Path(ge=1, le=2**63 - 1)]

router = APIRouter(prefix="/approvals", tags=["approvals"])


def _public(config: ApiConfig, state: ApplicationState) -> ApplicationPublic:
    assert state.application.id is not None
    message = service.endorsement_message(
        network=config.network,
        applicant_address=state.applicant.address,
        application_id=state.application.id,
    )
    return ApplicationPublic.of(state, message)


@router.post("", status_code=status.HTTP_201_CREATED)
def apply(
    body: ApplicationCreate, user: CurrentUser, session: SessionDep, config: ConfigDep, now: NowDep
) -> ApplicationPublic:
    """Apply to become a submitter; senior members then endorse the application."""
    return _public(config, service.apply(session, config, user, body.statement, now))


@router.get("/me")
def mine(user: CurrentUser, session: SessionDep, config: ConfigDep) -> ApplicationPublic:
    return _public(config, service.own_application(session, config, user))


@router.get("/pending")
def pending(_senior: SeniorUser, session: SessionDep, config: ConfigDep) -> ApplicationsPublic:
    states = service.pending_applications(session, config)
    return ApplicationsPublic(data=[_public(config, s) for s in states], count=len(states))


@router.get("/{application_id}")
def get_application(
    application_id: ApplicationId, _senior: SeniorUser, session: SessionDep, config: ConfigDep
) -> ApplicationPublic:
    return _public(config, service.get_application(session, config, application_id))


@router.post("/{application_id}/endorsements", status_code=status.HTTP_201_CREATED)
def endorse(
    application_id: ApplicationId,
    body: SignedData,
    user: CurrentUser,
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
) -> ApplicationPublic:
    """Endorse with a wallet signature over the application's `endorsement_message`."""
    state = service.endorse(
        session,
        config,
        endorser=user,
        application_id=application_id,
        signature=body.signature.lower(),
        key=body.key.lower(),
        now=now,
    )
    return _public(config, state)
