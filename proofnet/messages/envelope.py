"""Sealed files: one file encrypted to several X25519 recipients, written and read in chunks.

This is the one definition of the envelope a worker seals a job's results and proof files
in (`proofnet/messages/sealing.py` holds the keys it seals to). Format v2:

    b"proofnet-sealed/v2\\n"
    u32 (big endian) n, then n bytes of canonical JSON, the clear header:
        {"chunk": plaintext bytes per message,
         "key": key commitment of the content key (hex),
         "recipients": [{"to": X25519 public key hex, "wrapped": SealedBox(to, key) hex}, ...],
         "stream": the secretstream header (hex, 24 bytes)}
    u32 m, then m bytes: the first stream message, canonical JSON {"name", "sha256", "size"}
        of the plaintext (TAG_MESSAGE)
    the plaintext in messages of `chunk` bytes (+17 bytes of tag each); the last one, which
        may be short or empty, carries TAG_FINAL.

Messages are libsodium's crypto_secretstream_xchacha20poly1305 under a per-file 32-byte
content key: a reader notices a reordered, dropped, truncated or appended message, and never
needs more than one chunk in memory. The content key is wrapped for each recipient with a
sealed box (X25519 + XSalsa20-Poly1305, ephemeral sender key). The key commitment (a BLAKE2b
MAC under the key) binds the ciphertext to one key, so a key handed over later cannot open
it to other plaintext than every other recipient sees.

Recipients added later. A wrap of the content key for someone else (a `Stanza`, a "grant")
needs no change to the stored file: the provider that sealed it derives every file's key
from one secret per lease (`content_key`), keeps only that secret, and wraps the key of each
file a drawn verifier must replay for the verifier's key when asked (worker/seal_keys.py).
The API host relays grants it cannot open. The alternative, a provider serving its proof
files to verifiers itself, would need every provider reachable from every verifier and
online with gigabytes kept per job; a re-wrap is 80 bytes and the secret is 32.

Hashes. What the store names a sealed file by, the API records and the oracles compare is
the SHA-256 of the envelope (the ciphertext): it is all they can see. The plaintext's
SHA-256 is inside the envelope, for its recipients; for a proof file it is also the leaf
hash the PoT manifest commits to, so a verifier checks what it opened against the root.

A verifier is a registered worker: its sealing key is the X25519 form of its Ed25519 worker
key (`worker_recipient`), so it needs no second key to be sealed to.

Format v1 (a whole result in one SealedBox, `open_sealed`) is still read, never written.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import struct
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from nacl import bindings as sodium
from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox
from nacl.signing import SigningKey, VerifyKey

from proofnet.messages.canonical import canonical_json

SEALED_MAGIC_V1 = b"proofnet-sealed/v1\n"
SEALED_MAGIC = b"proofnet-sealed/v2\n"
MAGIC_BYTES = len(SEALED_MAGIC)
CHUNK = 64 * 1024
MAX_CHUNK = 16 << 20
MAX_RECIPIENTS = 64
MAX_HEADER_BYTES = 64 * 1024
KEY_BYTES = 32
_ABYTES = sodium.crypto_secretstream_xchacha20poly1305_ABYTES
_STREAM_HEADER = sodium.crypto_secretstream_xchacha20poly1305_HEADERBYTES
_TAG_MESSAGE = sodium.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
_TAG_FINAL = sodium.crypto_secretstream_xchacha20poly1305_TAG_FINAL
_COMMIT_PERSON = b"proofnet/kc/v2"
_FILE_KEY_PERSON = b"proofnet/fk/v2"
_HEX32 = re.compile(r"[0-9a-f]{64}")
_WRAPPED = re.compile(r"[0-9a-f]{160}")  # 32-byte key + 32-byte ephemeral key + 16-byte tag
_READ = 1 << 20


class SealingError(ValueError):
    """A sealed file or key is malformed, or the file is not for this key or name."""


def check_public_key(public_key_hex: str) -> str:
    if not isinstance(public_key_hex, str) or not _HEX32.fullmatch(public_key_hex):
        raise SealingError("a sealing key is 32 bytes as 64 lowercase hex digits")
    return public_key_hex


def sealed_version(prefix: bytes) -> int | None:
    """1 or 2 when `prefix` (the first MAGIC_BYTES bytes or more) starts a sealed file."""
    if prefix.startswith(SEALED_MAGIC):
        return 2
    if prefix.startswith(SEALED_MAGIC_V1):
        return 1
    return None


def is_sealed(prefix: bytes) -> bool:
    return sealed_version(prefix) is not None


# --- keys --------------------------------------------------------------------------------


def new_secret() -> bytes:
    """A fresh per-lease sealing secret: every file's content key derives from it."""
    return os.urandom(KEY_BYTES)


