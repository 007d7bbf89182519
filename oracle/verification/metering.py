"""Metering bounded by proof: the GPU time a rate-card attestation may be paid for.

A worker attests its GPU time; on its word alone, an idle lease (or an inflated count) is
paid. The proof says how much training happened: the manifest commits the steps done, and
the spot check replays drawn segments and times them. The payable GPU time is therefore at
most

    committed steps x (replay time / replayed steps) x slack x GPUs + allowance x GPUs

where the slack absorbs a verifier slower or faster than the provider and the allowance
covers what is not training steps (start-up, data loading, the final upload). The replay
time includes the replay's own start-up, which only raises the bound (never underpays an
honest provider). Pure arithmetic; the spot checker measures, `oracle.verification.verify` applies it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ProofTiming:
    """What a spot check measured: the steps it replayed and how long that took, and the
    steps the manifest commits to in all."""

    committed_steps: int
    replayed_steps: int
    replay_ms: int

    def __post_init__(self) -> None:
        if self.committed_steps < 0 or self.replayed_steps < 0 or self.replay_ms < 0:
            raise ValueError("proof timing cannot be negative")

    @property
    def step_ms(self) -> float | None:
        """The measured time of one step, or None when nothing was replayed."""
        if self.replayed_steps == 0:
            return None
        return self.replay_ms / self.replayed_steps


def proof_bound_ms(
    timing: ProofTiming, *, gpus: int, slack: float, allowance_ms: int
) -> int | None:
    """The most GPU milliseconds the proof backs (None: the proof timed nothing, no bound)."""
    step_ms = timing.step_ms
    if step_ms is None:
        return None
    per_gpu = timing.committed_steps * step_ms * slack + allowance_ms
    return math.ceil(per_gpu * max(gpus, 1))
