"""Sealed results: a result file encrypted by the worker to the submitter's X25519 key.

Format of a sealed blob (what is uploaded, stored and attested):

    b"proofnet-sealed/v1\\n" || SealedBox(recipient).encrypt(inner)
    inner = canonical JSON {"name", "sha256", "size"} of the plaintext || b"\\n" || plaintext

A sealed box (X25519 + XSalsa20-Poly1305 with an ephemeral sender key) can be opened only
with the recipient's private key, so neither the API host nor the storage provider can read
the result. The header inside names the result and the plaintext's SHA-256: a host that
swaps two sealed blobs between result names, or a bug that damages the plaintext, is caught
when the submitter opens them.

The SHA-256 the API records, the worker attests and the oracle checks is the one of the
sealed blob (the ciphertext): it is what everyone but the submitter can see and compare, so
the oracle's check that the attested hash is what was uploaded stays meaningful. The
plaintext's hash is inside, for the submitter.

The submitter's sealing key is a separate X25519 key, not one derived from the Ed25519
payment key: a browser wallet (CIP-30) never exposes its payment key, so it could not open
results sealed to a derived key, and a key that reads results should not also move funds.
The wallet vouches for the sealing key with a CIP-8 signature over `sealing_key_message`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox

from proofnet.messages.canonical import canonical_json

SEALED_MAGIC = b"proofnet-sealed/v1\n"
SEALING_KEY_DOMAIN = "proofnet sealing key v1"
_HEX32 = re.compile(r"[0-9a-f]{64}")


class SealingError(ValueError):
    """A sealed blob or sealing key is malformed, or the blob is not for this key/name."""


@dataclass(frozen=True)
class OpenedResult:
    name: str
    sha256: str  # of the plaintext
    data: bytes


def check_public_key(public_key_hex: str) -> str:
    if not isinstance(public_key_hex, str) or not _HEX32.fullmatch(public_key_hex):
        raise SealingError("a sealing key is 32 bytes as 64 lowercase hex digits")
    return public_key_hex


def sealing_key_message(public_key_hex: str) -> str:
    """What the submitter's wallet signs (CIP-8) to vouch for its sealing key."""
    return f"{SEALING_KEY_DOMAIN}: {check_public_key(public_key_hex)}"


def public_key_of_message(message: str) -> str:
    prefix = SEALING_KEY_DOMAIN + ": "
    if not message.startswith(prefix):
        raise SealingError("the signed message is not a proofnet sealing-key statement")
    return check_public_key(message[len(prefix) :])


def is_sealed(blob: bytes) -> bool:
    return blob.startswith(SEALED_MAGIC)


def seal(data: bytes, *, name: str, recipient_public_key: str) -> bytes:
    recipient = PublicKey(bytes.fromhex(check_public_key(recipient_public_key)))
    header = canonical_json(
        {"name": name, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    )
    return SEALED_MAGIC + SealedBox(recipient).encrypt(header + b"\n" + data)


def open_sealed(blob: bytes, *, private_key: bytes, name: str | None = None) -> OpenedResult:
    """Decrypt and check a sealed blob; `name` (when given) must be the one sealed inside."""
    if not is_sealed(blob):
        raise SealingError("not a proofnet sealed result")
    try:
        inner = SealedBox(PrivateKey(private_key)).decrypt(blob[len(SEALED_MAGIC) :])
    except CryptoError as e:
        raise SealingError("cannot open the sealed result: it was sealed to another key") from e
    head, sep, data = inner.partition(b"\n")
    try:
        header = json.loads(head) if sep else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or set(header) != {"name", "sha256", "size"}:
        raise SealingError("the sealed result has no valid header")
    if name is not None and header["name"] != name:
        raise SealingError(f"the sealed blob is result {header['name']!r}, not {name!r}")
    digest = hashlib.sha256(data).hexdigest()
    if header["sha256"] != digest or header["size"] != len(data):
        raise SealingError("the sealed result's content does not match its header")
    return OpenedResult(name=str(header["name"]), sha256=digest, data=data)


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


def public_key_hex(private_key: bytes) -> str:
    return bytes(PrivateKey(private_key).public_key).hex()


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