def content_key(secret: bytes, name: str) -> bytes:
    """The content key of file `name` sealed under `secret` (distinct names, distinct keys)."""
    if len(secret) != KEY_BYTES:
        raise SealingError("a sealing secret is 32 bytes")
    return hashlib.blake2b(
        name.encode("utf-8"), key=secret, digest_size=KEY_BYTES, person=_FILE_KEY_PERSON
    ).digest()


def key_commitment(key: bytes) -> str:
    return hashlib.blake2b(
        b"key commitment", key=key, digest_size=32, person=_COMMIT_PERSON
    ).hexdigest()


def worker_recipient(worker_key_hex: str) -> str:
    """The X25519 public key (hex) files are sealed to for the worker with this Ed25519 key."""
    try:
        public = VerifyKey(bytes.fromhex(check_public_key(worker_key_hex)))
        return bytes(public.to_curve25519_public_key()).hex()
    except (ValueError, CryptoError) as e:
        raise SealingError(f"not a usable worker key: {e}") from e


def worker_private_key(signing_key: SigningKey) -> bytes:
    """The X25519 private key that opens what was sealed to `worker_recipient` of this key."""
    return bytes(signing_key.to_curve25519_private_key())


def public_key_hex(private_key: bytes) -> str:
    return bytes(PrivateKey(private_key).public_key).hex()


@dataclass(frozen=True)
class Stanza:
    """The content key wrapped for one recipient: inside a file's header, or a later grant."""

    to: str  # X25519 public key, hex
    wrapped: str  # SealedBox(to).encrypt(content key), hex

    def to_json(self) -> dict[str, str]:
        return {"to": self.to, "wrapped": self.wrapped}

    @classmethod
    def from_json(cls, obj: object) -> Stanza:
        if not isinstance(obj, dict) or set(obj) != {"to", "wrapped"}:
            raise SealingError("a recipient stanza is an object with exactly 'to' and 'wrapped'")
        to, wrapped = obj["to"], obj["wrapped"]
        if not isinstance(wrapped, str) or not _WRAPPED.fullmatch(wrapped):
            raise SealingError("a wrapped key is 80 bytes as 160 lowercase hex digits")
        return cls(to=check_public_key(to), wrapped=wrapped)


def wrap_key(key: bytes, recipient_public_key: str) -> Stanza:
    if len(key) != KEY_BYTES:
        raise SealingError("a content key is 32 bytes")
    recipient = PublicKey(bytes.fromhex(check_public_key(recipient_public_key)))
    return Stanza(to=recipient_public_key, wrapped=SealedBox(recipient).encrypt(key).hex())


def unwrap_key(stanza: Stanza, private_key: bytes) -> bytes:
    try:
        key = SealedBox(PrivateKey(private_key)).decrypt(bytes.fromhex(stanza.wrapped))
    except (CryptoError, ValueError) as e:
        raise SealingError("cannot unwrap the content key: it was wrapped for another key") from e
    if len(key) != KEY_BYTES:
        raise SealingError("the wrapped content key is not 32 bytes")
    return key


