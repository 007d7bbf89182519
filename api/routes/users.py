from __future__ import annotations

from fastapi import APIRouter

from api.deps import CurrentUser
from api.schemas.user import UserPublic

router = APIRouter(prefix="/users", tags=["users"])


@router.get("/me")
def me(user: CurrentUser) -> UserPublic:
    return UserPublic.model_validate(user)
