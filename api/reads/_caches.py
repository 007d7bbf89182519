"""The polled reads' caches across processes: started and stopped with the app.

On PostgreSQL the app listens to the change feed (api.change_feed) and:

- keeps job status bodies (api.status_cache), which rely on the feed for their freshness;
- drops a bearer token from its sign-in cache as soon as any process revokes it, and clears
  its balance cache as soon as any process's chain watcher records or removes a movement
  (payout, refund; migration 0010). Both caches keep their own TTLs (5 s) as the bound
  should an announcement be lost.

On SQLite there is no feed: job statuses are read every time, and sign-ins and balances are
cached for their TTLs as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy import Engine, text
from starlette.datastructures import State

from api.db import is_sqlite
from api.reads._change_feed import PAYOUT, TOKEN, ChangeFeed, Subscriber
from api.reads._status_cache import StatusCache

log = logging.getLogger(__name__)

# How long startup waits for the feed to listen before serving without the status cache
# (it turns on once the feed connects).
STARTUP_WAIT_S = 2.0


# A trigger migration 0008 creates: without it (a database not migrated to head) nothing is
# announced, so nothing may be kept on the strength of announcements.
TRIGGER = "jobs_notify_reads"


async def start(state: State, engine: Engine) -> None:
    if is_sqlite(engine):
        return
    if not await asyncio.to_thread(_announcing, engine):
        log.warning(
            "the database does not announce changes (trigger %s is missing: migrate it to "
            "head); job statuses are read every time",
            TRIGGER,
        )
        return
    feed = ChangeFeed(engine)
    cache = StatusCache(feed)
    feed.subscribe(Subscriber(cache.changed, cache.reset))
    feed.subscribe(Subscriber(lambda kind, key: _other_caches(state, kind, key), _nothing))
    state.change_feed = feed
    state.status_cache = cache
    feed.start()
    await asyncio.to_thread(feed.wait_live, STARTUP_WAIT_S)


async def stop(state: State) -> None:
    feed = getattr(state, "change_feed", None)
    if feed is None:
        return
    await asyncio.to_thread(feed.stop)
    with contextlib.suppress(AttributeError):
        del state.status_cache
    del state.change_feed


def _announcing(engine: Engine) -> bool:
    with engine.connect() as conn:
        found = conn.execute(
            text("SELECT count(*) FROM pg_trigger WHERE tgname = :name"), {"name": TRIGGER}
        ).scalar_one()
    return bool(found)


def _other_caches(state: State, kind: str, key: str) -> None:
    if kind == TOKEN:
        tokens = getattr(state, "token_cache", None)
        if tokens is not None:
            tokens.evict(key)
    elif kind == PAYOUT:
        sources = getattr(state, "balance_sources", None)
        if sources is not None:
            sources.balances.clear()


def _nothing() -> None:
    return None