# --- the clear header ------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvelopeHeader:
    chunk: int
    key_commitment: str
    stream: bytes
    recipients: tuple[Stanza, ...]

    def encode(self) -> bytes:
        body = canonical_json(
            {
                "chunk": self.chunk,
                "key": self.key_commitment,
                "recipients": [s.to_json() for s in self.recipients],
                "stream": self.stream.hex(),
            }
        )
        return SEALED_MAGIC + struct.pack(">I", len(body)) + body

    @classmethod
    def parse(cls, raw: bytes) -> EnvelopeHeader:
        try:
            obj = json.loads(raw)
        except ValueError as e:
            raise SealingError("the sealed file's header is not JSON") from e
        if not isinstance(obj, dict) or set(obj) != {"chunk", "key", "recipients", "stream"}:
            raise SealingError("the sealed file's header has the wrong fields")
        chunk, commitment, recipients, stream = (
            obj["chunk"],
            obj["key"],
            obj["recipients"],
            obj["stream"],
        )
        if type(chunk) is not int or not 1 <= chunk <= MAX_CHUNK:
            raise SealingError(f"the sealed file's chunk size must be 1..{MAX_CHUNK} bytes")
        if not isinstance(commitment, str) or not _HEX32.fullmatch(commitment):
            raise SealingError("the sealed file's key commitment is malformed")
        if not isinstance(recipients, list) or len(recipients) > MAX_RECIPIENTS:
            raise SealingError(f"a sealed file names at most {MAX_RECIPIENTS} recipients")
        if not isinstance(stream, str) or not re.fullmatch(r"[0-9a-f]{48}", stream):
            raise SealingError("the sealed file's stream header is malformed")
        return cls(
            chunk=chunk,
            key_commitment=commitment,
            stream=bytes.fromhex(stream),
            recipients=tuple(Stanza.from_json(r) for r in recipients),
        )

    def key_for(self, private_key: bytes, grants: Iterable[Stanza] = ()) -> bytes:
        """The content key, unwrapped from this header's stanza for `private_key` or from a
        grant, and checked against the commitment (a wrong grant is refused here)."""
        me = public_key_hex(private_key)
        for stanza in (*self.recipients, *grants):
            if stanza.to != me:
                continue
            key = unwrap_key(stanza, private_key)
            if key_commitment(key) != self.key_commitment:
                raise SealingError("the content key handed over is not the one this file uses")
            return key
        raise SealingError("the sealed file was not sealed to this key, nor granted to it")


def _read_exact(src: BinaryIO, n: int, what: str) -> bytes:
    data = src.read(n)
    if len(data) != n:
        raise SealingError(f"the sealed file is truncated ({what})")
    return data


def read_header(src: BinaryIO) -> EnvelopeHeader:
    """Read and parse the clear header; `src` is left at the first stream message."""
    if _read_exact(src, MAGIC_BYTES, "magic") != SEALED_MAGIC:
        raise SealingError("not a proofnet sealed file (v2)")
    (n,) = struct.unpack(">I", _read_exact(src, 4, "header length"))
    if n > MAX_HEADER_BYTES:
        raise SealingError(f"the sealed file's header is larger than {MAX_HEADER_BYTES} bytes")
    return EnvelopeHeader.parse(_read_exact(src, n, "header"))


# --- sealing -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SealedFile:
    name: str
    sha256: str  # of the envelope: what is uploaded, stored and attested
    size: int
    plaintext_sha256: str
    plaintext_size: int


@dataclass(frozen=True)
class OpenedFile:
    name: str
    sha256: str  # of the plaintext
    size: int


def _meta(name: str, sha256: str, size: int) -> bytes:
    return canonical_json({"name": name, "sha256": sha256, "size": size})


class _HashingWriter:
    def __init__(self, dest: BinaryIO) -> None:
        self.dest = dest
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.dest.write(data)
        self.digest.update(data)
        self.size += len(data)


