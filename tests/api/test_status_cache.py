"""The status cache's rules: what it keeps, for how long, and what it refuses to keep."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from api.reads._change_feed import ESCROW, JOB, PAYOUT, QUEUE, TOKEN
from api.reads._status_cache import STATUS_CACHE_TTL_S, StatusCache


class Feed:
    def __init__(self) -> None:
        self.live = True


class Tick:
    def __init__(self) -> None:
        self.t = 50.0

    def __call__(self) -> float:
        return self.t


NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _cache() -> tuple[StatusCache, Feed, Tick]:
    feed, tick = Feed(), Tick()
    return StatusCache(feed, clock=tick), feed, tick


def test_keeps_settled_bodies_until_the_job_changes_or_the_ttl() -> None:
    cache, _, tick = _cache()
    for status in ("leased", "completed", "failed", "cancelled", "stopped"):
        cache.put(1, status, status, f"body-{status}", cache.begin(NOW))
        assert cache.get(1, status, NOW) == f"body-{status}"
    cache.changed(JOB, "completed")
    cache.changed(ESCROW, "failed")
    assert cache.get(1, "completed", NOW) is None and cache.get(1, "failed", NOW) is None
    assert cache.get(1, "leased", NOW) == "body-leased"
    # Announcements about other things leave statuses alone.
    cache.changed(TOKEN, "leased")
    cache.changed(PAYOUT, "leased")
    assert cache.get(1, "leased", NOW) == "body-leased"
    tick.t += STATUS_CACHE_TTL_S - 0.001
    assert cache.get(1, "leased", NOW) == "body-leased"
    tick.t += 0.001
    assert cache.get(1, "leased", NOW) is None


def test_the_app_clock_bounds_entries_too() -> None:
    cache, _, _ = _cache()
    cache.put(1, "j", "completed", "b", cache.begin(NOW))
    assert cache.get(1, "j", NOW + timedelta(seconds=STATUS_CACHE_TTL_S)) is None
    cache.put(1, "j", "completed", "b", cache.begin(NOW))
    assert cache.get(1, "j", NOW - timedelta(seconds=1)) is None  # a clock set back


def test_only_the_owner_read_is_served() -> None:
    cache, _, _ = _cache()
    cache.put(1, "j", "completed", "b", cache.begin(NOW))
    assert cache.get(2, "j", NOW) is None
    assert cache.get(1, "j", NOW) == "b"


def test_a_read_begun_before_a_change_is_not_kept() -> None:
    cache, _, _ = _cache()
    ticket = cache.begin(NOW)
    cache.changed(JOB, "j")  # committed while the read ran: its body may predate it
    cache.put(1, "j", "completed", "stale", ticket)
    assert cache.get(1, "j", NOW) is None
    cache.put(1, "other", "completed", "b", ticket)  # another job's read is unaffected
    assert cache.get(1, "other", NOW) == "b"
    cache.put(1, "j", "completed", "fresh", cache.begin(NOW))
    assert cache.get(1, "j", NOW) == "fresh"


def test_queued_bodies_last_a_second_and_follow_the_queue() -> None:
    cache, _, tick = _cache()
    cache.put(1, "a", "queued", "a1", cache.begin(NOW))
    cache.put(1, "done", "completed", "d", cache.begin(NOW))
    tick.t += 0.999
    assert cache.get(1, "a", NOW) == "a1"
    tick.t += 0.001
    assert cache.get(1, "a", NOW) is None
    cache.put(1, "a", "queued", "a2", cache.begin(NOW))
    ticket = cache.begin(NOW)
    cache.changed(QUEUE, "b")  # another job joined or left the queue: positions move
    assert cache.get(1, "a", NOW) is None
    assert cache.get(1, "done", NOW) == "d"
    cache.put(1, "a", "queued", "a3", ticket)  # read before that: not kept
    assert cache.get(1, "a", NOW) is None


def test_unsettled_statuses_are_never_kept() -> None:
    cache, _, _ = _cache()
    for status in ("running", "something new"):
        cache.put(1, "j", status, "b", cache.begin(NOW))
        assert cache.get(1, "j", NOW) is None


def test_nothing_is_kept_or_served_without_the_feed() -> None:
    cache, feed, _ = _cache()
    cache.put(1, "j", "completed", "b", cache.begin(NOW))
    feed.live = False
    assert cache.get(1, "j", NOW) is None
    cache.put(1, "k", "completed", "b", cache.begin(NOW))
    feed.live = True
    assert cache.get(1, "k", NOW) is None
    assert StatusCache(None).get(1, "j", NOW) is None


def test_a_reset_forgets_everything_and_every_read_in_flight() -> None:
    cache, _, _ = _cache()
    cache.put(1, "j", "completed", "b", cache.begin(NOW))
    ticket = cache.begin(NOW)
    cache.reset()  # the feed (re)connected: announcements may have been lost
    assert cache.get(1, "j", NOW) is None
    cache.put(1, "j", "completed", "b", ticket)
    assert cache.get(1, "j", NOW) is None


def test_marks_are_bounded() -> None:
    feed, tick = Feed(), Tick()
    cache = StatusCache(feed, clock=tick, max_entries=3)
    ticket = cache.begin(NOW)
    for n in range(5):
        cache.changed(JOB, f"j{n}")
    # The per-job marks were dropped on the way: every read begun before is refused.
    cache.put(1, "unrelated", "completed", "b", ticket)
    assert cache.get(1, "unrelated", NOW) is None
    for n in range(5):
        cache.put(1, f"k{n}", "completed", "b", cache.begin(NOW))
    assert len([n for n in range(5) if cache.get(1, f"k{n}", NOW) is not None]) <= 3
