"""The training schedule a job declares, and what a proof that follows it must commit.

A job's spec fixes the schedule before any worker sees it: the data set's size, the batch
size, the number of optimiser steps (given directly, or as epochs over the data set) and the
checkpoint interval k. From it, and from the data-order seed (job seed + claim nonce), anyone
can recompute without running job code:

- how many segments the proof must commit: ceil(total steps / k);
- the step each checkpoint must be at: leaf i at min(i * k, total steps);
- the data indices of every step (`pot.seeds.BatchSampler`), so the index commitment of
  every segment (`leaf.data`).

`derive_schedule` is the one derivation of a schedule from what a spec declares; the worker,
the oracle, the API and the harness all call it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from pot.indices import SegmentIndices
from pot.manifest import MAX_SEGMENTS
from pot.seeds import BatchSampler

# An epoch's order is one permutation of the data set held in memory (8 bytes an index).
MAX_DATASET_SIZE = 2**28
# Every index of every step is hashed when a proof's data order is checked.
MAX_EXAMPLES_DRAWN = 2**31


class ScheduleError(ValueError):
    """A schedule that cannot be trained or checked; the message names the field."""


@dataclass(frozen=True)
class Schedule:
    """A resolved schedule: every number the harness and the checks use."""

    total_steps: int
    steps_per_checkpoint: int
    dataset_size: int
    batch_size: int

    def __post_init__(self) -> None:
        for name in ("total_steps", "steps_per_checkpoint", "dataset_size", "batch_size"):
            _positive(name, getattr(self, name))
        if self.dataset_size > MAX_DATASET_SIZE:
            raise ScheduleError(
                f"dataset_size {self.dataset_size} exceeds {MAX_DATASET_SIZE} examples"
            )
        if self.batch_size > self.dataset_size:
            raise ScheduleError(
                f"batch_size {self.batch_size} exceeds dataset_size {self.dataset_size}"
            )
        if self.segments > MAX_SEGMENTS:
            raise ScheduleError(
                f"{self.total_steps} steps at one checkpoint every {self.steps_per_checkpoint} "
                f"make {self.segments} segments; at most {MAX_SEGMENTS} (raise "
                "steps_per_checkpoint)"
            )
        if self.total_steps * self.batch_size > MAX_EXAMPLES_DRAWN:
            raise ScheduleError(
                f"{self.total_steps} steps of {self.batch_size} examples draw more than "
                f"{MAX_EXAMPLES_DRAWN} examples"
            )

    @property
    def steps_per_epoch(self) -> int:
        """Full batches per pass over the data (a last partial batch is dropped)."""
        return self.dataset_size // self.batch_size

    @property
    def segments(self) -> int:
        return math.ceil(self.total_steps / self.steps_per_checkpoint)

    def leaf_step(self, index: int) -> int:
        """The step checkpoint `index` is taken at (0: the initial state)."""
        if not 0 <= index <= self.segments:
            raise ScheduleError(f"checkpoint {index} is not in 0..{self.segments}")
        return min(index * self.steps_per_checkpoint, self.total_steps)

    def segment_steps(self, segment: int) -> range:
        """The 1-based steps of `segment` (1..segments)."""
        if not 1 <= segment <= self.segments:
            raise ScheduleError(f"segment {segment} is not in 1..{self.segments}")
        return range(self.leaf_step(segment - 1) + 1, self.leaf_step(segment) + 1)

    def sampler(self, data_seed: int) -> BatchSampler:
        return BatchSampler(data_seed, self.dataset_size, self.batch_size)

    def index_commitments(self, data_seed: int) -> Iterator[str]:
        """`leaf.data` of segments 1..n as an honest run commits them (the same hashing the
        recorder does over the same sampler), one segment at a time."""
        sampler = self.sampler(data_seed)
        for segment in range(1, self.segments + 1):
            indices = SegmentIndices()
            for step in self.segment_steps(segment):
                indices.add(step, sampler.indices(step))
            yield indices.hexdigest()

    def to_json(self) -> dict[str, int]:
        return {
            "total_steps": self.total_steps,
            "steps_per_checkpoint": self.steps_per_checkpoint,
            "dataset_size": self.dataset_size,
            "batch_size": self.batch_size,
            "segments": self.segments,
        }


def derive_schedule(
    *,
    dataset_size: int,
    batch_size: int,
    steps_per_checkpoint: int,
    steps: int | None = None,
    epochs: int | None = None,
) -> Schedule:
    """The schedule a spec declares: `steps` optimiser steps, or `epochs` passes over the
    data set of `dataset_size // batch_size` full batches each (exactly one of the two)."""
    if (steps is None) == (epochs is None):
        raise ScheduleError("declare exactly one of steps and epochs")
    if epochs is not None:
        for name, value in (("epochs", epochs), ("dataset_size", dataset_size)):
            _positive(name, value)
        _positive("batch_size", batch_size)
        if batch_size > dataset_size:
            raise ScheduleError(f"batch_size {batch_size} exceeds dataset_size {dataset_size}")
        steps = epochs * (dataset_size // batch_size)
    assert steps is not None
    return Schedule(
        total_steps=steps,
        steps_per_checkpoint=steps_per_checkpoint,
        dataset_size=dataset_size,
        batch_size=batch_size,
    )


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ScheduleError(f"{name} must be a positive integer, got {value!r}")
