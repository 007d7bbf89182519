"""What an attempt of a resumed single-unit job may claim: the share of the job's price for
the segments it proved, never the segments another attempt proved.

A job whose provider was lost resumes on the next provider from the last committed
checkpoint `at` (api.services.resume); the resumed attempt proves segments `at`+1..S of
the schedule's S. It is paid at most `ceiling` x (S - `at`) / S, rounded down, where the
ceiling is the job's price (fixed price, auction's clearing price) or a rate card's
`max_amount` (a rate-card attempt is paid its own metered GPU time, within its share of
the cap). Shares of disjoint segment ranges, each rounded down, sum to at most the ceiling,
so within the escrow's budget. The worker claims it and the oracle re-computes it.
"""

from __future__ import annotations

from proofnet.messages.jobspec import JobSpec, RateCardPrice


def segment_cap(spec: JobSpec, price: int, first: int, last: int | None = None) -> int:
    """The most an attempt that proved segments `first`..`last` (None: to the end) may
    claim, given `price`: what the job's pricing lets its attestation claim as if it had
    proved them all. A spec without a schedule has no segments: `price` as is."""
    schedule = spec.schedule
    if schedule is None or schedule.segments < 1:
        return price
    total = schedule.segments
    end = total if last is None else min(last, total)
    proved = max(0, end - max(first, 1) + 1)
    if proved >= total:
        return price
    pricing = spec.pricing
    ceiling = pricing.max_amount if isinstance(pricing, RateCardPrice) else price
    return min(price, ceiling * proved // total)
