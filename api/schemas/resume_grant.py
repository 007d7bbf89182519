"""Resume grants of sealed jobs (api/services/resume_grants.py)."""

from __future__ import annotations

from typing import Any

from api.schemas.common import PublicBody, RequestBody


class ResumeFilePublic(PublicBody):
    name: str
    sha256: str
    size: int


class PendingGrantPublic(PublicBody):
    """What the submitter re-wraps: these sealed files' keys, for this provider's key."""

    attempt: int
    provider_worker_key: str
    from_attempt: int
    at: int
    files: list[ResumeFilePublic]
    granted: bool
    headers: dict[str, str]  # name -> the sealed file's clear header, hex


class ResumeGrantIn(RequestBody):
    # name -> {"to": X25519 hex, "wrapped": hex}: checked in the service, opened by nobody here.
    grants: dict[str, Any]


class ResumeGrantPublic(PublicBody):
    grants: dict[str, dict[str, str]] | None  # None: the submitter has not granted yet
