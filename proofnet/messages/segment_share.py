"""What an attempt of a resumed single-unit job may claim: the share of the job's price for
the segments it proved, never the segments another attempt proved.

A job whose provider was lost resumes on the next provider from the last committed
checkpoint `at` (api.services.resume); the resumed attempt proves segments `at`+1..S of
the schedule's S. It is paid at most `ceiling` x (S - `at`) / S, rounded down, where the
ceiling is the job's price (fixed price, auction's clearing price) or a rate card's
`max_amount` (a rate-card attempt is paid its own metered GPU time, within its share of
the cap). Shares of disjoint segment ranges, each rounded down, sum to at most the ceiling,
so within the escrow's budget. The worker claims it and the oracle re-computes it.

A lease the oracle quorum stopped for the job's fault (`proofnet.messages.job_fault`) is paid
the same way for the segments it committed, at most those its uploaded prefix committed when
it stopped plus `STOP_GRACE_SEGMENTS` (the segment in flight when the stop reached it): a
provider that trains on after the stop is paid no more (`stopped_share`).
"""

from __future__ import annotations

from collections.abc import Iterable

from proofnet.messages.jobspec import JobSpec, RateCardPrice


def segment_cap(spec: JobSpec, price: int, first: int, last: int | None = None) -> int:
    """The most an attempt that proved segments `first`..`last` (None: to the end) may
    claim, given `price`: what the job's pricing lets its attestation claim as if it had
    proved them all. A spec without a schedule has no segments and is never resumed
    (api.services.resume): only a run of the whole job is paid, `price`; a part of one,
    nothing."""
    schedule = spec.schedule
    if schedule is None or schedule.segments < 1:
        return price if first <= 1 and last is None else 0
    total = schedule.segments
    end = total if last is None else min(last, total)
    proved = max(0, end - max(first, 1) + 1)
    if proved >= total:
        return price
    pricing = spec.pricing
    ceiling = pricing.max_amount if isinstance(pricing, RateCardPrice) else price
    return min(price, ceiling * proved // total)


# The segments past those committed at the stop that a stopped lease is still paid for: the
# one in flight when the heartbeat answer told the worker to stop.
STOP_GRACE_SEGMENTS = 1


def stopped_last(stop_segments: int, committed: int | None = None) -> int:
    """The last segment a stopped lease is paid for: those committed when it stopped, plus
    the grace, and no more than its proof commits (`committed`, when known)."""
    last = stop_segments + STOP_GRACE_SEGMENTS
    return last if committed is None else min(last, committed)


def stopped_share(
    spec: JobSpec, price: int, first: int, stop_segments: int, committed: int | None = None
) -> int:
    """The most a lease stopped for the job's fault may claim (see the module doc)."""
    return segment_cap(spec, price, first, stopped_last(stop_segments, committed))


def overlap(spans: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Two of the inclusive segment ranges `spans` that share a segment, or None: the
    attempts paid from one escrow must each be paid for segments no other is, so their
    shares (each rounded down) sum to at most the ceiling."""
    ordered = sorted(spans)
    for before, after in zip(ordered, ordered[1:], strict=False):
        if after[0] <= before[1]:
            return before, after
    return None
