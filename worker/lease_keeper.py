"""Keeping a job's lease alive: heartbeats from a background thread, and noticing its loss.

The lease counts as lost when the API says so (404/409), or when no heartbeat has gone
through for a whole lease TTL: by then the API has given the job to someone else, so the
job must stop and must not be attested.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from worker.api_client import ApiClient, ApiClientError, LeaseLost

log = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(
        self,
        api: ApiClient,
        token: str,
        *,
        interval_s: float,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval_s <= 0 or ttl_s <= 0:
            raise ValueError("interval_s and ttl_s must be positive")
        self.api = api
        self.token = token
        self.interval_s = interval_s
        self.ttl_s = ttl_s
        self._clock = clock
        self.lost = threading.Event()
        self.lost_reason = ""
        self.message: str | None = None
        self.beats = 0
        self._last_ok = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _mark_lost(self, reason: str) -> None:
        if not self.lost.is_set():
            self.lost_reason = reason
            self.lost.set()
            log.warning("lease lost: %s", reason)

    def beat(self) -> bool:
        """One heartbeat now; False once the lease is lost (never raises)."""
        if self.lost.is_set():
            return False
        try:
            self.api.lease_heartbeat(self.token, message=self.message)
        except LeaseLost as e:
            self._mark_lost(str(e))
            return False
        except ApiClientError as e:
            silent = self._clock() - self._last_ok
            if silent >= self.ttl_s:
                self._mark_lost(f"no heartbeat got through for {silent:.0f}s: {e}")
                return False
            log.warning("lease heartbeat failed (will retry): %s", e)
            return True
        self._last_ok = self._clock()
        self.beats += 1
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self.beat():
                return
