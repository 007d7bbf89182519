from __future__ import annotations

from datetime import datetime

from pydantic import Field

from api.schemas.common import PublicBody, RequestBody
from api.services.approvals import ApplicationState


class ApplicationCreate(RequestBody):
    statement: str = Field(default="", max_length=2000)


class ApplicationPublic(PublicBody):
    id: int
    applicant: str
    statement: str
    created_at: datetime
    approved: bool
    approved_at: datetime | None
    endorsements: int
    endorsements_required: int
    # The exact text each senior member signs with their wallet to endorse.
    endorsement_message: str

    @classmethod
    def of(cls, state: ApplicationState, message: str) -> ApplicationPublic:
        app = state.application
        assert app.id is not None
        return cls(
            id=app.id,
            applicant=state.applicant.address,
            statement=app.statement,
            created_at=app.created_at,
            approved=state.approved,
            approved_at=app.approved_at,
            endorsements=state.endorsements,
            endorsements_required=state.required,
            endorsement_message=message,
        )


class ApplicationsPublic(PublicBody):
    data: list[ApplicationPublic]
    count: int
