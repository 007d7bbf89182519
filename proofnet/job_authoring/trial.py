"""`proofnet job try`: train a spec's trainer here with the harness, then replay segments.

What a provider and a verifier would run, on this machine's Python: this installation's
copy of `pot` (installed into the run's directory and run through its bootstrap, as the
worker does), the spec's job environment under a fresh nonce, the repository as the code
directory. The spec's `commands` and data shards are not run or fetched here. A trainer
that does not replay bit for bit on the machine that trained it will not replay on a
verifier either.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pot import launch
from proofnet.messages.jobspec import JobSpec


class TrialError(Exception):
    """The trial could not run, or the trainer failed; the message says where."""


@dataclass(frozen=True)
class TrialReport:
    job_dir: Path
    pot_root: str
    segments: int
    steps: int
    replayed: tuple[int, ...]
    replay_passed: bool
    from_seed: bool  # checkpoint 0 is what the trainer builds from the seed
    train_seconds: float
    results: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        return self.replay_passed and self.from_seed


def _run(
    argv: tuple[str, ...], cwd: Path, environ: dict[str, str], timeout_s: float
) -> dict[str, Any]:
    try:
        done = subprocess.run(
            list(argv),
            cwd=cwd,
            env=environ,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise TrialError(f"`pot {argv[3]}` ran past {timeout_s:.0f}s") from exc
    except OSError as exc:
        raise TrialError(f"cannot run {argv[0]}: {exc}") from exc
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    report: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    if done.returncode not in (0, 1) or not report:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        message = report.get("message") or f"exit code {done.returncode}"
        raise TrialError(f"`pot {argv[3]}` failed: {message}\n{tail}".rstrip())
    return report


def try_job(
    spec: JobSpec,
    repo_dir: Path,
    work_dir: Path,
    *,
    python: str = sys.executable,
    timeout_s: float | None = None,
) -> TrialReport:
    """Train `spec` from `repo_dir` into a new directory under `work_dir`, then replay its
    first and last segments."""
    if spec.proof.trainer is None or spec.schedule is None:
        raise TrialError("the spec names no proof.trainer and proof.schedule: nothing to try")
    timeout = float(timeout_s or spec.resources.max_duration_s)
    job_dir = Path(work_dir) / (time.strftime("run-%Y%m%d-%H%M%S-") + secrets.token_hex(2))
    job_dir.mkdir(parents=True)
    lib = launch.install(Path(work_dir) / ".harness")
    environ = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(job_dir),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(lib),
        launch.PYTHON_LIB: str(lib),
        **spec.job_env(job_dir, secrets.token_bytes(32)).to_environ(),
    }
    code = ("--code-dir", str(Path(repo_dir).resolve()))
    started = time.monotonic()
    trained = _run(launch.harness_argv(python, "train", *code), repo_dir, environ, timeout)
    seconds = time.monotonic() - started
    segments = int(trained["segments"])
    wanted = sorted({1, segments})
    replay = _run(
        launch.harness_argv(
            python,
            "replay",
            *code,
            "--root",
            str(trained["pot_root"]),
            "--segments",
            ",".join(map(str, wanted)),
        ),
        repo_dir,
        environ,
        timeout,
    )
    manifest = json.loads((job_dir / "pot" / "manifest.json").read_bytes())
    return TrialReport(
        job_dir=job_dir,
        pot_root=str(trained["pot_root"]),
        segments=segments,
        steps=int(trained["steps"]),
        replayed=tuple(wanted),
        replay_passed=replay.get("status") == "passed",
        from_seed=replay.get("initial_weights_hash") == manifest["leaves"][0]["weights"],
        train_seconds=seconds,
        results=trained.get("results"),
    )
