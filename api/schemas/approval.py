from __future__ import annotations

from datetime import datetime

from pydantic import Field

from api.schemas.common import PublicBody, RequestBody
from api.services.approvals import ApplicationState


class ApplicationCreate(RequestBody):
    statement: str = Field(default="", max_length=2000)


class EndorserPublic(PublicBody):
    """One senior's endorsement. An endorser is a payment key: `key_hash` is what counts,
    `address` the one it signed in with."""

    address: str
    key_hash: str
    endorsed_at: datetime


class ApplicationPublic(PublicBody):
    id: int
    applicant: str
    # The payment key hash behind `applicant`: no address of that key may endorse it.
    applicant_key_hash: str
    statement: str
    created_at: datetime
    approved: bool
    approved_at: datetime | None
    # Distinct endorsing keys so far, and who they are (first endorsement first).
    endorsements: int
    endorsements_required: int
    endorsers: list[EndorserPublic]
    # The exact text each senior member signs with their wallet to endorse.
    endorsement_message: str

    @classmethod
    def of(cls, state: ApplicationState, message: str) -> ApplicationPublic:
        app = state.application
        assert app.id is not None
        return cls(
            id=app.id,
            applicant=state.applicant.address,
            applicant_key_hash=state.applicant.payment_key_hash,
            statement=app.statement,
            created_at=app.created_at,
            approved=state.approved,
            approved_at=app.approved_at,
            endorsements=state.endorsements,
            endorsements_required=state.required,
            endorsers=[
                EndorserPublic(address=e.address, key_hash=e.key_hash, endorsed_at=e.endorsed_at)
                for e in state.endorsers
            ],
            endorsement_message=message,
        )


class ApplicationsPublic(PublicBody):
    data: list[ApplicationPublic]
    count: int
