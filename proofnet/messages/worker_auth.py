"""Signed worker requests: every worker call to the API carries an Ed25519 signature.

A worker signs the canonical JSON of (domain, network, method, path with query, timestamp,
nonce, SHA-256 of the body) and sends it in four headers. The API accepts a request within
its clock skew and remembers each nonce for that long, so a captured request can be neither
replayed nor moved to another path, body or network.

This is the single definition both sides share: the worker signs with
`sign_request_headers`, the API checks with `parse_headers` + `request_message` +
`verify_request`. Standard library + PyNaCl only, so the worker needs nothing from `api`.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from proofnet.messages.canonical import canonical_json

REQUEST_DOMAIN: Final = "proofnet/worker-request/v1"
HEADER_KEY: Final = "X-Proofnet-Worker-Key"
HEADER_TIMESTAMP: Final = "X-Proofnet-Timestamp"
HEADER_NONCE: Final = "X-Proofnet-Nonce"
HEADER_SIGNATURE: Final = "X-Proofnet-Signature"
HEADERS: Final = (HEADER_KEY, HEADER_TIMESTAMP, HEADER_NONCE, HEADER_SIGNATURE)

_HEX_KEY = re.compile(r"^[0-9a-f]{64}$")
_HEX_NONCE = re.compile(r"^[0-9a-f]{32,64}$")
_HEX_SIGNATURE = re.compile(r"^[0-9a-f]{128}$")


class WorkerAuthError(ValueError):
    """A signed worker request is malformed or its signature does not verify."""


@dataclass(frozen=True)
class SignedRequest:
    worker_key: str
    timestamp: int
    nonce: str
    signature: str


def request_message(
    *,
    network: str,
    method: str,
    path: str,
    timestamp: int,
    nonce: str,
    body: bytes = b"",
    body_sha256: str | None = None,
) -> bytes:
    """The exact bytes a worker signs for one HTTP request (`path` includes any query).

    `body_sha256` (hex) stands for `body` when the body streams: the API hashes an upload
    chunk while it writes it to disk and checks the signature once the chunk is in, so no
    chunk is ever held in memory to authenticate it."""
    if body_sha256 is None:
        body_sha256 = hashlib.sha256(body).hexdigest()
    elif body:
        raise ValueError("give the body or its SHA-256, not both")
    return canonical_json(
        {
            "body_sha256": body_sha256,
            "domain": REQUEST_DOMAIN,
            "method": method.upper(),
            "network": network,
            "nonce": nonce,
            "path": path,
            "timestamp": timestamp,
        }
    )


def sign_request_headers(
    signing_key: SigningKey,
    *,
    network: str,
    method: str,
    path: str,
    body: bytes = b"",
    body_sha256: str | None = None,
    timestamp: int | None = None,
    nonce: str | None = None,
) -> dict[str, str]:
    """Headers for one request; timestamp and nonce default to now and 16 random bytes.
    `body_sha256` signs a body that streams (see `request_message`)."""
    if not isinstance(signing_key, SigningKey):
        raise TypeError("signing_key must be a nacl.signing.SigningKey")
    ts = int(time.time()) if timestamp is None else timestamp
    nc = secrets.token_hex(16) if nonce is None else nonce
    message = request_message(
        network=network,
        method=method,
        path=path,
        timestamp=ts,
        nonce=nc,
        body=body,
        body_sha256=body_sha256,
    )
    return {
        HEADER_KEY: bytes(signing_key.verify_key).hex(),
        HEADER_TIMESTAMP: str(ts),
        HEADER_NONCE: nc,
        HEADER_SIGNATURE: signing_key.sign(message).signature.hex(),
    }


def parse_headers(headers: Mapping[str, str]) -> SignedRequest:
    # HTTP header names are case-insensitive; servers and proxies may lower-case them.
    lowered = {k.lower(): v for k, v in headers.items()}
    key = lowered.get(HEADER_KEY.lower())
    timestamp = lowered.get(HEADER_TIMESTAMP.lower())
    nonce = lowered.get(HEADER_NONCE.lower())
    signature = lowered.get(HEADER_SIGNATURE.lower())
    if not (key and timestamp and nonce and signature):
        raise WorkerAuthError(
            f"worker requests must carry {HEADER_KEY}, {HEADER_TIMESTAMP}, {HEADER_NONCE} "
            f"and {HEADER_SIGNATURE}"
        )
    if not _HEX_KEY.match(key):
        raise WorkerAuthError(f"{HEADER_KEY} must be 64 lowercase hex characters")
    if not _HEX_NONCE.match(nonce):
        raise WorkerAuthError(f"{HEADER_NONCE} must be 32 to 64 lowercase hex characters")
    if not _HEX_SIGNATURE.match(signature):
        raise WorkerAuthError(f"{HEADER_SIGNATURE} must be 128 lowercase hex characters")
    if not timestamp.isdigit() or len(timestamp) > 12:
        raise WorkerAuthError(f"{HEADER_TIMESTAMP} must be whole Unix seconds")
    return SignedRequest(key, int(timestamp), nonce, signature)


def verify_request(signed: SignedRequest, message: bytes) -> None:
    """Raise WorkerAuthError unless `signed.signature` is the worker key's over `message`."""
    try:
        VerifyKey(bytes.fromhex(signed.worker_key)).verify(message, bytes.fromhex(signed.signature))
    except BadSignatureError as e:
        raise WorkerAuthError("worker request signature does not verify") from e
    except ValueError as e:
        raise WorkerAuthError(f"worker key is not a usable Ed25519 key: {e}") from e


def request_target(raw_target: str) -> str:
    """What the signature's `path` is for a request sent to `raw_target` (path?query as sent
    on the wire): the percent-decoded path plus the query as sent, which is how an ASGI
    server (and so the API) hands the request to the application."""
    path, sep, query = raw_target.partition("?")
    return unquote(path) + (sep + query if query else "")
