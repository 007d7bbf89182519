"""`/users/me/sealing-key`: the X25519 key workers seal this submitter's results to."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Response, status
from pydantic import Field

from api.deps import CurrentUser, NowDep, SessionDep
from api.schemas.common import PublicBody, RequestBody
from api.services import sealing_keys as service

router = APIRouter(tags=["sealing"])

_HEX = r"^(?:[0-9a-fA-F]{2})+$"


class SealingKeyRegister(RequestBody):
    # CIP-30 `signData(address, hex(sealing_key_message(public_key)))`: COSE_Sign1 + COSE_Key.
    signature: str = Field(pattern=_HEX, max_length=4096)
    key: str = Field(pattern=_HEX, max_length=512)


class SealingKeyPublic(PublicBody):
    public_key: str
    signature: str
    cose_key: str
    registered_at: datetime


@router.put("/users/me/sealing-key")
def register(
    body: SealingKeyRegister, user: CurrentUser, session: SessionDep, now: NowDep
) -> SealingKeyPublic:
    """Seal this account's results to the signed key from now on (replaces an older key)."""
    row = service.register_sealing_key(
        session, user, signature=body.signature, key=body.key, now=now
    )
    return SealingKeyPublic.model_validate(row)


@router.get("/users/me/sealing-key")
def show(user: CurrentUser, session: SessionDep) -> SealingKeyPublic:
    return SealingKeyPublic.model_validate(service.sealing_key_of(session, user))


@router.delete("/users/me/sealing-key", status_code=status.HTTP_204_NO_CONTENT)
def delete(user: CurrentUser, session: SessionDep) -> Response:
    """Stop sealing: jobs claimed from now on return results in the clear."""
    service.delete_sealing_key(session, user)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
