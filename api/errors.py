"""Errors services raise; the app turns each into its HTTP status with a clear message."""

from __future__ import annotations


class ApiError(Exception):
    status_code = 400

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class BadRequest(ApiError):
    status_code = 400


class Unauthorized(ApiError):
    status_code = 401


class Forbidden(ApiError):
    status_code = 403


class NotFound(ApiError):
    status_code = 404


class Conflict(ApiError):
    status_code = 409


class LengthRequired(ApiError):
    status_code = 411


class RangeNotSatisfiable(ApiError):
    status_code = 416


class TooManyRequests(ApiError):
    """Asked again sooner than allowed; the message says from when."""

    status_code = 429


class Unprocessable(ApiError):
    """Well-formed JSON whose content cannot be accepted (e.g. a unit report of the wrong
    shape)."""

    status_code = 422


# SQLSTATEs of a unique and a foreign-key violation (SQLite says so in its message).
_CONFLICT_STATES = ("23505", "23503")


def conflict_of(exc: Exception) -> Conflict | None:
    """A `Conflict` for a database integrity error two concurrent requests caused (a
    duplicate insert, or a row referenced while another request deleted it); None for any
    other integrity error (a bug, which stays a 500)."""
    orig = getattr(exc, "orig", None)
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    text = str(orig or exc)
    if state in _CONFLICT_STATES or text.startswith(
        ("UNIQUE constraint failed", "FOREIGN KEY constraint failed")
    ):
        return Conflict("another request changed the same thing at the same time; reload and retry")
    return None
