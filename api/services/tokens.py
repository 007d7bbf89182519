"""Opaque secrets: generated here, stored only as their SHA-256."""

from __future__ import annotations

import hashlib
import secrets


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def new_nonce(nbytes: int = 16) -> str:
    return secrets.token_hex(nbytes)


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()
