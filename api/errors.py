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


class Unprocessable(ApiError):
    """Well-formed JSON whose content cannot be accepted (e.g. a unit report of the wrong
    shape)."""

    status_code = 422
