"""What other API processes changed, as PostgreSQL tells it: LISTEN on `proofnet_reads`.

Triggers (migrations 0008, 0010) announce every committed change the polled reads depend
on: a job's row, its leases, units and escrow record, a revoked bearer token, a movement
(payout, refund, ...) the chain watcher recorded or removed. `ChangeFeed` holds one
connection per process that listens on that channel, on a daemon thread, and hands each
announcement to its subscribers, which drop what they cached about it. So a cache in any
process, on any host, learns of a change a few milliseconds after its commit, whichever
process made it.

`live` says whether the feed is listening now. A cache whose freshness rests on the feed
serves nothing while it is not, and is told to `reset` (forget everything) whenever the feed
connects, since announcements sent while it was away are lost. A connection that dies
silently (no error, no more announcements) is not noticed; the caches' own TTLs bound what
that can cost. SQLite has no such channel: there the feed is not used.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine

log = logging.getLogger(__name__)

CHANNEL = "proofnet_reads"
# Announcement kinds (the payload is "<kind>:<key>"; see the migration).
JOB = "j"  # key: job id
QUEUE = "q"  # key: job id; the queue's membership changed with it
ESCROW = "e"  # key: job id of the escrow record
TOKEN = "t"  # key: bearer token hash
PAYOUT = "p"  # key: the address a recorded movement (payout, refund) went to


@dataclass(frozen=True)
class Subscriber:
    # Called on the feed's thread, so both must be thread-safe and quick.
    changed: Callable[[str, str], None]  # (kind, key)
    reset: Callable[[], None]


class ChangeFeed:
    """Listens on CHANNEL over a connection of its own (made like `engine`'s)."""

    def __init__(self, engine: Engine, *, retry_s: float = 1.0, wake_s: float = 0.25) -> None:
        self.engine = engine
        self.retry_s = retry_s
        # How often the listening thread looks up from its wait to see whether to stop.
        self.wake_s = wake_s
        self.subscribers: list[Subscriber] = []
        self._live = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def live(self) -> bool:
        return self._live.is_set()

    def subscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.append(subscriber)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="proofnet-change-feed", daemon=True)
        self._thread.start()

    def wait_live(self, timeout: float) -> bool:
        return self._live.wait(timeout)

    def stop(self) -> None:
        """Stop listening (within `wake_s`) and close the connection."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.wake_s + 5.0)
        self._set_down()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except Exception as e:  # the database went away: retry until told to stop
                if not self._stop.is_set():
                    log.warning("change feed lost its connection (%r); retrying", e)
            self._set_down()
            self._stop.wait(self.retry_s)

    def _listen(self) -> None:
        raw = self.engine.raw_connection()
        conn = raw.driver_connection
        raw.detach()  # this connection is the feed's for good: not the pool's to hand out
        try:
            if conn is None:
                raise RuntimeError("the engine's driver gave no connection to listen on")
            conn.autocommit = True
            conn.execute(f"LISTEN {CHANNEL}")
            # What was announced before LISTEN took effect is lost: start from nothing.
            self._notify_reset()
            self._live.set()
            while not self._stop.is_set():
                for notification in conn.notifies(timeout=self.wake_s):
                    self._dispatch(notification.payload)
        finally:
            self._set_down()
            with contextlib.suppress(Exception):
                (conn if conn is not None else raw).close()

    def _set_down(self) -> None:
        if self._live.is_set():
            self._live.clear()
            self._notify_reset()

    def _notify_reset(self) -> None:
        for s in self.subscribers:
            try:
                s.reset()
            except Exception:  # one broken subscriber must not starve the others
                log.exception("change feed subscriber failed to reset")

    def _dispatch(self, payload: str) -> None:
        kind, sep, key = payload.partition(":")
        if not sep:
            log.warning("ignoring a malformed change announcement: %r", payload[:200])
            return
        for s in self.subscribers:
            try:
                s.changed(kind, key)
            except Exception:
                log.exception("change feed subscriber failed on %r", payload[:200])
