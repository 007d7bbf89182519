"""Run uplc work with enough recursion: deep-stack threads, and one owner of the limit.

uplc decodes, encodes and evaluates Plutus terms recursively, one Python frame per term, so
real contracts need far more than Python's default 1,000 frames and a thread stack larger
than the default 8 MiB. A deeper limit on a small stack crashes the process instead of
raising, so evaluation runs on a small pool of threads created with a large stack.

The recursion limit is process-wide, so whoever raises it around a call and restores it
afterwards lowers it under every other thread still deep in uplc (a settlement bench once
failed with "maximum recursion depth" in a certificate script because another thread left
its `with` block). Every change of the limit therefore goes through `deep_recursion`: holds
nest and overlap across threads, the limit is the highest any live hold asked for, and it
returns to its old value only when the last hold ends. The deep-stack pool takes a hold for
good when it starts, so nothing lowers the limit under it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

STACK_BYTES = 512 * 1024 * 1024  # virtual; only the pages actually used are committed
RECURSION_LIMIT = 200_000

P = ParamSpec("P")
T = TypeVar("T")

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_local = threading.local()

_limit_lock = threading.Lock()
_holds = 0
_limit_before_holds = 0


def _acquire_limit(at_least: int) -> None:
    global _holds, _limit_before_holds
    with _limit_lock:
        if _holds == 0:
            _limit_before_holds = sys.getrecursionlimit()
        _holds += 1
        if sys.getrecursionlimit() < at_least:
            sys.setrecursionlimit(at_least)


def _release_limit() -> None:
    global _holds
    with _limit_lock:
        _holds -= 1
        if _holds == 0:
            sys.setrecursionlimit(_limit_before_holds)


@contextlib.contextmanager
def deep_recursion(at_least: int = 100_000) -> Iterator[None]:
    """Keep the recursion limit at `at_least` or more for the block, on any thread, without
    ever lowering it under another hold (see the module docstring)."""
    _acquire_limit(at_least)
    try:
        yield
    finally:
        _release_limit()


def _mark_deep() -> None:
    _local.deep = True


def run_deep(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` on a deep-stack thread (directly when already on one)."""
    if getattr(_local, "deep", False):
        return fn(*args, **kwargs)
    global _executor
    with _lock:
        if _executor is None:
            _acquire_limit(RECURSION_LIMIT)  # released never: the pool lives as long
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
