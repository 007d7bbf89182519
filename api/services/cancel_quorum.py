"""The oracles the API asks to co-sign a submitter's escrow cancel, over HTTP.

Each oracle serves `GET /api/v1/quorum/identity` (the key hash it signs with) and
`POST /api/v1/quorum/cancel` (its review of a cancel: a witness, or 409 with why not;
see oracle.settlement.cancel). The API names a quorum of them as the cancel's required
signers when it builds the transaction, and asks exactly those once the submitter signed.
Identities are asked once per process and kept; an oracle that cannot be reached is left
out of that build.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import httpx

from proofnet.redaction import redact_credentials

IDENTITY_PATH = "/api/v1/quorum/identity"
CANCEL_PATH = "/api/v1/quorum/cancel"


class OracleRefused(Exception):
    """An oracle would not co-sign (its reason), or could not be asked."""

    def __init__(self, url: str, reason: str) -> None:
        # Shown to the submitter: a configured URL's credentials never are.
        self.url = redact_credentials(url)
        self.reason = redact_credentials(reason)
        super().__init__(f"oracle {self.url}: {self.reason}")


@dataclass(frozen=True)
class Member:
    url: str
    key_hash: str  # hex of the payment key hash the oracle signs with


class CancelQuorum(Protocol):
    def members(self) -> list[Member]:
        """The oracles that answer now, with their key hashes."""
        ...

    def cosign(self, member: Member, tx_cbor: str) -> bytes:
        """The oracle's VKey witness CBOR over the cancel, or `OracleRefused`."""
        ...


@dataclass
class HttpCancelQuorum:
    urls: Sequence[str]
    timeout_s: float = 30.0
    _known: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _identity(self, url: str) -> str | None:
        with self._lock:
            known = self._known.get(url)
        if known is not None:
            return known
        try:
            response = httpx.get(f"{url}{IDENTITY_PATH}", timeout=min(self.timeout_s, 5.0))
            key_hash = str(response.json()["key_hash"]) if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            key_hash = None
        if key_hash is not None:
            with self._lock:
                self._known[url] = key_hash
        return key_hash

    def members(self) -> list[Member]:
        found = []
        for url in self.urls:
            key_hash = self._identity(url)
            if key_hash is not None:
                found.append(Member(url, key_hash))
        return found

    def cosign(self, member: Member, tx_cbor: str) -> bytes:
        try:
            response = httpx.post(
                f"{member.url}{CANCEL_PATH}", json={"tx_cbor": tx_cbor}, timeout=self.timeout_s
            )
        except httpx.HTTPError as exc:
            raise OracleRefused(member.url, f"unreachable: {exc}") from exc
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code != 200:
            detail = body.get("detail") if isinstance(body, dict) else None
            raise OracleRefused(member.url, str(detail or f"HTTP {response.status_code}"))
        try:
            return bytes.fromhex(body["witness"])
        except (KeyError, TypeError, ValueError) as exc:
            raise OracleRefused(member.url, "answered no witness") from exc
