"""Times as people read them: "2026-12-03 14:00 UTC (in 3 h 10 min)".

Every time a person is shown (CLI output, API messages, refusals) is given in UTC and as a
distance from now, never as a slot number: slots differ between networks and mean nothing
to a submitter. The web app renders the same form (api/web/js/when.js). Pure functions of
their arguments; the caller says what "now" is (the API's clock, the chain's tip).
"""

from __future__ import annotations

from datetime import UTC, datetime

_UNITS = (("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1))


def utc_text(posix_ms: int) -> str:
    """`2026-12-03 14:00 UTC` (seconds shown only when they are not zero)."""
    moment = datetime.fromtimestamp(posix_ms / 1000, tz=UTC)
    pattern = "%Y-%m-%d %H:%M UTC" if moment.second == 0 else "%Y-%m-%d %H:%M:%S UTC"
    return moment.strftime(pattern)


def duration_text(seconds: float) -> str:
    """`3 h 10 min`: the two largest units that are not zero (`0 s` for nothing)."""
    left = int(abs(seconds))
    parts: list[str] = []
    for name, size in _UNITS:
        count, left = divmod(left, size)
        if count or (parts and len(parts) < 2):
            parts.append(f"{count} {name}")
        if len(parts) == 2:
            break
    parts = [p for p in parts if not p.startswith("0 ")] or ["0 s"]
    return " ".join(parts)


def relative_text(posix_ms: int, now_ms: int) -> str:
    """`in 3 h 10 min`, `3 h 10 min ago`, or `now`."""
    seconds = (posix_ms - now_ms) / 1000
    if abs(seconds) < 1:
        return "now"
    text = duration_text(seconds)
    return f"in {text}" if seconds > 0 else f"{text} ago"


def when_text(posix_ms: int, now_ms: int) -> str:
    """`2026-12-03 14:00 UTC (in 3 h 10 min)`."""
    return f"{utc_text(posix_ms)} ({relative_text(posix_ms, now_ms)})"


def ms_of(moment: datetime) -> int:
    """POSIX ms of an aware datetime (naive ones are read as UTC, as the database stores)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
