"""Keeping a job's lease alive: heartbeats from a background thread, and noticing its loss.

The lease counts as lost when the API says so (404/409), or when no heartbeat has gone
through for a whole lease TTL: by then the API has given the job to someone else, so the
job must stop and must not be attested. For a cluster node, a heartbeat answer that says
the cluster attempt failed counts as lost too (the API ends the lease with it).

A heartbeat answer may instead say the lease is stopped (`LeaseStop`): the oracle quorum
found the job's code at fault early (it cannot be replayed). The lease stays the worker's,
to upload and attest the segments it committed; `stopped` is set and training must stop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from proofnet.messages.claim import LeaseStop
from worker.api_client import ApiClient, ApiClientError, LeaseLost
from worker.unit_claim import ClusterState

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
        # Set when the API stopped the lease for the job's fault (what `stop` says).
        self.stopped = threading.Event()
        self.stop_order: LeaseStop | None = None
        self.message: str | None = None
        # A cluster's node 0 publishes where it hosts the rendezvous with every heartbeat.
        self.rendezvous: str | None = None
        # The cluster as the latest heartbeat answer described it (cluster nodes only).
        self.cluster: ClusterState | None = None
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
            if self.rendezvous is None:
                state = self.api.lease_heartbeat(self.token, message=self.message)
            else:
                state = self.api.lease_heartbeat(
                    self.token, message=self.message, rendezvous=self.rendezvous
                )
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
        if state.stop is not None and not self.stopped.is_set():
            self.stop_order = state.stop
            self.stopped.set()
            log.warning("lease stopped (%s): %s", state.stop.reason, state.stop.message)
        if state.cluster is not None:
            self.cluster = state.cluster
            if state.cluster.state == "failed":
                self._mark_lost(f"the cluster attempt {state.cluster.rdzv_id} failed")
                return False
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self.beat():
                return
