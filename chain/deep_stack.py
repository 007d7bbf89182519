"""Run uplc work on threads with a deep stack.

uplc decodes, encodes and evaluates Plutus terms recursively, one Python frame per term, so
real contracts need far more than Python's default 1,000 frames and a thread stack larger
than the default 8 MiB. Raising the limit around a call is racy (it is process-wide) and a
deeper limit on a small stack crashes the process instead of raising; so the work runs on a
small pool of threads created with a large stack, and the limit is raised once, for good.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

STACK_BYTES = 512 * 1024 * 1024  # virtual; only the pages actually used are committed
RECURSION_LIMIT = 200_000

P = ParamSpec("P")
T = TypeVar("T")

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_local = threading.local()


def _mark_deep() -> None:
    _local.deep = True


def run_deep(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` on a deep-stack thread (directly when already on one)."""
    if getattr(_local, "deep", False):
        return fn(*args, **kwargs)
    global _executor
    with _lock:
        if _executor is None:
            sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
            _executor = ThreadPoolExecutor(
                max_workers=2, thread_name_prefix="uplc-deep", initializer=_mark_deep
            )
        # Worker threads are created inside submit(), so the stack size applies to them.
        previous = threading.stack_size(STACK_BYTES)
        try:
            future = _executor.submit(fn, *args, **kwargs)
        finally:
            threading.stack_size(previous)
    return future.result()
