"""Sealing keys: the X25519 key a submitter has results sealed to, vouched for by a wallet.

Results and proof files of a sealed job are encrypted by the worker in the envelope of
`proofnet.messages.envelope` (the one definition of the format, which also says what is
hashed where); this module holds the keys on both sides: the submitter's key file, the
statement its wallet signs, and the worker's check of that signature before it seals.

The submitter's sealing key is a separate X25519 key, not one derived from the Ed25519
payment key: a browser wallet (CIP-30) never exposes its payment key, so it could not open
results sealed to a derived key, and a key that reads results should not also move funds.
The wallet vouches for the sealing key with a CIP-8 signature over `sealing_key_message`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from nacl.public import PrivateKey

from proofnet.messages.envelope import SealingError, check_public_key, public_key_hex

__all__ = [
    "SEALING_KEY_DOMAIN",
    "SealingError",
    "SealingTarget",
    "check_public_key",
    "generate_sealing_key",
    "load_sealing_key",
    "public_key_hex",
    "public_key_of_message",
    "sealing_key_message",
]

SEALING_KEY_DOMAIN = "proofnet sealing key v1"
_HEX32 = re.compile(r"[0-9a-f]{64}")


def sealing_key_message(public_key_hex: str) -> str:
    """What the submitter's wallet signs (CIP-8) to vouch for its sealing key."""
    return f"{SEALING_KEY_DOMAIN}: {check_public_key(public_key_hex)}"


def public_key_of_message(message: str) -> str:
    prefix = SEALING_KEY_DOMAIN + ": "
    if not message.startswith(prefix):
        raise SealingError("the signed message is not a proofnet sealing-key statement")
    return check_public_key(message[len(prefix) :])


# --- sealing key files (the submitter's side) ----------------------------------------------


def generate_sealing_key(path: Path) -> bytes:
    """A new X25519 private key written as hex to `path` (0600, never overwritten)."""
    key = bytes(PrivateKey.generate())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.hex() + "\n")
    return key


def load_sealing_key(path: Path) -> bytes:
    try:
        text = Path(path).read_text().strip()
    except OSError as e:
        raise SealingError(f"cannot read the sealing key file {path}: {e}") from e
    if not _HEX32.fullmatch(text):
        raise SealingError(f"{path} does not hold an X25519 private key (64 hex digits)")
    return bytes.fromhex(text)


# --- what a worker checks before sealing to a key the API handed it -------------------------


@dataclass(frozen=True)
class SealingTarget:
    """A sealing key with the CIP-8 signature of the wallet that registered it."""

    public_key: str
    signature: str  # COSE_Sign1 hex
    cose_key: str  # COSE_Key hex

    @classmethod
    def from_json(cls, obj: object) -> SealingTarget:
        if not isinstance(obj, dict):
            raise SealingError("sealing must be an object")
        try:
            return cls(
                public_key=check_public_key(str(obj["public_key"])),
                signature=str(obj["signature"]),
                cose_key=str(obj["cose_key"]),
            )
        except KeyError as e:
            raise SealingError(f"sealing lacks {e}") from e

    def verify(self) -> str:
        """Check the wallet signed exactly this key; its payment key hash (hex)."""
        import cbor2
        from pycardano import PaymentVerificationKey
        from pycardano.cip import cip8

        try:
            result = cip8.verify(
                {"signature": self.signature, "key": self.cose_key}, attach_cose_key=True
            )
            raw_key = cbor2.loads(bytes.fromhex(self.cose_key))[-2]
            key_hash = PaymentVerificationKey.from_primitive(raw_key).hash().payload.hex()
        except Exception as e:  # cip8/cose raise assorted types on malformed input
            raise SealingError(f"the sealing key's signature is malformed: {e}") from e
        if not result["verified"]:
            raise SealingError("the sealing key's wallet signature does not verify")
        if result["message"] != sealing_key_message(self.public_key):
            raise SealingError("the wallet signed another sealing key than the one given")
        return key_hash