def seal_stream(
    src: BinaryIO,
    dest: BinaryIO,
    *,
    name: str,
    sha256: str,
    size: int,
    key: bytes,
    recipients: Sequence[str],
    chunk: int = CHUNK,
) -> SealedFile:
    """Seal `size` bytes of `src` whose SHA-256 is `sha256` (checked as they are read) to
    every recipient (X25519 public keys, hex), under content key `key`."""
    if len(key) != KEY_BYTES:
        raise SealingError("a content key is 32 bytes")
    if not 1 <= chunk <= MAX_CHUNK:
        raise SealingError(f"chunk must be 1..{MAX_CHUNK} bytes")
    if len(recipients) > MAX_RECIPIENTS:
        raise SealingError(f"seal to at most {MAX_RECIPIENTS} recipients")
    state = sodium.crypto_secretstream_xchacha20poly1305_state()
    stream = sodium.crypto_secretstream_xchacha20poly1305_init_push(state, key)
    header = EnvelopeHeader(
        chunk=chunk,
        key_commitment=key_commitment(key),
        stream=stream,
        recipients=tuple(wrap_key(key, r) for r in recipients),
    )
    out = _HashingWriter(dest)
    out.write(header.encode())
    meta = sodium.crypto_secretstream_xchacha20poly1305_push(
        state, _meta(name, sha256, size), None, _TAG_MESSAGE
    )
    out.write(struct.pack(">I", len(meta)) + meta)
    digest, done = hashlib.sha256(), 0
    while True:
        block = src.read(min(chunk, size - done))
        digest.update(block)
        done += len(block)
        last = done >= size or not block
        tag = _TAG_FINAL if last else _TAG_MESSAGE
        out.write(sodium.crypto_secretstream_xchacha20poly1305_push(state, block, None, tag))
        if last:
            break
    if done != size or src.read(1) or digest.hexdigest() != sha256:
        raise SealingError(f"{name} changed after it was hashed")
    return SealedFile(
        name=name,
        sha256=out.digest.hexdigest(),
        size=out.size,
        plaintext_sha256=sha256,
        plaintext_size=size,
    )


def seal_bytes(
    data: bytes, *, name: str, recipients: Sequence[str], key: bytes | None = None
) -> bytes:
    """`seal_stream` of a small in-memory value (a fresh content key unless one is given)."""
    out = io.BytesIO()
    seal_stream(
        io.BytesIO(data),
        out,
        name=name,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        key=key or new_secret(),
        recipients=recipients,
    )
    return out.getvalue()


def hash_file(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with Path(path).open("rb") as f:
        while block := f.read(_READ):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def seal_file(
    src: Path,
    dest: Path,
    *,
    name: str,
    key: bytes,
    recipients: Sequence[str],
    sha256: str | None = None,
    chunk: int = CHUNK,
) -> SealedFile:
    """Seal file `src` into `dest` (written beside it, then renamed into place)."""
    src, dest = Path(src), Path(dest)
    if sha256 is None:
        sha256, size = hash_file(src)
    else:
        size = src.stat().st_size
    with _atomic_output(dest) as out, src.open("rb") as f:
        return seal_stream(
            f,
            out,
            name=name,
            sha256=sha256,
            size=size,
            key=key,
            recipients=recipients,
            chunk=chunk,
        )


@contextlib.contextmanager
def _atomic_output(dest: Path) -> Any:
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".sealing-")
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


# --- opening -----------------------------------------------------------------------------


