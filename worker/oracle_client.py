"""Delivering signed attestations to the oracle, through an on-disk outbox.

An attestation is written to the outbox (fsynced, atomically renamed) before the worker
tries to send it, and removed only once the oracle has accepted it and the lease has been
completed; so a worker that crashes at any point after the job finds it on restart and
finishes the delivery.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx
from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from proofnet.messages.escrow_info import EscrowInfo, EscrowInfoError, escrow_path
from proofnet.messages.oracle_api import ATTESTATIONS_PATH, COSE_CONTENT_TYPE
from proofnet.redaction import redact_credentials

log = logging.getLogger(__name__)
_ENTRY = re.compile(r"[0-9a-f]{64}(-u[0-9]{1,5})?-a[0-9]{1,9}\.json")


class OracleError(Exception):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class OracleUnavailable(OracleError):
    """Unreachable, overloaded or failing: send again later."""


class OracleRefused(OracleError):
    """The oracle rejected the attestation for good (4xx other than 429)."""


class OracleClient:
    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._http.close()

    def submit(self, cose: bytes) -> dict[str, Any]:
        """POST one COSE_Sign1 attestation; returns the oracle's JSON answer (or {})."""
        url = self.base_url + ATTESTATIONS_PATH
        try:
            response = self._http.post(
                url, content=cose, headers={"Content-Type": COSE_CONTENT_TYPE}
            )
        except httpx.TransportError as e:
            raise OracleUnavailable(
                redact_credentials(f"cannot reach the oracle at {self.base_url}: {e}")
            ) from e
        status = response.status_code
        if status == 429 or status >= 500:
            raise OracleUnavailable(f"oracle answered HTTP {status}: {response.text[:300]}", status)
        if status >= 400:
            raise OracleRefused(
                f"oracle refused the attestation: HTTP {status}: {response.text[:1000]}", status
            )
        try:
            answer = response.json()
        except ValueError:
            return {}
        return answer if isinstance(answer, dict) else {"answer": answer}

    def escrow_info(self, tx_id: str, index: int) -> EscrowInfo:
        """The escrow datum at `tx_id#index` as the oracle reads it on chain; OracleRefused
        (status 404) when the oracle finds no escrow there."""
        try:
            response = self._http.get(self.base_url + escrow_path(tx_id, index))
        except httpx.TransportError as e:
            raise OracleUnavailable(
                redact_credentials(f"cannot reach the oracle at {self.base_url}: {e}")
            ) from e
        status = response.status_code
        if status == 429 or status >= 500:
            raise OracleUnavailable(f"oracle answered HTTP {status}: {response.text[:300]}", status)
        if status >= 400:
            raise OracleRefused(f"escrow {tx_id}#{index}: {response.text[:1000]}", status)
        try:
            return EscrowInfo.from_json(response.json())
        except (ValueError, EscrowInfoError) as e:
            raise OracleUnavailable(f"the oracle's escrow answer is unusable: {e}") from e


@dataclass(frozen=True)
class OutboxEntry:
    job_id: str
    attempt: int
    lease_token: str
    cose_hex: str
    # What the lease is completed with (before the attestation is sent to the oracle).
    completion: dict[str, Any]
    created_at: float
    delivered: bool = False
    oracle_answer: dict[str, Any] | None = None
    lease_done: bool = False
    send_attempts: int = 0
    last_error: str = ""
    # The unit of a topology job (None: a single-unit job); one worker may run several
    # units of one job, each with its own lease and attestation.
    unit: int | None = None

    @property
    def filename(self) -> str:
        unit = "" if self.unit is None else f"-u{self.unit}"
        return f"{self.job_id}{unit}-a{self.attempt}.json"

    @property
    def cose(self) -> bytes:
        return bytes.fromhex(self.cose_hex)


class Outbox:
    """Entries as JSON files in `root`; refused attestations move to `root/refused/`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _write(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        # The rename is durable only once the directory entry is.
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def put(self, entry: OutboxEntry) -> OutboxEntry:
        self._write(self.root / entry.filename, json.dumps(asdict(entry), sort_keys=True).encode())
        return entry

    def update(self, entry: OutboxEntry, **changes: Any) -> OutboxEntry:
        return self.put(replace(entry, **changes))

    def remove(self, entry: OutboxEntry) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.root / entry.filename).unlink()

    def refuse(self, entry: OutboxEntry, reason: str) -> None:
        """Keep a refused attestation for the provider to inspect, out of the send queue."""
        kept = replace(entry, last_error=reason)
        self._write(
            self.root / "refused" / entry.filename,
            json.dumps(asdict(kept), sort_keys=True).encode(),
        )
        self.remove(entry)

    def pending(self) -> list[OutboxEntry]:
        if not self.root.is_dir():
            return []
        entries = []
        for path in sorted(self.root.iterdir()):
            if not _ENTRY.fullmatch(path.name):
                continue
            try:
                entries.append(OutboxEntry(**json.loads(path.read_bytes())))
            except (OSError, ValueError, TypeError) as e:
                log.error("outbox entry %s is unreadable (%s); leaving it for inspection", path, e)
        return sorted(entries, key=lambda e: e.created_at)

    def refused(self) -> list[OutboxEntry]:
        folder = self.root / "refused"
        if not folder.is_dir():
            return []
        return [OutboxEntry(**json.loads(p.read_bytes())) for p in sorted(folder.glob("*.json"))]


def send_with_retries(
    oracle: OracleClient,
    outbox: Outbox,
    entry: OutboxEntry,
    *,
    attempts: int = 5,
    base_delay_s: float = 0.5,
    max_delay_s: float = 30.0,
    sleep: Callable[[float], Any] = time.sleep,
) -> OutboxEntry | None:
    """Send until accepted, refused or out of attempts (exponential backoff with full
    jitter between them). Returns the updated entry (still in the outbox), or None when the
    oracle refused it for good (moved to refused/)."""
    retrying = Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=base_delay_s, max=max_delay_s),
        retry=retry_if_exception_type(OracleUnavailable),
        sleep=sleep,
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                try:
                    answer = oracle.submit(entry.cose)
                except OracleUnavailable as e:
                    entry = outbox.update(
                        entry, send_attempts=entry.send_attempts + 1, last_error=str(e)
                    )
                    raise
                return outbox.update(
                    entry,
                    delivered=True,
                    oracle_answer=answer,
                    send_attempts=entry.send_attempts + 1,
                )
    except OracleRefused as e:
        log.error("oracle refused the attestation for job %s: %s", entry.job_id, e)
        outbox.refuse(entry, str(e))
        return None
    except OracleUnavailable:
        pass
    log.warning(
        "attestation for job %s not delivered yet (%s); it stays in the outbox",
        entry.job_id,
        entry.last_error,
    )
    return entry
