"""Resumable uploads: one session per file, its bytes staged on the API host's disk.

A worker declares a file (name, size, SHA-256) and gets a session; it then sends the bytes in
chunks, each naming its place (`Content-Range`). The session's offset counts the bytes of
chunks that arrived whole and were vouched for, so after a dropped connection, a worker
restart or an API restart the worker asks for the offset and sends the rest. Once the last byte is in, the file is hashed
(incrementally, as the chunks came in) and moved into the blob store only when it hashes to
what was declared: nothing ever lands under a hash it does not have.

Layout under the store's `staging_dir` (one directory per lease):

    <lease id>/<upload id>.json   what was declared (written once)
    <lease id>/<upload id>.part   the bytes received so far
    <lease id>/<upload id>.offset how many of them are vouched for (replaced atomically; a
                                  tail past it, left by a crash mid-chunk, is cut off by the
                                  next writer)
    <lease id>/<upload id>.lock   held (flock) while a request writes or completes it

The lock makes two requests on one session exclusive, across threads and API processes on
one host (a second one is refused at once, never queued behind a 10 GiB transfer). Ids are
random and checked against a strict pattern before any path is built from them.

A chunk is written before its request's signature can be checked (the signature covers the
chunk's SHA-256, known only once it is in): `ChunkWriter.rollback` cuts it off again when
the check fails, so bytes nobody vouched for never stay.

This module is storage: it knows nothing about leases beyond their ids; `api.services.results`
decides who may upload what.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_UPLOAD_ID = re.compile(r"[0-9a-f]{32}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_READ = 1 << 20


class UploadError(Exception):
    """Base of the upload session errors."""


class UploadNotFound(UploadError):
    """No such upload session for this lease (never made, finished, or swept away)."""


class UploadBusy(UploadError):
    """Another request is writing to (or completing) this session right now."""


class UploadOffsetMismatch(UploadError):
    """The chunk does not start where the received bytes end."""

    def __init__(self, offset: int, start: int) -> None:
        super().__init__(
            f"this chunk starts at byte {start}, but the upload holds {offset} bytes: "
            f"send from byte {offset}"
        )
        self.offset = offset


@dataclass(frozen=True)
class UploadSession:
    id: str
    lease_id: int
    name: str
    size: int
    # The SHA-256 the worker declared; None for a one-shot upload that declared none.
    sha256: str | None
    created_at: float


class UploadStaging:
    """Upload sessions under `root`; sessions older than `ttl_s` are swept away."""

    def __init__(
        self, root: Path, *, ttl_s: float = 24 * 3600, clock: Callable[[], float] = time.time
    ) -> None:
        self.root = Path(root)
        self.ttl_s = ttl_s
        self.clock = clock
        # The running SHA-256 of each session's staged bytes: (offset it covers, hasher).
        # Process memory only; a session continued in another process is hashed from disk.
        self._hashers: dict[str, tuple[int, Any]] = {}
        self._lock = threading.Lock()
        self._swept_at = 0.0

    # --- paths ----------------------------------------------------------------------------

    def _dir(self, lease_id: int) -> Path:
        if type(lease_id) is not int or lease_id < 0:
            raise ValueError("a lease id is a non-negative integer")
        return self.root / str(lease_id)

    def _paths(self, lease_id: int, upload_id: str) -> tuple[Path, Path, Path, Path]:
        """(declaration, bytes, committed offset, lock) of one session."""
        if not isinstance(upload_id, str) or not _UPLOAD_ID.fullmatch(upload_id):
            raise UploadNotFound("an upload id is 32 lowercase hex digits")
        base = self._dir(lease_id) / upload_id
        return (
            base.with_suffix(".json"),
            base.with_suffix(".part"),
            base.with_suffix(".offset"),
            base.with_suffix(".lock"),
        )

    # --- sessions -------------------------------------------------------------------------

    def open_count(self, lease_id: int) -> int:
        with contextlib.suppress(FileNotFoundError):
            return sum(1 for _ in self._dir(lease_id).glob("*.json"))
        return 0

    def find(self, lease_id: int, name: str, size: int, sha256: str | None) -> UploadSession | None:
        """The open session of this lease that declared the same name, size and hash (so a
        worker that lost the id resumes where it was); sweeps stale sessions first."""
        self.sweep()
        if sha256 is None:
            return None
        for session in self.sessions(lease_id):
            if (session.name, session.size, session.sha256) == (name, size, sha256):
                return session
        return None

    def new(self, lease_id: int, name: str, size: int, sha256: str | None) -> UploadSession:
        """A fresh session, never shared with an earlier one."""
        if type(size) is not int or size < 0:
            raise ValueError("an upload's size is a non-negative integer")
        if sha256 is not None and not _SHA256.fullmatch(sha256):
            raise ValueError("an upload's SHA-256 is 64 lowercase hex digits")
        session = UploadSession(
            id=secrets.token_hex(16),
            lease_id=lease_id,
            name=name,
            size=size,
            sha256=sha256,
            created_at=self.clock(),
        )
        meta, part, _, _ = self._paths(lease_id, session.id)
        meta.parent.mkdir(parents=True, exist_ok=True)
        part.touch(exist_ok=False)
        tmp = meta.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(session)))
        os.replace(tmp, meta)
        return session

    def get(self, lease_id: int, upload_id: str) -> UploadSession:
        meta = self._paths(lease_id, upload_id)[0]
        try:
            obj = json.loads(meta.read_text())
            return UploadSession(**obj)
        except FileNotFoundError as e:
            raise UploadNotFound(f"no upload {upload_id} under this lease") from e
        except (ValueError, TypeError) as e:
            raise UploadNotFound(f"upload {upload_id} is damaged; start a new one") from e

    def sessions(self, lease_id: int) -> list[UploadSession]:
        found = []
        with contextlib.suppress(FileNotFoundError):
            for meta in sorted(self._dir(lease_id).glob("*.json")):
                with contextlib.suppress(UploadNotFound):
                    found.append(self.get(lease_id, meta.stem))
        return found

    def exists(self, session: UploadSession) -> bool:
        return self._paths(session.lease_id, session.id)[0].exists()

    def offset(self, session: UploadSession) -> int:
        """Bytes vouched for: what a chunk in flight has not yet added (read lock-free)."""
        meta, _, committed, _ = self._paths(session.lease_id, session.id)
        try:
            return int(committed.read_text())
        except FileNotFoundError as e:
            if not meta.exists():
                raise UploadNotFound(f"upload {session.id} is gone") from e
            return 0
        except ValueError:
            return 0  # never written whole (replaced atomically): nothing is vouched for

    def _commit_offset(self, session: UploadSession, offset: int) -> None:
        committed = self._paths(session.lease_id, session.id)[2]
        tmp = committed.with_suffix(".offset.tmp")
        tmp.write_text(str(offset))
        os.replace(tmp, committed)

    def discard(self, session: UploadSession) -> None:
        meta, part, committed, lock = self._paths(session.lease_id, session.id)
        for path in (
            meta,
            part,
            committed,
            lock,
            meta.with_suffix(".json.tmp"),
            committed.with_suffix(".offset.tmp"),
        ):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        with self._lock:
            self._hashers.pop(session.id, None)
        with contextlib.suppress(OSError):
            self._dir(session.lease_id).rmdir()  # only when empty

    def sweep(self, *, every_s: float = 60.0) -> None:
        """Remove sessions older than the TTL (at most once per `every_s`)."""
        now = self.clock()
        if now - self._swept_at < every_s:
            return
        self._swept_at = now
        with contextlib.suppress(FileNotFoundError):
            for lease_dir in self.root.iterdir():
                if not lease_dir.name.isdigit():
                    continue
                for meta in lease_dir.glob("*.json"):
                    part = meta.with_suffix(".part")
                    try:
                        # The part file changes with every chunk: an upload in progress
                        # is never stale, however long ago it began.
                        touched = max(meta.stat().st_mtime, part.stat().st_mtime)
                    except FileNotFoundError:
                        touched = 0.0
                    if now - touched <= self.ttl_s:
                        continue
                    with contextlib.suppress(UploadError, ValueError):
                        session = self.get(int(lease_dir.name), meta.stem)
                        with self.writing(session):
                            self.discard(session)
                with contextlib.suppress(OSError):
                    lease_dir.rmdir()

    # --- writing --------------------------------------------------------------------------

    @contextlib.contextmanager
    def writing(self, session: UploadSession) -> Iterator[ChunkWriter]:
        """Exclusive access to the session's bytes; UploadBusy when another request has it."""
        meta, part, _, lock = self._paths(session.lease_id, session.id)
        if not meta.exists():
            raise UploadNotFound(f"upload {session.id} is gone")
        try:
            lock_fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except FileNotFoundError as e:
            raise UploadNotFound(f"upload {session.id} is gone") from e
        try:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as e:
                raise UploadBusy(
                    f"another request is writing upload {session.id}; wait for it to end"
                ) from e
            try:
                handle = part.open("r+b")
            except FileNotFoundError as e:
                # Discarded while we waited for the lock: leave no lock file behind either.
                with contextlib.suppress(FileNotFoundError):
                    lock.unlink()
                raise UploadNotFound(f"upload {session.id} is gone") from e
            with handle:
                yield ChunkWriter(self, session, handle, self.offset(session))
        finally:
            os.close(lock_fd)

    def _hasher(self, session: UploadSession, offset: int) -> Any | None:
        with self._lock:
            entry = self._hashers.get(session.id)
        if entry is None and offset == 0:
            return hashlib.sha256()
        if entry is None or entry[0] != offset:
            return None
        return entry[1]

    def _remember(self, session: UploadSession, offset: int, hasher: Any | None) -> None:
        with self._lock:
            if hasher is None:
                self._hashers.pop(session.id, None)
            else:
                self._hashers[session.id] = (offset, hasher)

    def part_path(self, session: UploadSession) -> Path:
        return self._paths(session.lease_id, session.id)[1]


