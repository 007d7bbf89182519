"""Does a manifest commit the schedule the job declared? Checked without running job code.

Each check takes the manifest and what the job fixed (its schedule and the data-order seed
derived from the job seed and claim nonce) and returns a `Violation` or None; `check_conformance`
runs them in turn and stops at the first. The kinds are stable strings that a verifier maps
to its own rejection reasons:

- `checkpoint_interval`: the manifest's k is not the spec's;
- `data_seed`: the manifest names a data-order seed other than the derived one;
- `segment_count`: fewer or more segments than the schedule (a zero-step or truncated
  proof, or segments padded on);
- `step_order`: a checkpoint is not at the step the schedule puts it at;
- `data_order`: a segment's data-index commitment is not the hash of the indices the
  seed-derived order gives its steps.

A proof that passes all of them trained every step of the schedule on the right data, if
its segments replay: what the spot checks then sample.

A `partial` proof (its run was stopped before the end) commits the schedule's first
segments only, at least one: the caller decides when that is acceptable (an oracle, only for
a lease its quorum stopped for the job's fault); every segment it does commit is checked
as for a whole proof.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice

from pot.manifest import Manifest
from pot.schedule import Schedule

CHECKPOINT_INTERVAL = "checkpoint_interval"
DATA_SEED = "data_seed"
SEGMENT_COUNT = "segment_count"
STEP_ORDER = "step_order"
DATA_ORDER = "data_order"


@dataclass(frozen=True)
class Violation:
    kind: str  # one of the constants above
    message: str


@dataclass(frozen=True)
class Expected:
    """What the job fixed before the proof was made."""

    schedule: Schedule
    data_seed: int
    # The proof may commit the schedule's first segments only (a run stopped early).
    partial: bool = False


Check = Callable[[Manifest, Expected], "Violation | None"]


def check_interval(manifest: Manifest, expected: Expected) -> Violation | None:
    k = expected.schedule.steps_per_checkpoint
    if manifest.steps_per_checkpoint != k:
        return Violation(
            CHECKPOINT_INTERVAL,
            f"the manifest checkpoints every {manifest.steps_per_checkpoint} steps; "
            f"the spec says every {k}",
        )
    return None


def check_data_seed(manifest: Manifest, expected: Expected) -> Violation | None:
    if manifest.data_seed != expected.data_seed:
        return Violation(
            DATA_SEED, "the manifest's data seed is not derived from the job seed and nonce"
        )
    return None


def check_segment_count(manifest: Manifest, expected: Expected) -> Violation | None:
    want, got = expected.schedule.segments, manifest.segments
    if expected.partial and 1 <= got <= want:
        return None
    if got != want:
        schedule = expected.schedule
        return Violation(
            SEGMENT_COUNT,
            f"the manifest commits {got} segments; the schedule of {schedule.total_steps} "
            f"steps at one checkpoint every {schedule.steps_per_checkpoint} has {want}",
        )
    return None


def check_step_order(manifest: Manifest, expected: Expected) -> Violation | None:
    for i, leaf in enumerate(manifest.leaves):
        want = expected.schedule.leaf_step(i)
        if leaf.step != want:
            return Violation(
                STEP_ORDER, f"checkpoint {i} is at step {leaf.step}; the schedule puts it at {want}"
            )
    return None


def check_data_order(manifest: Manifest, expected: Expected) -> Violation | None:
    commitments = expected.schedule.index_commitments(expected.data_seed)
    # A partial proof's segments are the schedule's first ones (check_segment_count).
    for segment, want in enumerate(islice(commitments, manifest.segments), start=1):
        got = manifest.leaves[segment].data or ""
        if not hmac.compare_digest(got, want):
            return Violation(
                DATA_ORDER,
                f"segment {segment}'s data indices are not the seed-derived order of its steps",
            )
    return None


# Cheapest first; the data order (every index of every step, hashed) last.
CHECKS: tuple[Check, ...] = (
    check_interval,
    check_data_seed,
    check_segment_count,
    check_step_order,
    check_data_order,
)


def check_conformance(
    manifest: Manifest, schedule: Schedule, data_seed: int, *, partial: bool = False
) -> Violation | None:
    """The first way `manifest` departs from `schedule` and `data_seed`, or None; with
    `partial`, it may commit the schedule's first segments only."""
    expected = Expected(schedule=schedule, data_seed=data_seed, partial=partial)
    for check in CHECKS:
        violation = check(manifest, expected)
        if violation is not None:
            return violation
    return None


def check_prefix_conformance(
    manifest: Manifest, schedule: Schedule, data_seed: int
) -> Violation | None:
    """`check_conformance` for a committed prefix (a lost attempt's proof): it may commit
    fewer segments than the schedule, each as the schedule fixes it."""
    expected = Expected(schedule=schedule, data_seed=data_seed)
    for check in (check_interval, check_data_seed, check_step_order):
        violation = check(manifest, expected)
        if violation is not None:
            return violation
    if manifest.segments > schedule.segments:
        return check_segment_count(manifest, expected)
    commitments = schedule.index_commitments(data_seed)
    for segment, want in zip(range(1, manifest.segments + 1), commitments, strict=False):
        if not hmac.compare_digest(manifest.leaves[segment].data or "", want):
            return Violation(
                DATA_ORDER,
                f"segment {segment}'s data indices are not the seed-derived order of its steps",
            )
    return None
