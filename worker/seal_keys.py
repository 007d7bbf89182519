"""The provider's sealing secrets: one per lease of a sealed job, kept to grant keys later.

A sealed job's results and proof files are sealed to the submitter under content keys
derived from one random secret per lease (`proofnet.messages.envelope.content_key`). The
worker keeps that secret (32 bytes, a 0600 file under its work dir), not the files: when the
oracles draw a verifier to replay some segments, the worker derives those files' keys again
and wraps them for the verifier (`worker.key_grants`). Secrets older than the retention are
deleted; a job settles well within it.

Files are named `<job id>-<lease nonce>.key`: both are hex, checked before a path is built.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from proofnet.messages.envelope import KEY_BYTES, new_secret

_HEX = re.compile(r"[0-9a-f]{16,128}")
DEFAULT_RETENTION_S = 30 * 24 * 3600


class SealKeyError(Exception):
    """A sealing secret cannot be kept or read (disk trouble, a damaged file)."""


class SealKeys:
    def __init__(
        self,
        root: Path,
        *,
        retention_s: float = DEFAULT_RETENTION_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = Path(root)
        self.retention_s = retention_s
        self.clock = clock

    def _path(self, job_id: str, nonce: str) -> Path:
        for value in (job_id, nonce):
            if not isinstance(value, str) or not _HEX.fullmatch(value):
                raise SealKeyError("job ids and lease nonces are lowercase hex")
        return self.root / f"{job_id}-{nonce}.key"

    def secret_for(self, job_id: str, nonce: str) -> bytes:
        """The lease's secret, made (and kept, 0600) on first use: a job sealed again after a
        worker restart gets the same keys."""
        existing = self.get(job_id, nonce)
        if existing is not None:
            return existing
        path = self._path(job_id, nonce)
        secret = new_secret()
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secret)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as e:
            raise SealKeyError(f"cannot keep the sealing secret under {self.root}: {e}") from e
        self.prune()
        return secret

    def get(self, job_id: str, nonce: str) -> bytes | None:
        path = self._path(job_id, nonce)
        try:
            secret = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise SealKeyError(f"cannot read the sealing secret {path.name}: {e}") from e
        if len(secret) != KEY_BYTES:
            raise SealKeyError(f"the sealing secret {path.name} is damaged")
        return secret

    def prune(self) -> int:
        """Delete secrets older than the retention; how many went."""
        cutoff = self.clock() - self.retention_s
        removed = 0
        with contextlib.suppress(FileNotFoundError):
            for path in self.root.glob("*.key"):
                with contextlib.suppress(FileNotFoundError):
                    if path.stat().st_mtime < cutoff:
                        path.unlink()
                        removed += 1
        return removed
