"""The API feed's attempts of a single-unit job, as the oracle parses them: a confused or
hostile API cannot chain a proof to an attempt it does not list, or to a later one."""

from __future__ import annotations

from typing import Any

import pytest

from oracle.inputs.feed import FeedDataError, parse_attempts

STARTED = "2026-01-01T00:00:00+00:00"


def attempt(n: int, **changes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "attempt": n,
        "worker_key": f"{n:02d}" * 32,
        "payout_address": "addr_test1",
        "nonce": "ab" * 16,
        "outcome": "released",
        "started_at": STARTED,
        "ended_at": STARTED,
        "resumed_from_attempt": None,
        "resumed_at": None,
        "first_segment": 1,
        "last_segment": 2,
        "results": {"pot/prefix.json": "c" * 64},
    }
    return row | changes


def test_attempts_parse_with_their_resume_links() -> None:
    second = attempt(2, resumed_from_attempt=1, resumed_at=2, first_segment=3, last_segment=None)
    one, two = parse_attempts([attempt(1), second])
    assert (one.attempt, one.last_segment, one.results["pot/prefix.json"]) == (1, 2, "c" * 64)
    assert (two.resumed_from, two.resumed_at, two.last_segment) == (1, 2, None)
    assert parse_attempts(None) == ()


@pytest.mark.parametrize(
    "rows",
    [
        [attempt(1, resumed_from_attempt=2, resumed_at=1), attempt(2)],  # a later one
        [attempt(2, resumed_from_attempt=1, resumed_at=1)],  # one not listed
        [attempt(1), attempt(2, resumed_from_attempt=1)],  # a link without a checkpoint
        [attempt(1), attempt(1)],  # listed twice
        [attempt(1, results={"pot/prefix.json": "not a digest"})],
        [attempt(1, started_at="yesterday")],
        "not a list",
    ],
)
def test_inconsistent_attempts_are_refused(rows: Any) -> None:
    with pytest.raises(FeedDataError):
        parse_attempts(rows)