def open_stream(
    src: BinaryIO,
    dest: BinaryIO,
    *,
    private_key: bytes | None = None,
    key: bytes | None = None,
    name: str | None = None,
    grants: Iterable[Stanza] = (),
) -> OpenedFile:
    """Decrypt a v2 sealed file into `dest`, checking every message, the plaintext's size and
    SHA-256 and (when given) its `name`. Either `private_key` (a recipient's, finding its
    stanza in the header or in `grants`) or the content `key` itself.

    Plaintext reaches `dest` before the last message is checked: write to a temporary file
    and keep it only when this returns (`open_file` does)."""
    header = read_header(src)
    if key is None:
        if private_key is None:
            raise SealingError("give a private key or the content key")
        key = header.key_for(private_key, grants)
    elif key_commitment(key) != header.key_commitment:
        raise SealingError("the content key given is not the one this file uses")
    state = sodium.crypto_secretstream_xchacha20poly1305_state()
    try:
        sodium.crypto_secretstream_xchacha20poly1305_init_pull(state, header.stream, key)
        (n,) = struct.unpack(">I", _read_exact(src, 4, "meta length"))
        if n > MAX_HEADER_BYTES:
            raise SealingError("the sealed file's inner header is too large")
        raw, tag = sodium.crypto_secretstream_xchacha20poly1305_pull(
            state, _read_exact(src, n, "meta"), None
        )
    except CryptoError as e:
        raise SealingError("the sealed file is damaged (inner header)") from e
    meta = _parse_meta(raw, tag)
    if name is not None and meta["name"] != name:
        raise SealingError(f"the sealed file is {meta['name']!r}, not {name!r}")
    size: int = meta["size"]
    digest, done = hashlib.sha256(), 0
    while True:
        want = min(header.chunk, size - done)
        block = _read_exact(src, want + _ABYTES, "a message is missing")
        try:
            plain, tag = sodium.crypto_secretstream_xchacha20poly1305_pull(state, block, None)
        except CryptoError as e:
            raise SealingError("the sealed file is damaged or was tampered with") from e
        digest.update(plain)
        dest.write(plain)
        done += len(plain)
        if done >= size:
            break
        if tag == _TAG_FINAL:
            raise SealingError("the sealed file ends early")
    if tag != _TAG_FINAL:
        raise SealingError("the sealed file's last message is not marked final")
    if src.read(1):
        raise SealingError("the sealed file has bytes after its last message")
    if digest.hexdigest() != meta["sha256"]:
        raise SealingError("the sealed file's content does not match its header")
    return OpenedFile(name=str(meta["name"]), sha256=meta["sha256"], size=size)


def _parse_meta(raw: bytes, tag: int) -> dict[str, Any]:
    try:
        meta = json.loads(raw)
    except ValueError:
        meta = None
    if (
        tag != _TAG_MESSAGE
        or not isinstance(meta, dict)
        or set(meta) != {"name", "sha256", "size"}
        or not isinstance(meta["name"], str)
        or not isinstance(meta["sha256"], str)
        or not _HEX32.fullmatch(meta["sha256"])
        or type(meta["size"]) is not int
        or meta["size"] < 0
    ):
        raise SealingError("the sealed file has no valid inner header")
    return meta


def open_file(
    src: Path,
    dest: Path,
    *,
    private_key: bytes | None = None,
    key: bytes | None = None,
    name: str | None = None,
    grants: Iterable[Stanza] = (),
) -> OpenedFile:
    """`open_stream` from file `src` to `dest`, which appears only once all of it checked."""
    with Path(src).open("rb") as f, _atomic_output(Path(dest)) as out:
        return open_stream(f, out, private_key=private_key, key=key, name=name, grants=grants)


# --- v1, read only ------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenedResult:
    name: str
    sha256: str  # of the plaintext
    data: bytes


def open_sealed(blob: bytes, *, private_key: bytes, name: str | None = None) -> OpenedResult:
    """Decrypt and check a v1 sealed blob (a whole result in one SealedBox, as workers wrote
    before v2); `name` (when given) must be the one sealed inside."""
    if not blob.startswith(SEALED_MAGIC_V1):
        raise SealingError("not a proofnet sealed result (v1)")
    try:
        inner = SealedBox(PrivateKey(private_key)).decrypt(blob[len(SEALED_MAGIC_V1) :])
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
