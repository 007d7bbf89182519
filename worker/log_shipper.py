"""Streaming a job's log lines to the API in batches, from a background thread.

Lines are buffered and sent every `flush_s` or once a batch is full. The buffer is bounded:
while the API is unreachable the oldest lines are dropped (the local log file keeps them)
and a note says how many, so a chatty job cannot exhaust the worker's memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from worker.api_client import ApiClient, ApiClientError, LeaseLost
from worker.runtime.base import LogLine

log = logging.getLogger(__name__)

MAX_LINE_CHARS = 4096  # what the API keeps of a line
MAX_BATCH_BYTES = 256 * 1024  # well under the API's request body limit


class LogShipper:
    def __init__(
        self,
        api: ApiClient,
        token: str,
        *,
        batch_lines: int = 200,
        flush_s: float = 1.0,
        max_buffer: int = 10_000,
    ) -> None:
        self.api = api
        self.token = token
        self.batch_lines = batch_lines
        self.flush_s = flush_s
        self._buffer: deque[dict[str, Any]] = deque()
        self._max_buffer = max_buffer
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.dropped = 0
        self.sent = 0
        self.stopped_reason = ""

    def _push(self, entry: dict[str, Any]) -> None:
        with self._lock:
            if len(self._buffer) >= self._max_buffer:
                self._buffer.popleft()
                self.dropped += 1
            self._buffer.append(entry)
            full = len(self._buffer) >= self.batch_lines
        if full:
            self._wake.set()

    def add(self, line: LogLine) -> None:
        """The runtime's log callback."""
        self._push({"at": line.at, "stream": line.stream, "text": line.text[:MAX_LINE_CHARS]})

    def note(self, text: str) -> None:
        """A line from the worker itself (preparing, uploading, why it stopped)."""
        log.info("%s", text)
        self._push({"at": time.time(), "stream": "worker", "text": text[:MAX_LINE_CHARS]})

    def _take_batch(self) -> list[dict[str, Any]]:
        with self._lock:
            batch: list[dict[str, Any]] = []
            size = 0
            while self._buffer and len(batch) < self.batch_lines:
                entry = self._buffer[0]
                cost = len(entry["text"].encode()) + 64
                if batch and size + cost > MAX_BATCH_BYTES:
                    break
                batch.append(self._buffer.popleft())
                size += cost
            if self.dropped:
                text = f"{self.dropped} log line(s) were dropped while the API was unreachable"
                batch.insert(0, {"at": time.time(), "stream": "worker", "text": text})
                self.dropped = 0
            return batch

    def _requeue(self, batch: list[dict[str, Any]]) -> None:
        with self._lock:
            for entry in reversed(batch):
                if len(self._buffer) >= self._max_buffer:
                    self.dropped += 1
                    continue
                self._buffer.appendleft(entry)

    def flush(self) -> bool:
        """Send everything buffered now; False when the API could not take it."""
        with self._send_lock:
            while not self.stopped_reason:
                batch = self._take_batch()
                if not batch:
                    return True
                try:
                    self.api.append_logs(self.token, batch)
                except LeaseLost as e:
                    # Nobody may write to the lease any more; the local file has the lines.
                    self.stopped_reason = str(e)
                    return False
                except ApiClientError as e:
                    log.warning("could not ship %d log line(s) (will retry): %s", len(batch), e)
                    self._requeue(batch)
                    return False
                self.sent += len(batch)
            return False

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="log-shipper", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.flush_s)
            self._wake.clear()
            self.flush()

    def close(self) -> None:
        """Stop the thread after a last flush."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.flush()
