"""Time as the API sees it: timezone-aware UTC (SQLModel stores datetimes as UTC)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)
