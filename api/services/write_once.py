"""A signed answer a worker posts once: a verifier's report, a disputed provider's
commitment and reveal. Posting the same bytes again is the same answer (a retry after a
lost response); posting other bytes is a conflict, never an overwrite, so nobody can change
an answer after seeing what it was compared with."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Session, SQLModel

from api.errors import Conflict


def store_once(
    session: Session,
    row: SQLModel,
    field: str,
    stored: dict[str, Any],
    now: datetime,
    what: str,
) -> None:
    """Keep `stored` in `row.<field>` (and the time in `row.<field's time>`) unless it holds
    an answer already: the same one is kept as it is; another is a Conflict naming `what`."""
    held = getattr(row, field)
    if held is not None:
        if held != stored:
            raise Conflict(f"{what} was already answered otherwise")
        return
    setattr(row, field, stored)
    setattr(row, _TIMES[field], now)
    session.add(row)
    session.commit()


# The column that records when each answer came.
_TIMES = {"report": "reported_at", "commitment": "committed_at", "reveal": "revealed_at"}
