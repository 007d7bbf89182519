"""Job status bodies kept per process, dropped when any process changes the job.

A status is polled far more often than it changes. While the change feed (api.change_feed)
is live, a status body read from the database is kept and served again until one of:

- an announcement that the job changed (its row, a lease, a unit, its escrow record) or,
  for a queued job, that the queue's membership changed (its position may have);
- `ttl_s` (5 s) after the read began: the safety net should an announcement be lost on a
  connection that died silently, or a body come to depend on something not announced;
- for a queued job, `queued_ttl_s` (1 s): its count of matching providers online is a
  per-second figure (api.services.jobs.MatchingCache), and provider heartbeats are not
  announced.

Only settled shapes are kept: leased and finished jobs (whose body depends on their own rows)
and queued ones (as above); anything else (a job with a topology while it runs, a status
this module does not know) is read every time.

A read that began before an announcement about its job is not kept (the body may predate the
change), nor one that began before the feed last (re)connected. Entries are keyed by job id
and remember whose they are: another user's read of the same id misses and asks the
database, which answers it as the owner-only route always has.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from cachetools import TLRUCache

from api.reads._change_feed import ESCROW, JOB, QUEUE
from api.services.jobs import MATCHING_CACHE_TTL_S

STATUS_CACHE_TTL_S = 5.0
# Statuses whose body depends only on the job's own rows (all announced).
SETTLED = frozenset({"leased", "completed", "stopped", "failed", "cancelled"})
QUEUED = "queued"


class Feed(Protocol):
    """What the cache asks of the change feed: whether it is listening now."""

    @property
    def live(self) -> bool: ...


@dataclass(frozen=True)
class ReadTicket:
    """When a read began: the cache's change counter, its clock, and the app's clock."""

    seq: int
    tick: float
    now: datetime


@dataclass(frozen=True)
class _Entry:
    user_id: int
    body: Any
    queued: bool
    ticket: ReadTicket


class StatusCache:
    def __init__(
        self,
        feed: Feed | None,
        *,
        ttl_s: float = STATUS_CACHE_TTL_S,
        queued_ttl_s: float = MATCHING_CACHE_TTL_S,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = 50_000,
    ) -> None:
        self.feed = feed
        self.ttl_s = ttl_s
        self.queued_ttl_s = min(queued_ttl_s, ttl_s)
        self.clock = clock
        self.max_entries = max_entries
        # Each entry lives until its read's start plus its TTL (`_expiry`), by `clock`; past
        # `max_entries` the least recently used goes.
        self._entries: TLRUCache[str, _Entry] = TLRUCache(
            maxsize=max_entries, ttu=self._expiry, timer=clock
        )
        # Every announcement or reset moves `_seq` on; a read keeps its body only if nothing
        # about its job (`_changed`), the queue (`_queue_seq`) or everything (`_floor`)
        # was announced since its ticket.
        self._seq = 0
        self._changed: dict[str, int] = {}
        self._queue_seq = 0
        self._floor = 0
        self._lock = threading.Lock()

    @property
    def live(self) -> bool:
        return self.feed is not None and self.feed.live

    def begin(self, now: datetime) -> ReadTicket:
        with self._lock:
            return ReadTicket(self._seq, self.clock(), now)

    def get(self, user_id: int, job_id: str, now: datetime) -> Any:
        """The kept body of this user's job, or None."""
        if not self.live:
            return None
        with self._lock:
            entry = self._entries.get(job_id)
            if entry is None or entry.user_id != user_id:
                return None
            if self._fresh(entry, now):
                return entry.body
            if self._entries.get(job_id) is entry:
                del self._entries[job_id]
            return None

    def _ttl(self, entry: _Entry) -> float:
        return self.queued_ttl_s if entry.queued else self.ttl_s

    def _expiry(self, _job_id: str, entry: _Entry, _now: float) -> float:
        """When `entry` expires by this process's clock: its read's start plus its TTL."""
        return entry.ticket.tick + self._ttl(entry)

    def _fresh(self, entry: _Entry, now: datetime) -> bool:
        # The cache drops an entry by this process's clock; the app's clock bounds it too
        # (a test clock that stands still does not keep an entry forever; one moved forward
        # drops it).
        app_age = (now - entry.ticket.now).total_seconds()
        if not 0 <= app_age < self._ttl(entry):
            return False
        return not (entry.queued and entry.ticket.seq < self._queue_seq)

    def put(self, user_id: int, job_id: str, status: str, body: Any, ticket: ReadTicket) -> None:
        """Keep `body` (read for `user_id` since `ticket`) unless it may be stale already."""
        queued = status == QUEUED
        if not (queued or status in SETTLED) or not self.live:
            return
        with self._lock:
            if ticket.seq < self._floor or ticket.seq < self._changed.get(job_id, 0):
                return
            if queued and ticket.seq < self._queue_seq:
                return
            self._entries[job_id] = _Entry(user_id, body, queued, ticket)

    # --- the change feed's side (its thread) ----------------------------------------------

    def changed(self, kind: str, key: str) -> None:
        if kind not in (JOB, QUEUE, ESCROW):
            return
        with self._lock:
            self._seq += 1
            self._entries.pop(key, None)
            if kind == QUEUE:
                self._queue_seq = self._seq
            if len(self._changed) >= self.max_entries:
                # Forget per-job marks: reads begun before now are simply not kept.
                self._changed.clear()
                self._floor = self._seq
            self._changed[key] = self._seq

    def reset(self) -> None:
        with self._lock:
            self._seq += 1
            self._floor = self._seq
            self._entries.clear()
            self._changed.clear()
