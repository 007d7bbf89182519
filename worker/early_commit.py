"""The first segment committed early: uploaded while the job still trains.

As soon as the harness's committed prefix (`pot/prefix.json`) covers segment 1, the worker
uploads a snapshot of it with the files of checkpoints 0 and 1 (`worker.results.
first_segment_commit`), once, in the background, while the run goes on. Oracles replay that
segment right away through a drawn verifier (docs/protocol.md, "Early replay of the first
segment"), so job code that cannot be replayed is found before the job has used its whole
lease, and is the job's fault. The same upload is what a next provider resumes from if this
run is lost without a word (`api.services.resume`).

Whole, unsealed jobs that declare their proof files only: a sealed job's proof files are
sealed at the end (an early upload would hand the API host the model), a unit's proof is
named under its unit and replayed with its attestation.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from worker.results import CollectedResult, first_segment_commit

log = logging.getLogger(__name__)

Upload = Callable[[list[CollectedResult]], None]
Note = Callable[[str], None]


class EarlyCommit:
    """Polled by the run's supervisor: uploads the first segment's commitment once."""

    def __init__(self, job_dir: Path, snapshot_dir: Path, upload: Upload, note: Note) -> None:
        self.job_dir = job_dir
        self.snapshot_dir = snapshot_dir
        self.upload = upload
        self.note = note
        self._thread: threading.Thread | None = None
        self.sent: list[str] = []  # names uploaded, once done
        self.error: str | None = None

    def poll(self) -> None:
        """Start the upload when the first segment is committed (cheap when it is not)."""
        if self._thread is not None:
            return
        files = first_segment_commit(self.job_dir, self.snapshot_dir)
        if not files:
            return
        self._thread = threading.Thread(
            target=self._send, args=(files,), name="early-commit", daemon=True
        )
        self._thread.start()

    def _send(self, files: list[CollectedResult]) -> None:
        try:
            self.upload(files)
        except Exception as exc:  # the run goes on; the final upload carries the files
            self.error = f"{type(exc).__name__}: {exc}"
            self.note(f"could not commit the first segment early: {self.error}")
            return
        self.sent = [f.name for f in files]
        self.note(
            "committed the first segment early, for its replay while the job trains: "
            + ", ".join(self.sent)
        )

    def join(self) -> None:
        """Wait for an upload in flight (before the run's own uploads of the same names
        start; it is bounded by the upload's own retries), then drop the snapshot."""
        if self._thread is not None:
            self._thread.join()
        shutil.rmtree(self.snapshot_dir, ignore_errors=True)