class ChunkWriter:
    """Appends one request's chunk to a session; `rollback` cuts the chunk off again."""

    def __init__(
        self, staging: UploadStaging, session: UploadSession, handle: Any, committed: int
    ) -> None:
        self.staging = staging
        self.session = session
        self.handle = handle
        # Whatever lies past the committed offset was never vouched for: drop it.
        handle.truncate(committed)
        handle.seek(committed)
        self.start = committed
        self.offset = committed
        self.chunk_digest = hashlib.sha256()
        base = staging._hasher(session, self.start)
        self._hasher = None if base is None else base.copy()

    def write(self, data: bytes) -> None:
        if self.offset + len(data) > self.session.size:
            raise ValueError("write past the declared size")
        self.handle.write(data)
        self.chunk_digest.update(data)
        if self._hasher is not None:
            self._hasher.update(data)
        self.offset += len(data)

    def rollback(self) -> None:
        """Forget this request's bytes: the file ends where it did before the request."""
        self.handle.flush()
        self.handle.truncate(self.start)
        self.offset = self.start

    def keep(self) -> None:
        """The chunk is vouched for: make it durable, then count it."""
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.staging._commit_offset(self.session, self.offset)
        self.staging._remember(self.session, self.offset, self._hasher)
        self.start = self.offset

    def complete(self) -> bool:
        return self.offset == self.session.size

    def sha256(self) -> str:
        """The SHA-256 of all staged bytes: the running hash when this process saw every
        chunk, else read back from disk (a session resumed in another process)."""
        if self._hasher is not None:
            return str(self._hasher.hexdigest())
        digest = hashlib.sha256()
        self.handle.flush()
        left = self.offset
        with self.staging.part_path(self.session).open("rb") as f:
            while left > 0 and (block := f.read(min(_READ, left))):
                digest.update(block)
                left -= len(block)
        return digest.hexdigest()

    def head(self, n: int) -> bytes:
        with self.staging.part_path(self.session).open("rb") as f:
            return f.read(n)
