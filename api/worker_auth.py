"""Signed worker requests: every worker call carries an Ed25519 signature by its worker key.

A worker signs the canonical JSON of (domain, network, method, path with query, timestamp,
nonce, SHA-256 of the body) and sends it in four headers. The API accepts a request within
`worker_request_skew_s` of its clock and remembers each nonce for that long, so a captured
request can be neither replayed nor moved to another path, body or network.

The signing side lives here only until it moves to `proofnet/messages/` (the worker must
not import `api`); `request_message` is the single definition both sides must share.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from proofnet.messages.canonical import canonical_json

REQUEST_DOMAIN: Final = "proofnet/worker-request/v1"
HEADER_KEY: Final = "X-Proofnet-Worker-Key"
HEADER_TIMESTAMP: Final = "X-Proofnet-Timestamp"
HEADER_NONCE: Final = "X-Proofnet-Nonce"
HEADER_SIGNATURE: Final = "X-Proofnet-Signature"

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
    *, network: str, method: str, path: str, timestamp: int, nonce: str, body: bytes
) -> bytes:
    """The exact bytes a worker signs for one HTTP request."""
    return canonical_json(
        {
            "body_sha256": hashlib.sha256(body).hexdigest(),
            "domain": REQUEST_DOMAIN,
            "method": method.upper(),
            "network": network,
            "nonce": nonce,
            "path": path,
            "timestamp": timestamp,
        }
    )


def sign_request_headers(
    signing_key: object,
    *,
    network: str,
    method: str,
    path: str,
    body: bytes,
    timestamp: int,
    nonce: str,
) -> dict[str, str]:
    """Headers for one request, signed with a `nacl.signing.SigningKey`."""
    from nacl.signing import SigningKey

    if not isinstance(signing_key, SigningKey):
        raise TypeError("signing_key must be a nacl.signing.SigningKey")
    message = request_message(
        network=network, method=method, path=path, timestamp=timestamp, nonce=nonce, body=body
    )
    return {
        HEADER_KEY: bytes(signing_key.verify_key).hex(),
        HEADER_TIMESTAMP: str(timestamp),
        HEADER_NONCE: nonce,
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
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    try:
        VerifyKey(bytes.fromhex(signed.worker_key)).verify(message, bytes.fromhex(signed.signature))
    except BadSignatureError as e:
        raise WorkerAuthError("worker request signature does not verify") from e
    except ValueError as e:
        raise WorkerAuthError(f"worker key is not a usable Ed25519 key: {e}") from e
