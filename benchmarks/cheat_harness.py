"""A cheating provider's bent harness, for `proofnet bench cheat --end-to-end`.

A provider owns its machine: it can run any harness it likes in place of the network's.
This module is what a cheating provider puts there. `install_bent_library` copies the
worker's own `pot` into a directory of its own and rebinds `pot.cli.train` (what `python -m
pot train` calls) to `bent_train` under one strategy of the cheat table; the worker then
uploads and attests whatever proof that run wrote, as it would an honest one. Nothing in
the product reads this module: the cheating worker (`benchmarks.cheat_provider`) points its
`worker.harness.provide_library` here.

Copied into the job's environment as a top-level module (`proofnet_cheat`), it imports only
the standard library, numpy (through the trainer) and `pot`.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The strategies the bent harness plays (the cheat table's names).
STRATEGIES = (
    "honest_control",
    "zero_step_proof",
    "truncated_schedule",
    "faked_segments_f0.1_small_norms",
    "faked_segments_f0.25_small_norms",
    "faked_segments_f0.5_small_norms",
    "wrong_learning_rate",
    "smaller_model",
    "checkpoints_from_another_job",
)
# Played by `benchmarks.cheat_e2e_more`'s phases, not one provider each in the main loop:
# the rate-card provider that holds its lease idle before it trains (an idle lease, billed).
IDLE_LEASE = "idle_lease_on_rate_card_job_idle_100s"
IDLE_S = 100.0  # beyond the metering bound of this job (60 s allowance + ~10 s of steps)
# A long job's first provider, lost after checkpoint `LOST_AT` (it trains honestly that far,
# marks `LOST_MARK` beside its proof and hangs until stopped), and the provider resuming it
# from a history of its own instead of the checkpoint the API hands it.
LOST_ATTEMPT = "lost_attempt"
LOST_AT = 10
LOST_MARK = "lost-at-checkpoint"
FORGED_RESUME = "resume_from_forged_checkpoint"
MORE_STRATEGIES = (IDLE_LEASE, LOST_ATTEMPT, FORGED_RESUME)
MODULE = "proofnet_cheat"
STRATEGY = "honest_control"  # rewritten in the installed copy


def faked(fraction: float, segments: int) -> frozenset[int]:
    """A `fraction` of the segments (at least one) spread over the run, segment 1 spared:
    every oracle replays it (the early check), and a cheater knows it."""
    m = max(1, min(segments - 1, round(fraction * segments)))
    return frozenset(2 + (i * (segments - 1)) // m for i in range(m))


def _forge(
    trainer: Any,
    ctx: Any,
    pot_dir: Path,
    *,
    steps: int,
    fakes: frozenset[int],
    hang_after: int | None = None,
) -> Any:
    """The provider's own loop over the library's recorder: `steps` steps, the segments in
    `fakes` not trained (the weights nudged a little so the committed norm stays small);
    after committing checkpoint `hang_after`, the run marks it and hangs (a lost machine)."""
    import numpy as np

    from pot.recorder import ProofOfTraining

    schedule = ctx.schedule
    k = schedule.steps_per_checkpoint
    recorder = ProofOfTraining(pot_dir, steps_per_checkpoint=k, data_seed=ctx.data_seed)
    recorder.start(trainer.state())
    sampler = schedule.sampler(ctx.data_seed)
    loss = 1.0
    for step in range(1, steps + 1):
        segment = (step - 1) // k + 1
        indices = sampler.indices(step)
        if segment in fakes:
            if step % k == 0:
                params = getattr(trainer, "params", {})
                for value in params.values():
                    if isinstance(value, np.ndarray):
                        value += 1e-6
                        break
        else:
            loss = trainer.train_step(step, indices)
        if recorder.record_step(indices, loss):
            recorder.commit(trainer.state())
            if hang_after is not None and step == hang_after * k:
                import time

                (pot_dir.parent / LOST_MARK).write_text(str(hang_after))
                time.sleep(3600)
    return recorder.finish(trainer.state())


def bent_train(honest: Callable[..., Any], strategy: str) -> Callable[..., Any]:
    """`pot.harness.train` as the strategy bends it."""

    def train(trainer: Any, ctx: Any, pot_dir: Path) -> Any:
        from pot.trainer import build_trainer

        pot_dir = Path(pot_dir)
        if strategy == LOST_ATTEMPT:
            steps = ctx.schedule.total_steps
            return _forge(trainer, ctx, pot_dir, steps=steps, fakes=frozenset(), hang_after=LOST_AT)
        if strategy == IDLE_LEASE:
            import time

            time.sleep(IDLE_S)  # the GPU held, idle, on the lease's clock
            return honest(trainer, ctx, pot_dir)
        total = ctx.schedule.total_steps
        segments = ctx.schedule.segments
        if strategy == "zero_step_proof":
            return _forge(trainer, ctx, pot_dir, steps=0, fakes=frozenset())
        if strategy == "truncated_schedule":
            return _forge(trainer, ctx, pot_dir, steps=total // 2, fakes=frozenset())
        if strategy.startswith("faked_segments_f"):
            fraction = float(strategy.removeprefix("faked_segments_f").split("_")[0])
            return _forge(trainer, ctx, pot_dir, steps=total, fakes=faked(fraction, segments))
        if strategy in ("wrong_learning_rate", "smaller_model"):
            config = dict(ctx.config)
            if strategy == "wrong_learning_rate":
                config["lr"] = str(float(config.get("lr", "0.05")) * 4)
            else:
                config["hidden"] = max(1, int(config.get("hidden", 16)) // 4)
            bent = dataclasses.replace(ctx, config=config)
            return honest(build_trainer(type(trainer), bent), bent, pot_dir)
        if strategy == "checkpoints_from_another_job":
            # Another job's proof (its seed and data order), attested as this one's.
            other = dataclasses.replace(ctx, job_seed=ctx.job_seed + 1, data_seed=ctx.data_seed + 1)
            return honest(build_trainer(type(trainer), other), other, pot_dir)
        return honest(trainer, ctx, pot_dir)

    return train


def bent_resume(honest: Callable[..., Any], strategy: str) -> Callable[..., Any]:
    """`pot.harness.resume` as the strategy bends it: `FORGED_RESUME` ignores the handed
    checkpoint and commits a history of its own up to it (segments 1..at not trained), then
    trains on from its own weights."""

    def resume(trainer: Any, ctx: Any, pot_dir: Path, prefix_dir: Path, *, at: int) -> Any:
        if strategy == FORGED_RESUME:
            fakes = frozenset(range(1, at + 1))
            return _forge(trainer, ctx, Path(pot_dir), steps=ctx.schedule.total_steps, fakes=fakes)
        return honest(trainer, ctx, pot_dir, prefix_dir, at=at)

    return resume


def install_bent_library(honest_lib: Path, root: Path, strategy: str) -> Path:
    """A copy of the worker's harness library (`honest_lib`, holding `pot/`) under `root`
    whose `python -m pot train` plays `strategy`; the directory to put on PYTHONPATH."""
    if strategy not in (*STRATEGIES, *MORE_STRATEGIES):
        raise ValueError(f"unknown strategy {strategy!r}")
    lib = Path(root) / f"bent-{strategy}"
    if lib.exists():
        for p in [lib, *lib.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(lib)
    shutil.copytree(honest_lib, lib)
    for p in [lib, *lib.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    source = Path(__file__).read_text()
    (lib / f"{MODULE}.py").write_text(f"{source}\nSTRATEGY = {strategy!r}\n")
    cli = lib / "pot" / "cli.py"
    cli.write_text(
        cli.read_text()
        + f"\n\nimport {MODULE} as _cheat  # the provider's bent harness\n\n"
        + "train = _cheat.bent_train(train, _cheat.STRATEGY)\n"
        + "resume = _cheat.bent_resume(resume, _cheat.STRATEGY)\n"
    )
    return lib
