"""`python -m pot train|replay|check|schedule`: the harness's command line.

The worker runs `train` as a job's training command and a verifier runs `replay`, both with
the job's environment (`pot.env`: seed, nonce, schedule, trainer, config; a relay stage's
unit variables) and in the job's work dir, where the repository is checked out. Flags
override the environment, so a job's author can run the same thing on their machine:

    python -m pot train --trainer train:MLPTrainer --steps 40 --dataset-size 512 \\
        --batch-size 64 --k 10 --seed 7 --nonce 000102030405060708090a0b0c0d0e0f \\
        --job-dir /tmp/run
    python -m pot replay --job-dir /tmp/run --root <hex> --segments 1,4 (same flags)
    python -m pot replay-node --root <hex> --segments 2 (same flags): a cluster node's
        proof (`pot.cluster`), every rank's contribution recomputed; reports, judges nothing
    python -m pot check --job-dir /tmp/run (same flags): does the proof follow the schedule?
    python -m pot schedule --epochs 3 --dataset-size 60000 --batch-size 64 --k 500

The last line of stdout is one JSON object. Exit codes: 0 done (a replay that matched),
1 a replay that did not match, 2 a usage or environment error, 3 a proof that cannot be
replayed or does not follow the schedule, 4 the trainer failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from pot import env
from pot.conformance import check_conformance
from pot.harness import replay, resume, train
from pot.manifest import MANIFEST_NAME, PREFIX_NAME, Manifest, ProofError
from pot.recorder import POT_SUBDIR
from pot.schedule import ScheduleError, derive_schedule
from pot.trainer import TrainContext, TrainerError, build_trainer, load_trainer_class

EXIT_MISMATCH = 1
EXIT_USAGE = 2
EXIT_PROOF = 3
EXIT_TRAINER = 4


class UsageError(Exception):
    """Bad flags or environment: exit 2 with one line."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pot", description="proofnet's proof-of-training harness"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def job_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--job-dir", type=Path, help=f"work dir (default ${env.JOB_DIR}, or .)")
        p.add_argument("--code-dir", type=Path, help="where the trainer's module is (default .)")
        p.add_argument("--trainer", help=f"module:Class (default ${env.POT_TRAINER})")
        p.add_argument("--config", help=f"trainer config, a JSON object (${env.POT_CONFIG})")
        p.add_argument("--seed", type=int, help=f"job seed (default ${env.JOB_SEED})")
        p.add_argument("--nonce", help=f"claim nonce, hex (default ${env.JOB_NONCE})")
        schedule_flags(p)

    def schedule_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--steps", type=int, help=f"total steps (default ${env.POT_STEPS})")
        p.add_argument("--epochs", type=int, help="or: passes over the data set")
        p.add_argument("--dataset-size", type=int, help=f"(default ${env.POT_DATASET_SIZE})")
        p.add_argument("--batch-size", type=int, help=f"(default ${env.POT_BATCH_SIZE})")
        p.add_argument("--k", type=int, help=f"steps per checkpoint (default ${env.POT_K})")

    trn = sub.add_parser("train", help="train the schedule, recording the proof")
    job_flags(trn)
    trn.add_argument(
        "--resume-from",
        type=Path,
        help="a lost run's uploaded proof files (prefix.json, the checkpoint's files)",
    )
    trn.add_argument("--resume-at", type=int, help="the checkpoint of the prefix to resume at")
    rep = sub.add_parser("replay", help="replay committed segments and compare")
    job_flags(rep)
    rep.add_argument("--root", required=True, help="the attested proof root (hex)")
    rep.add_argument("--segments", required=True, help="comma-separated, 1-based")
    rep.add_argument("--pot-dir", type=Path, help="proof files (default <job dir>/pot)")
    rep.add_argument("--tolerance-ppm", type=int, default=0)
    rep.add_argument(
        "--prefix",
        action="store_true",
        help="replay from the committed prefix (prefix.json) of a run still training",
    )
    rep.add_argument(
        "--partial",
        action="store_true",
        help="the manifest may commit the schedule's first segments only (a stopped run)",
    )
    node = sub.add_parser("replay-node", help="replay segments of a cluster node's proof")
    job_flags(node)
    node.add_argument("--root", required=True, help="the node's attested proof root (hex)")
    node.add_argument("--segments", required=True, help="comma-separated, 1-based")
    node.add_argument("--pot-dir", type=Path, help="proof files (default <job dir>/pot)")

    chk = sub.add_parser("check", help="does a proof commit the declared schedule?")
    job_flags(chk)
    chk.add_argument("--pot-dir", type=Path, help="proof files (default <job dir>/pot)")
    schedule_flags(sub.add_parser("schedule", help="the schedule that flags declare"))
    return parser


