from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from api.deps import SessionDep
from api.schemas.common import Message

router = APIRouter(tags=["health"])


@router.get("/health")
def health(session: SessionDep) -> Message:
    session.execute(text("SELECT 1"))
    return Message(detail="ok")
