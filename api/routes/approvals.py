"""Submitter approval: apply, follow the endorsements, and (senior members) endorse.

Each refusal is a 4xx with a `detail` that says why (api.errors); OpenAPI lists them per
route.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, status

from api.config import ApiConfig
from api.deps import ConfigDep, CurrentUser, NowDep, SeniorUser, SessionDep
from api.schemas.approval import ApplicationCreate, ApplicationPublic, ApplicationsPublic
from api.schemas.auth import SignedData
from api.schemas.common import Message
from api.services import approvals as service
from api.services.approvals import ApplicationState
from proofnet.messages.endorsement import endorsement_message

# Row ids are 64-bit: a larger number cannot name a row (and would overflow the driver).
ApplicationId = Annotated[int, Path(ge=1, le=2**63 - 1)]

router = APIRouter(prefix="/approvals", tags=["approvals"])


def _refusals(codes: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI's description of a route's 4xx answers (each a `Message`)."""
    return {code: {"model": Message, "description": why} for code, why in codes.items()}


_SIGNED_IN = {401: "not signed in (or the session expired)"}
_SENIOR = {**_SIGNED_IN, 403: "only senior members may do this"}


def _public(config: ApiConfig, state: ApplicationState) -> ApplicationPublic:
    assert state.application.id is not None
    message = endorsement_message(
        network=config.network,
        applicant_address=state.applicant.address,
        application_id=state.application.id,
    )
    return ApplicationPublic.of(state, message)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses=_refusals({**_SIGNED_IN, 409: "already approved, or already applied"}),
)
def apply(
    body: ApplicationCreate, user: CurrentUser, session: SessionDep, config: ConfigDep, now: NowDep
) -> ApplicationPublic:
    """Apply to become a submitter; senior members then endorse the application."""
    return _public(config, service.apply(session, config, user, body.statement, now))


@router.get("/me", responses=_refusals({**_SIGNED_IN, 404: "you have not applied"}))
def mine(user: CurrentUser, session: SessionDep, config: ConfigDep) -> ApplicationPublic:
    """Your application's progress: how many endorsements of how many, and by whom."""
    return _public(config, service.own_application(session, config, user))


@router.get("/pending", responses=_refusals(_SENIOR))
def pending(_senior: SeniorUser, session: SessionDep, config: ConfigDep) -> ApplicationsPublic:
    """Applications not approved yet, oldest first, each with who has endorsed it."""
    states = service.pending_applications(session, config)
    return ApplicationsPublic(data=[_public(config, s) for s in states], count=len(states))


@router.get("/{application_id}", responses=_refusals({**_SENIOR, 404: "no such application"}))
def get_application(
    application_id: ApplicationId, _senior: SeniorUser, session: SessionDep, config: ConfigDep
) -> ApplicationPublic:
    """One application, with who has endorsed it."""
    return _public(config, service.get_application(session, config, application_id))


@router.post(
    "/{application_id}/endorsements",
    status_code=status.HTTP_201_CREATED,
    responses=_refusals(
        {
            401: "not signed in, or the signature is not your key's over this application's "
            "`endorsement_message`",
            403: "not a senior member, or the application is filed under an address of your "
            "own key",
            404: "no such application",
            409: "your key (under any of its addresses) already endorsed it, or it is approved",
        }
    ),
)
def endorse(
    application_id: ApplicationId,
    body: SignedData,
    user: CurrentUser,
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
) -> ApplicationPublic:
    """Endorse with a CIP-8 wallet signature (CIP-30 `signData`) over the application's
    `endorsement_message`. A payment key endorses an application once, whichever of its
    addresses it signs in with."""
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