def _job_env(args: argparse.Namespace, environ: Mapping[str, str]) -> env.JobEnv:
    base = dict(environ)
    if args.epochs is not None:
        if args.steps is not None:
            raise UsageError("give --steps or --epochs, not both")
        if args.dataset_size is None or args.batch_size is None:
            raise UsageError("--epochs needs --dataset-size and --batch-size")
        args.steps = args.epochs * (args.dataset_size // max(1, args.batch_size))
    overrides = {
        env.JOB_DIR: args.job_dir,
        env.JOB_SEED: args.seed,
        env.JOB_NONCE: args.nonce,
        env.POT_K: args.k,
        env.POT_STEPS: args.steps,
        env.POT_DATASET_SIZE: args.dataset_size,
        env.POT_BATCH_SIZE: args.batch_size,
        env.POT_TRAINER: args.trainer,
        env.POT_CONFIG: args.config,
    }
    base.update({k: str(v) for k, v in overrides.items() if v is not None})
    base.setdefault(env.JOB_DIR, ".")
    try:
        return env.JobEnv.read(base)
    except env.JobEnvError as exc:
        flags = {env.JOB_SEED: "--seed", env.JOB_NONCE: "--nonce", env.POT_K: "--k"}
        text = str(exc)
        for name, flag in flags.items():
            text = text.replace(name, f"{name} ({flag})")
        raise UsageError(text) from exc


def _context(job: env.JobEnv, environ: Mapping[str, str]) -> TrainContext:
    if job.schedule is None:
        raise UsageError(
            f"no schedule: set {env.POT_STEPS}, {env.POT_DATASET_SIZE} and "
            f"{env.POT_BATCH_SIZE} (or --steps/--epochs, --dataset-size, --batch-size)"
        )
    unit = None
    if environ.get(env.UNIT_KIND):
        try:
            unit = env.UnitEnv.read(environ)
        except env.JobEnvError as exc:
            raise UsageError(str(exc)) from exc
    return TrainContext(
        job_dir=job.job_dir,
        job_seed=job.job_seed,
        data_seed=job.data_seed,
        schedule=job.schedule,
        config=dict(job.config),
        unit=unit,
    )


def _segments(text: str) -> list[int]:
    try:
        values = [int(s) for s in text.split(",") if s.strip()]
    except ValueError as exc:
        raise UsageError(f"--segments must be comma-separated integers, got {text!r}") from exc
    if not values:
        raise UsageError("--segments names no segment")
    return values


def _emit(obj: Mapping[str, Any]) -> None:
    print(json.dumps(obj, sort_keys=True), flush=True)


def _run(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if args.command == "schedule":
        try:
            schedule = derive_schedule(
                steps=args.steps,
                epochs=args.epochs,
                dataset_size=args.dataset_size,
                batch_size=args.batch_size,
                steps_per_checkpoint=args.k,
            )
        except (ScheduleError, TypeError) as exc:
            raise UsageError(f"schedule: {exc}") from exc
        _emit(schedule.to_json())
        return 0
    job = _job_env(args, environ)
    ctx = _context(job, environ)
    pot_dir = getattr(args, "pot_dir", None) or job.job_dir / POT_SUBDIR
    if args.command == "check":
        manifest = Manifest.load(pot_dir)
        violation = check_conformance(manifest, ctx.schedule, ctx.data_seed)
        if violation is not None:
            _emit({"status": violation.kind, "message": violation.message})
            return EXIT_PROOF
        _emit({"status": "follows_schedule", "root": manifest.root, **ctx.schedule.to_json()})
        return 0
    if job.trainer is None:
        raise UsageError(f"no trainer: set {env.POT_TRAINER} or --trainer module:Class")
    code_dir = args.code_dir or Path.cwd()
    try:
        cls = load_trainer_class(job.trainer, code_dir)
    except TrainerError as exc:
        raise UsageError(str(exc)) from exc
    trainer = build_trainer(cls, ctx)
    if args.command == "train":
        resumed_at: int | None = args.resume_at
        if args.resume_from is None and resumed_at is None:
            manifest = train(trainer, ctx, pot_dir)
        elif args.resume_from is not None and resumed_at is not None:
            manifest = resume(trainer, ctx, pot_dir, args.resume_from, at=resumed_at)
        else:
            raise UsageError("--resume-from and --resume-at go together")
        finish = getattr(trainer, "finish", None)
        summary = finish() if callable(finish) else None
        _emit(
            {
                "status": "trained",
                "resumed_at": resumed_at,
                "pot_root": manifest.root,
                "segments": manifest.segments,
                "steps": manifest.total_steps,
                "final_loss": manifest.leaves[-1].loss,
                "results": dict(summary) if isinstance(summary, Mapping) else None,
            }
        )
        return 0
    if args.command == "replay-node":
        return _replay_node(trainer, ctx, pot_dir, args)
    report = replay(
        trainer,
        ctx,
        pot_dir,
        root=args.root,
        segments=_segments(args.segments),
        tolerance_ppm=args.tolerance_ppm,
        manifest_name=PREFIX_NAME if args.prefix else MANIFEST_NAME,
        partial=args.partial,
    )
    failures = [r.segment for r in report.failures()]
    _emit(
        {
            "status": "passed" if report.passed else "failed",
            "message": "" if report.passed else f"segments {failures} do not replay",
            **report.to_json(),
        }
    )
    return 0 if report.passed else EXIT_MISMATCH


def _replay_node(
    trainer: object, ctx: TrainContext, pot_dir: Path, args: argparse.Namespace
) -> int:
    """A cluster node's segments; the data order is the cluster's, from the nonces the
    node's proof commits (the oracle checks them against the cluster's leases)."""
    from pot.cluster import cluster_data_seed
    from pot.cluster_harness import ShardTrainer, load_node, replay_node

    if not all(callable(getattr(trainer, name, None)) for name in ("gradient", "apply")):
        raise UsageError("the trainer is not data-parallel (it needs gradient and apply)")
    proof, _ = load_node(pot_dir, root=args.root)
    nonces = [bytes.fromhex(n) for n in proof.nonces]
    ctx = replace(ctx, data_seed=cluster_data_seed(ctx.job_seed, nonces))
    report = replay_node(
        cast(ShardTrainer, trainer), ctx, pot_dir, root=args.root, segments=_segments(args.segments)
    )
    _emit(report.to_json())
    return 0


def main(argv: Sequence[str] | None = None, *, lib: str | None = None) -> int:
    if lib is not None:
        import pot

        here = Path(pot.__file__).resolve().parent.parent
        if here != Path(lib).resolve():
            print(f"error: the harness was imported from {here}, not {lib}", file=sys.stderr)
            return EXIT_USAGE
    args = _parser().parse_args(argv)
    environ = os.environ
    try:
        return _run(args, environ)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        _emit({"status": "usage_error", "message": str(exc)})
        return EXIT_USAGE
    except ProofError as exc:
        print(f"error: proof rejected: {exc}", file=sys.stderr)
        _emit({"status": "proof_error", "message": str(exc)})
        return EXIT_PROOF
    except Exception as exc:  # the job's trainer failed: say so, with its traceback
        traceback.print_exc()
        _emit({"status": "error", "message": f"{type(exc).__name__}: {exc}"[:2000]})
        return EXIT_TRAINER
