"""Waiting on events in tests: a readiness answer, a database state, a process gone.

A test waits for the event itself and never for a time tuned on a quiet machine: on a busy
one (2 cores running other suites, `scripts/ci/stress_slow.sh`) starting an API or forming
a torchrun cluster takes minutes where it takes seconds here. The only bound is
HANG_BOUND_S, which stops a test that would otherwise hang for ever; it is not a
performance budget (figures come from `proofnet bench`). A probe that can tell the event
will never come (a process that exited) fails at once instead of waiting the bound out.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

# Fifteen minutes by default; PROOFNET_TEST_HANG_BOUND_S lowers it for a quick local run.
HANG_BOUND_S = float(os.environ.get("PROOFNET_TEST_HANG_BOUND_S", "900"))


def until(
    what: str,
    probe: Callable[[], Any],
    *,
    alive: Callable[[], None] = lambda: None,
    detail: Callable[[], str] = lambda: "",
    interval_s: float = 0.1,
) -> Any:
    """`probe()`'s first truthy answer. `alive()` runs before each probe and raises when the
    event can no longer come; past HANG_BOUND_S an AssertionError names `what` and adds
    `detail()` (log tails)."""
    deadline = time.monotonic() + HANG_BOUND_S
    while True:
        alive()
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(
                f"still waiting for {what} after {HANG_BOUND_S:.0f}s (a hang)\n{detail()}"
            )
        time.sleep(interval_s)
