"""Metering bounded by proof: the GPU time a rate-card attestation may be paid for.

A worker attests its GPU time; on its word alone, an idle lease (or an inflated count) is
paid. The proof says how much training happened: the manifest commits the steps done, and
a drawn verifier with the same GPU model (the device class the proof was made on) replays
some of them and is timed on its own clock, outside the job's container. The payable GPU
time is therefore at most

    (committed steps x measured step time x slack + measured start-up + allowance) x GPUs

The measured step time excludes the replay's start-up (container, imports, the trainer's
data loading): the verifier runs the drawn segments (segment 1 among them) and then segment
1 alone, both from a fresh container, so

    step time = (drawn run - segment-1 run) / (drawn steps - segment-1 steps)
    start-up  = segment-1 run - segment-1 steps x step time

and the start-up is paid once, as the provider's own run has one. Job code cannot make the
step time look shorter than it is: until segment 1 ends both runs are the same to it (the
harness shows no mode, `pot.harness`), and slowing anything after that only raises the bound.

The slack absorbs the difference between two GPUs of one model (clocks under power caps,
thermal state) and the timing noise; the allowance covers what the verifier does not time
(the provider's final upload of a checkpoint). Both are settings; their defaults follow
from measured variance (`proofnet bench cheat`, docs/benchmarks.md "Metering slack"):
padding the attested time risks the whole payment as soon as it leaves the band honest
variance fills, so its expected value is negative. Pure arithmetic; the verifier measures,
`oracle.verification.verify` applies it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Defaults (proofnet.settings, oracle.verify.VerificationContext); see the module doc.
DEFAULT_SLACK = 1.15
DEFAULT_ALLOWANCE_MS = 60_000


@dataclass(frozen=True)
class ProofTiming:
    """What a spot check measured: the steps it replayed and how long that took (start-up
    included), the steps the manifest commits to in all, and, when the verifier also ran
    the first segment alone, its steps and time (`first_steps`, `first_ms`)."""

    committed_steps: int
    replayed_steps: int
    replay_ms: int
    first_steps: int = 0
    first_ms: int | None = None

    def __post_init__(self) -> None:
        values = (self.committed_steps, self.replayed_steps, self.replay_ms, self.first_steps)
        if min(values) < 0 or (self.first_ms is not None and self.first_ms < 0):
            raise ValueError("proof timing cannot be negative")

    @property
    def _differenced(self) -> bool:
        # A first-segment run no shorter than the whole drawn run is not a measurement the
        # difference can use (something slowed it): the undifferenced time, which only
        # overstates the step time, is used instead.
        return (
            self.first_ms is not None
            and 0 < self.first_steps < self.replayed_steps
            and self.first_ms < self.replay_ms
        )

    @property
    def step_ms(self) -> float | None:
        """The measured time of one step (start-up excluded when the first segment was also
        run alone), or None when nothing was replayed."""
        if self.replayed_steps == 0:
            return None
        if self._differenced:
            assert self.first_ms is not None
            return (self.replay_ms - self.first_ms) / (self.replayed_steps - self.first_steps)
        return self.replay_ms / self.replayed_steps

    @property
    def startup_ms(self) -> float:
        """The replay's measured start-up (0 when it cannot be told from the steps: it is
        then inside `step_ms`)."""
        step = self.step_ms
        if not self._differenced or step is None:
            return 0.0
        assert self.first_ms is not None
        return max(self.first_ms - self.first_steps * step, 0.0)


def proof_bound_ms(
    timing: ProofTiming, *, gpus: int, slack: float, allowance_ms: int
) -> int | None:
    """The most GPU milliseconds the proof backs (None: the proof timed nothing, no bound)."""
    step_ms = timing.step_ms
    if step_ms is None:
        return None
    per_gpu = timing.committed_steps * step_ms * slack + timing.startup_ms + allowance_ms
    return math.ceil(per_gpu * max(gpus, 1))
