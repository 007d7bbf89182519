"""The worker's Ed25519 identity: its key file and the payout binding it signs.

The key file is a cardano-cli style text envelope (JSON with `type` and `cborHex`), written
0600 and refused when other users can read it: whoever holds the key can redirect payouts.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from nacl.signing import SigningKey

from proofnet.messages.binding import PayoutBinding, binding_message, worker_key_id

KEY_TYPE = "ProofnetWorkerSigningKey_ed25519"
_CBOR_BYTES32_PREFIX = "5820"  # CBOR header of a 32-byte byte string, as cardano-cli writes


class IdentityError(Exception):
    """The worker key cannot be created, read or used."""


@dataclass(frozen=True)
class WorkerKey:
    signing_key: SigningKey
    path: Path | None = None

    @property
    def public_key(self) -> bytes:
        return bytes(self.signing_key.verify_key)

    @property
    def public_key_hex(self) -> str:
        return self.public_key.hex()

    @property
    def key_id(self) -> str:
        return worker_key_id(self.public_key)

    def sign(self, message: bytes) -> bytes:
        return self.signing_key.sign(message).signature


def _envelope(key: SigningKey) -> str:
    body = {
        "type": KEY_TYPE,
        "description": "proofnet worker signing key (keep private: it controls payouts)",
        "cborHex": _CBOR_BYTES32_PREFIX + bytes(key).hex(),
    }
    return json.dumps(body, indent=4) + "\n"


def create_key(path: Path) -> WorkerKey:
    """Write a fresh key to `path` (which must not exist) with mode 0600."""
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = SigningKey.generate()
    try:
        # O_EXCL: never overwrite an existing key, which would silently change the identity.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as e:
        raise IdentityError(f"key file {path} already exists; refusing to overwrite it") from e
    except OSError as e:
        raise IdentityError(f"cannot create key file {path}: {e.strerror}") from e
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(_envelope(key))
    except OSError as e:
        path.unlink(missing_ok=True)
        raise IdentityError(f"cannot write key file {path}: {e.strerror}") from e
    return WorkerKey(signing_key=key, path=path)


def load_key(path: Path) -> WorkerKey:
    """Read a key written by `create_key`, refusing files readable by group or others."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError as e:
        raise IdentityError(f"key file {path} does not exist") from e
    if not stat.S_ISREG(st.st_mode):
        raise IdentityError(f"key file {path} is not a regular file")
    if st.st_mode & 0o077:
        raise IdentityError(
            f"key file {path} has mode {stat.S_IMODE(st.st_mode):04o}: other users can read it; "
            f"run `chmod 600 {path}` (and consider the key compromised if it was shared)"
        )
    try:
        body = json.loads(path.read_text(encoding="ascii"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise IdentityError(f"key file {path} is not a readable JSON key envelope: {e}") from e
    if not isinstance(body, dict) or body.get("type") != KEY_TYPE:
        raise IdentityError(f"key file {path} is not a proofnet worker key (type {KEY_TYPE})")
    cbor_hex = body.get("cborHex")
    if (
        not isinstance(cbor_hex, str)
        or len(cbor_hex) != 68
        or not cbor_hex.startswith(_CBOR_BYTES32_PREFIX)
    ):
        raise IdentityError(f"key file {path} has a malformed cborHex field")
    try:
        seed = bytes.fromhex(cbor_hex[4:])
    except ValueError as e:
        raise IdentityError(f"key file {path} has a malformed cborHex field") from e
    return WorkerKey(signing_key=SigningKey(seed), path=path)


def load_or_create_key(path: Path) -> tuple[WorkerKey, bool]:
    """The key at `path`, creating it first if absent. The flag says whether it was created."""
    path = Path(path)
    if path.exists():
        return load_key(path), False
    return create_key(path), True


def bind_payout_address(
    key: WorkerKey, payout_address: str, network: str, api_challenge: str
) -> PayoutBinding:
    """Sign "pay `key`'s work to `payout_address` on `network`" for the API's challenge nonce.

    Bad input (unknown network, an address for another network, a malformed nonce) raises
    `proofnet.messages.binding.BindingError` before anything is signed."""
    message = binding_message(network, key.public_key_hex, payout_address, api_challenge)
    return PayoutBinding(
        network=network,  # type: ignore[arg-type]  # validated by binding_message
        worker_pubkey=key.public_key_hex,
        payout_address=payout_address,
        nonce=api_challenge,
        signature=key.sign(message).hex(),
    )
