"""The polled reads' machinery, one entry for the rest of the API.

- `ReadPool`: the threads, each holding one autocommit connection, that the polled reads
  (job status, balances, their sign-in) run their queries on (`_pool`).
- `start(state, engine)` / `stop(state)`: on PostgreSQL, the change feed (`_change_feed`,
  LISTEN on `proofnet_reads`) and the caches it keeps fresh across processes: job status
  bodies (`StatusCache`, `_status_cache`), the sign-in and balance caches (`_caches`).

The lean path in front of the app (`api.fastpath`) answers the two most-polled reads with
the routes' own functions, which read through this package; the modules here are private
to it (import-linter `private_modules`)."""

from api.reads._caches import start, stop
from api.reads._pool import ReadPool
from api.reads._status_cache import StatusCache

__all__ = ["ReadPool", "StatusCache", "start", "stop"]
