"""The sealed-file envelope (proofnet/messages/envelope.py) against someone who holds the
ciphertext: cut it short, append to it, swap its messages, change its header, hand over a
key that opens it to other plaintext, or change the file between hashing and sealing."""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
from pathlib import Path

import pytest
from nacl.public import PrivateKey
from nacl.signing import SigningKey

from proofnet.messages import envelope as e
from proofnet.messages.key_grant import KeyGrantError, KeyRequest, check_grant

ME = PrivateKey.generate()
ME_PUB = bytes(ME.public_key).hex()


def _seal(data: bytes, *, name: str = "pot/000001.weights", chunk: int = 1024) -> bytes:
    out = io.BytesIO()
    e.seal_stream(
        io.BytesIO(data),
        out,
        name=name,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        key=e.content_key(b"s" * 32, name),
        recipients=[ME_PUB],
        chunk=chunk,
    )
    return out.getvalue()


def _open(blob: bytes, **kw: object) -> bytes:
    out = io.BytesIO()
    e.open_stream(io.BytesIO(blob), out, private_key=bytes(ME), **kw)  # type: ignore[arg-type]
    return out.getvalue()


@pytest.mark.parametrize("size", [0, 1, 1023, 1024, 1025, 5000])
def test_every_size_round_trips_in_chunks(size: int) -> None:
    data = os.urandom(size)
    assert _open(_seal(data)) == data


def test_damaged_envelopes_never_open() -> None:
    data = os.urandom(4000)
    blob = _seal(data)
    header_len = e.MAGIC_BYTES + 4 + struct.unpack(">I", blob[e.MAGIC_BYTES : e.MAGIC_BYTES + 4])[0]
    attacks = {
        "cut at a message boundary": blob[: -(1024 + 17)],
        "cut mid-message": blob[:-10],
        "one byte appended": blob + b"\0",
        "a flipped bit in the body": blob[:-50] + bytes([blob[-50] ^ 1]) + blob[-49:],
        "empty body": blob[:header_len],
    }
    for what, bad in attacks.items():
        with pytest.raises(e.SealingError):
            _open(bad)
        assert what
    # Two data messages swapped (same length): the stream's own order catches it.
    meta_len = struct.unpack(">I", blob[header_len : header_len + 4])[0]
    body = header_len + 4 + meta_len
    m = 1024 + 17
    first, second = blob[body : body + m], blob[body + m : body + 2 * m]
    swapped = blob[:body] + second + first + blob[body + 2 * m :]
    with pytest.raises(e.SealingError, match="damaged"):
        _open(swapped)


def test_a_header_that_asks_for_huge_chunks_is_refused_before_reading() -> None:
    blob = _seal(b"x" * 10)
    header_len = struct.unpack(">I", blob[e.MAGIC_BYTES : e.MAGIC_BYTES + 4])[0]
    header = json.loads(blob[e.MAGIC_BYTES + 4 : e.MAGIC_BYTES + 4 + header_len])
    header["chunk"] = 1 << 40
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    bad = (
        e.SEALED_MAGIC + struct.pack(">I", len(raw)) + raw + blob[e.MAGIC_BYTES + 4 + header_len :]
    )
    with pytest.raises(e.SealingError, match="chunk size"):
        _open(bad)
    too_long = e.SEALED_MAGIC + struct.pack(">I", e.MAX_HEADER_BYTES + 1)
    with pytest.raises(e.SealingError, match="larger than"):
        _open(too_long)


def test_the_name_inside_binds_the_file() -> None:
    blob = _seal(b"weights", name="pot/000001.weights")
    assert _open(blob, name="pot/000001.weights") == b"weights"
    with pytest.raises(e.SealingError, match="not 'pot/000002.weights'"):
        _open(blob, name="pot/000002.weights")


def test_a_key_other_than_the_committed_one_is_refused() -> None:
    """A provider that hands a verifier another key (which a crafted file could decrypt to
    other plaintext) is caught by the key commitment before any message is read."""
    data = b"w" * 3000
    blob = _seal(data)
    verifier = SigningKey.generate()
    to = e.worker_recipient(bytes(verifier.verify_key).hex())
    wrong = e.wrap_key(os.urandom(32), to)
    with pytest.raises(e.SealingError, match="not the one this file uses"):
        e.open_stream(
            io.BytesIO(blob),
            io.BytesIO(),
            private_key=e.worker_private_key(verifier),
            grants=[wrong],
        )
    right = e.wrap_key(e.content_key(b"s" * 32, "pot/000001.weights"), to)
    out = io.BytesIO()
    e.open_stream(io.BytesIO(blob), out, private_key=e.worker_private_key(verifier), grants=[right])
    assert out.getvalue() == data
    with pytest.raises(e.SealingError, match="not the one this file uses"):
        e.open_stream(io.BytesIO(blob), io.BytesIO(), key=os.urandom(32))


def test_a_file_that_changes_after_it_was_hashed_is_not_sealed(tmp_path: Path) -> None:
    src = tmp_path / "w.bin"
    src.write_bytes(b"a" * 5000)
    stale = hashlib.sha256(b"b" * 5000).hexdigest()
    with pytest.raises(e.SealingError, match="changed after it was hashed"):
        e.seal_file(
            src, tmp_path / "w.sealed", name="w", key=os.urandom(32), recipients=[], sha256=stale
        )
    assert not (tmp_path / "w.sealed").exists()
    done = e.seal_file(
        src, tmp_path / "w.sealed", name="w", key=os.urandom(32), recipients=[ME_PUB]
    )
    assert done.sha256 == hashlib.sha256((tmp_path / "w.sealed").read_bytes()).hexdigest()
    assert done.plaintext_sha256 == hashlib.sha256(b"a" * 5000).hexdigest()


def test_distinct_files_get_distinct_keys() -> None:
    secret = os.urandom(32)
    keys = {e.content_key(secret, f"pot/{i:06d}.weights") for i in range(100)}
    assert len(keys) == 100
    assert e.content_key(secret, "a") != e.content_key(os.urandom(32), "a")


def test_key_requests_are_signed_and_grants_are_shaped_for_the_verifier() -> None:
    oracle, verifier = SigningKey.generate(), SigningKey.generate()
    request = KeyRequest.sign(
        oracle,
        job_id="ab" * 32,
        nonce="cd" * 16,
        recipient=bytes(verifier.verify_key).hex(),
        files=["pot/000001.weights"],
    )
    request.verify({bytes(oracle.verify_key).hex()})
    with pytest.raises(KeyGrantError, match="not a trusted oracle"):
        request.verify({"ee" * 32})
    # Another verifier, same signature: refused.
    moved = request.model_copy(update={"recipient": "ff" * 32})
    with pytest.raises(KeyGrantError, match="does not verify"):
        moved.verify({bytes(oracle.verify_key).hex()})
    for names in ([], ["../etc/passwd"], ["a", "a"]):
        with pytest.raises(KeyGrantError):
            KeyRequest.from_json({**request.to_json(), "files": names})
    key = os.urandom(32)
    good = e.wrap_key(key, request.recipient_x25519).to_json()
    assert set(check_grant(request, {"pot/000001.weights": good})) == {"pot/000001.weights"}
    with pytest.raises(KeyGrantError, match="another key"):
        check_grant(request, {"pot/000001.weights": e.wrap_key(key, ME_PUB).to_json()})
    with pytest.raises(KeyGrantError, match="exactly the files"):
        check_grant(request, {"pot/000001.weights": good, "pot/x": good})
