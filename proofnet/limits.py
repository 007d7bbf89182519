"""Rate limits by key: a token bucket per key, in bounded memory.

Every served role limits what one client (an address, a worker key) may ask of it per
minute; `TokenBuckets` keeps one bucket per key, refilled continuously, and forgets the
least recently used keys beyond `max_keys` (a forgotten key starts again with a full
bucket, so the bound trades a little precision under a flood of distinct keys for memory
that cannot grow without limit). Thread-safe; no I/O.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from cachetools import LRUCache


class TokenBuckets:
    """`per_minute` requests per key, in bursts of at most `per_minute`."""

    def __init__(
        self,
        per_minute: int,
        *,
        max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_minute < 1:
            raise ValueError(f"per_minute must be at least 1, got {per_minute}")
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.clock = clock
        self._buckets: LRUCache[str, tuple[float, float]] = LRUCache(maxsize=max_keys)
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """0 when a request of `key` may pass now (and counts it), else the seconds until
        one may."""
        with self._lock:
            now = self.clock()
            tokens, last = self._buckets.get(key, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate

    def __len__(self) -> int:
        return len(self._buckets)
