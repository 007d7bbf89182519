"""Content-addressed blob storage for job outputs: blobs are named by their SHA-256.

`BlobStore` is the interface; `LocalBlobStore` keeps blobs in a directory (the default,
under the data dir). An S3-compatible store implements the same methods with the object key
`blobs/<sha256>`. Writes are verified: the store hashes what it receives and refuses it when
the caller said to expect another digest, so a blob's name always is its content's hash.

Every store has a `staging_dir` on the API host's disk, where resumable uploads
(`api.uploads`) collect their bytes until they are complete; `put_file` then moves one in
(a rename on the local store, a multipart upload to S3). Nothing is ever held whole in
memory: writes and reads go in chunks of at most a few MiB.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

_SHA256 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


class StorageError(Exception):
    """The store cannot keep or return a blob (disk full, permissions, missing blob)."""


class DigestMismatch(StorageError, ValueError):
    """The bytes received do not hash to the digest the caller declared."""


class BlobMissing(StorageError, KeyError):
    """No blob with that digest is stored."""


@dataclass(frozen=True)
class BlobRef:
    sha256: str
    size: int


def _check_digest(sha256: str) -> str:
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise ValueError(f"blob digest must be 64 lowercase hex digits, got {str(sha256)[:80]!r}")
    return sha256


class BlobStore(ABC):
    # Where partial uploads wait on local disk (api.uploads); set by each store.
    staging_dir: Path

    @abstractmethod
    def put(self, chunks: Iterable[bytes], *, expected_sha256: str | None = None) -> BlobRef:
        """Store the concatenated chunks; raise DigestMismatch when they hash otherwise."""

    @abstractmethod
    def open_chunks(self, sha256: str, *, start: int = 0) -> Iterator[bytes]:
        """The blob's bytes from offset `start` on, in chunks; raise BlobMissing when it is
        not stored."""

    @abstractmethod
    def exists(self, sha256: str) -> bool: ...

    @abstractmethod
    def size(self, sha256: str) -> int: ...

    def put_file(self, path: Path, *, sha256: str) -> BlobRef:
        """Store the local file `path` (consumed: moved or deleted) whose SHA-256 the caller
        computed while writing it. Streams it through `put`, which hashes it again; the
        local store, on the same disk, renames it instead."""
        path = Path(path)
        _check_digest(sha256)
        try:
            with path.open("rb") as f:
                ref = self.put(iter(lambda: f.read(_CHUNK), b""), expected_sha256=sha256)
        except OSError as e:
            raise StorageError(f"cannot read the staged upload {path.name}: {e}") from e
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return ref

    def put_bytes(self, data: bytes, *, expected_sha256: str | None = None) -> BlobRef:
        return self.put([data], expected_sha256=expected_sha256)

    def read_bytes(self, sha256: str) -> bytes:
        return b"".join(self.open_chunks(sha256))


class LocalBlobStore(BlobStore):
    """Blobs as files `<root>/<aa>/<bb>/<sha256>`, written via a temp file and a rename so a
    reader never sees a partial blob and two writers of the same content cannot clash."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.staging_dir = self.root / "staging"

    def _path(self, sha256: str) -> Path:
        _check_digest(sha256)
        return self.root / sha256[:2] / sha256[2:4] / sha256

    def put(self, chunks: Iterable[bytes], *, expected_sha256: str | None = None) -> BlobRef:
        if expected_sha256 is not None:
            _check_digest(expected_sha256)
        tmp_dir = self.root / "tmp"
        try:
            tmp_dir.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(dir=tmp_dir, prefix="upload-")
        except OSError as e:
            raise StorageError(f"cannot write to the blob store at {self.root}: {e}") from e
        tmp = Path(tmp_name)
        try:
            digest = hashlib.sha256()
            size = 0
            with os.fdopen(fd, "wb") as out:
                for chunk in chunks:
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            sha256 = digest.hexdigest()
            if expected_sha256 is not None and sha256 != expected_sha256:
                raise DigestMismatch(
                    f"content hashes to {sha256}, not the declared {expected_sha256}"
                )
            final = self._path(sha256)
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, final)
        except OSError as e:
            raise StorageError(f"cannot write to the blob store at {self.root}: {e}") from e
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        return BlobRef(sha256=sha256, size=size)

    def put_file(self, path: Path, *, sha256: str) -> BlobRef:
        # The caller hashed the bytes as it wrote them (api.uploads); reading 10 GiB again
        # to hash them twice would only double the wait. Same disk: a rename.
        path = Path(path)
        final = self._path(sha256)
        try:
            size = path.stat().st_size
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(path, final)
            except OSError as e:
                if e.errno != errno.EXDEV:
                    raise
                return super().put_file(path, sha256=sha256)
        except FileNotFoundError as e:
            raise StorageError(f"the staged upload {path.name} is gone") from e
        except OSError as e:
            raise StorageError(f"cannot write to the blob store at {self.root}: {e}") from e
        return BlobRef(sha256=sha256, size=size)

    def open_chunks(self, sha256: str, *, start: int = 0) -> Iterator[bytes]:
        path = self._path(sha256)
        try:
            handle = path.open("rb")
        except FileNotFoundError as e:
            raise BlobMissing(f"no blob {sha256}") from e

        def read() -> Iterator[bytes]:
            with handle:
                handle.seek(start)
                while chunk := handle.read(_CHUNK):
                    yield chunk

        return read()

    def exists(self, sha256: str) -> bool:
        return self._path(sha256).is_file()

    def size(self, sha256: str) -> int:
        try:
            return self._path(sha256).stat().st_size
        except FileNotFoundError as e:
            raise BlobMissing(f"no blob {sha256}") from e
