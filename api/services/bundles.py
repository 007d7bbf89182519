"""Settlement attestation bundles, relayed from the oracles: `GET /api/v1/bundles/{sha256}`.

The oracles store and serve the bundles (`oracle.settlement.routes`); the API answers the
same path so an auditor (or the web app) needs only the API's address. Nothing is trusted:
an oracle's answer is accepted only when its bytes hash to the asked SHA-256 (the one the
settlement's metadata commits to), so a lying or compromised oracle is skipped, never
relayed. Accepted bundles are immutable and kept in a bounded LRU cache.

I/O: HTTP GETs to the configured oracles (`ApiConfig.cancel_oracle_urls`), on a miss only.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

import httpx
from cachetools import LRUCache

from api.errors import ApiError

MAX_BUNDLE_BYTES = 4 << 20  # far above a full batch's bundle; refuses floods from an oracle
CACHED_BUNDLES = 256


class BundleUnavailable(ApiError):
    """No oracle answered for the bundle (every one down or lying); retry later."""

    status_code = 503


class BundleRelay:
    """The bundle with a given SHA-256 from the first oracle serving exactly those bytes."""

    def __init__(self, oracle_urls: Sequence[str], timeout_s: float = 10.0) -> None:
        self.oracle_urls = tuple(u.rstrip("/") for u in oracle_urls)
        self.timeout_s = timeout_s
        self._cache: LRUCache[str, bytes] = LRUCache(maxsize=CACHED_BUNDLES)
        self._lock = threading.Lock()

    def get(self, sha256: str) -> bytes | None:
        """The bundle's bytes; None when every oracle that answered has none; raises
        BundleUnavailable when some oracle could not be asked or served wrong bytes."""
        with self._lock:
            cached = self._cache.get(sha256)
        if cached is not None:
            return cached
        problems: list[str] = []
        with httpx.Client(timeout=self.timeout_s) as client:
            for base in self.oracle_urls:
                body = self._ask(client, base, sha256, problems)
                if body is not None:
                    with self._lock:
                        self._cache[sha256] = body
                    return body
        if problems:
            raise BundleUnavailable(f"no oracle served bundle {sha256}: {'; '.join(problems)}")
        return None

    @staticmethod
    def _ask(client: httpx.Client, base: str, sha256: str, problems: list[str]) -> bytes | None:
        try:
            with client.stream("GET", f"{base}/api/v1/bundles/{sha256}") as response:
                if response.status_code == 404:
                    return None
                if response.status_code != 200:
                    problems.append(f"{base}: {response.status_code}")
                    return None
                body = bytearray()
                for chunk in response.iter_bytes():
                    body.extend(chunk)
                    if len(body) > MAX_BUNDLE_BYTES:
                        problems.append(f"{base}: more than {MAX_BUNDLE_BYTES} bytes")
                        return None
        except httpx.HTTPError as exc:
            problems.append(f"{base}: {type(exc).__name__}")
            return None
        if hashlib.sha256(body).hexdigest() != sha256:
            problems.append(f"{base}: served bytes that do not hash to {sha256}")
            return None
        return bytes(body)
