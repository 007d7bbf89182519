"""Results held for the submitter's own destinations until the oracles' verdict releases them.

A submitter may have a job's results only with the verdict that releases them (issue 12.4:
verified, or the fault is the job's; `api.services.result_release`). The API's store serves
them only then; the submitter's own destinations (webhook, pre-signed S3) are delivered by
this worker, so it holds a copy of what it uploaded (sealed when the job is) here, asks the
API whether the job is released (`Agent.deliver_released`), and only then delivers and
reports. A verdict that withholds the results (the provider's fault, unproven) drops the
copy undelivered; so does a job this worker did not complete after all.

The rule is the API's, not this worker's: a dishonest provider could deliver early, which
only gives its submitter results the verdict may refuse (and does not make it paid).

Layout: `<root>/<job id>/held.json` (written atomically) and `<root>/<job id>/<n>` per result.
I/O: the files under `root` only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from proofnet.messages.destinations import Destination
from worker.results import CollectedResult

_DESTINATIONS: TypeAdapter[tuple[Destination, ...]] = TypeAdapter(tuple[Destination, ...])
ENTRY = "held.json"
# A released job whose destinations keep failing is tried this many times, then dropped
# (its last report, with the reason, stays on the API for the submitter).
MAX_TRIES = 5


@dataclass(frozen=True)
class HeldJob:
    job_id: str
    sealed: bool
    destinations: tuple[Destination, ...]  # the spec's whole list: report indices follow it
    results: tuple[CollectedResult, ...]  # paths inside the held copy
    held_at: float
    tries: int = 0


class HeldResults:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _dir(self, job_id: str) -> Path:
        if not job_id or "/" in job_id or job_id.startswith("."):
            raise ValueError(f"not a job id: {job_id!r}")
        return self.root / job_id

    def hold(
        self,
        job_id: str,
        destinations: Sequence[Destination],
        results: Sequence[CollectedResult],
        *,
        sealed: bool,
    ) -> HeldJob:
        """Copy `results` aside (a hard link when the file system allows) for delivery once
        released; the job's workspace may go."""
        where = self._dir(job_id)
        where.mkdir(parents=True, exist_ok=True)
        kept = []
        for n, r in enumerate(results):
            dest = where / str(n)
            dest.unlink(missing_ok=True)
            try:
                os.link(r.path, dest)
            except OSError:
                shutil.copyfile(r.path, dest)
            kept.append(CollectedResult(r.name, dest, r.sha256, r.size, r.kind, r.glob))
        held = HeldJob(job_id, sealed, tuple(destinations), tuple(kept), time.time())
        self._write(held)
        return held

    def _write(self, held: HeldJob) -> None:
        where = self._dir(held.job_id)
        entry = {
            "job_id": held.job_id,
            "sealed": held.sealed,
            "destinations": _DESTINATIONS.dump_python(held.destinations, mode="json"),
            "results": [
                {
                    "name": r.name,
                    "file": r.path.name,
                    "sha256": r.sha256,
                    "size": r.size,
                    "kind": r.kind,
                    "glob": r.glob,
                }
                for r in held.results
            ],
            "held_at": held.held_at,
            "tries": held.tries,
        }
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".held-")
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, where / ENTRY)

    def tried(self, held: HeldJob) -> HeldJob:
        """Count one more delivery attempt."""
        again = HeldJob(
            held.job_id, held.sealed, held.destinations, held.results, held.held_at, held.tries + 1
        )
        self._write(again)
        return again

    def pending(self) -> list[HeldJob]:
        """Every held job, oldest first (an unreadable entry is dropped)."""
        found = []
        if not self.root.is_dir():
            return []
        for where in sorted(self.root.iterdir()):
            try:
                found.append(_parse(json.loads((where / ENTRY).read_text()), where))
            except (OSError, ValueError, KeyError, TypeError, ValidationError):
                shutil.rmtree(where, ignore_errors=True)
        return sorted(found, key=lambda h: h.held_at)

    def drop(self, job_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self._dir(job_id))


def _parse(raw: dict[str, Any], where: Path) -> HeldJob:
    results = tuple(
        CollectedResult(
            str(r["name"]),
            where / str(r["file"]),
            str(r["sha256"]),
            int(r["size"]),
            str(r["kind"]),
            str(r["glob"]),
        )
        for r in raw["results"]
    )
    return HeldJob(
        str(raw["job_id"]),
        bool(raw["sealed"]),
        _DESTINATIONS.validate_python(raw["destinations"]),
        results,
        float(raw["held_at"]),
        int(raw.get("tries", 0)),
    )
