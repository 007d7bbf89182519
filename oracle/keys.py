"""The oracle's Ed25519 key: a cardano-cli style signing key file (`cborHex` of 32 bytes).

The same key signs settlement transactions (as a Cardano payment key) and the oracle's
requests to the API feed, so one file identifies one oracle everywhere.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import cbor2
from nacl.signing import SigningKey


class OracleKeyError(Exception):
    """The oracle key file is missing, unreadable, too open or malformed."""


@dataclass(frozen=True)
class OracleKey:
    signing_key: SigningKey
    path: Path | None = None

    @property
    def public_key_hex(self) -> str:
        return bytes(self.signing_key.verify_key).hex()


def write_key(path: Path, key: SigningKey | None = None) -> OracleKey:
    """Write `key` (or a fresh one) as a 0600 text envelope; refuses to overwrite."""
    key = key or SigningKey.generate()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "type": "PaymentSigningKeyShelley_ed25519",
        "description": "proofnet oracle key",
        "cborHex": cbor2.dumps(bytes(key)).hex(),
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(body, indent=4) + "\n")
    return OracleKey(key, path)


def load_key(path: Path) -> OracleKey:
    path = Path(path)
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise OracleKeyError(f"cannot read oracle key {path}: {exc}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise OracleKeyError(f"oracle key {path} is readable by others; chmod 600 it")
    try:
        raw = cbor2.loads(bytes.fromhex(json.loads(text)["cborHex"]))
    except (ValueError, KeyError, TypeError, cbor2.CBORDecodeError) as exc:
        raise OracleKeyError(
            f"oracle key {path} is not a signing key text envelope: {exc}"
        ) from exc
    if not isinstance(raw, bytes) or len(raw) != 32:
        raise OracleKeyError(f"oracle key {path} must hold a 32-byte Ed25519 seed")
    return OracleKey(SigningKey(raw), path)
