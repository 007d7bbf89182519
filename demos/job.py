"""The demo's training job: a local git repository holding the trainer, committed on the
fly, and the job spec that pins that commit and names the trainer.

The repository holds `mlp.py`, whose `MLPTrainer` is the numpy MLP of `pot.examples` (a
real repository holds its own trainer there: `proofnet job init`). Nothing else: the
worker trains it with the network's harness and an oracle replays it with the same, both
from their own copy of `pot`, so the job needs nothing but python3 and numpy. The spec
names the repository by an https URL (what a spec must carry); workers and oracles are
pointed at the local path with git's `insteadOf` rewrite.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_URL = "https://git.demos.demo/numpy-mlp.git"
URL_PREFIX = "https://git.demos.demo/"
# The process runtime runs jobs on the host and ignores the image; the spec still pins one
# by digest, as every spec must. (A container runtime would need this digest to exist.)
IMAGE = "proofnet/demo-numpy@sha256:" + hashlib.sha256(b"proofnet demo image").hexdigest()
SEED = 20_240_601
STEPS = 40
STEPS_PER_CHECKPOINT = 10
PRICE = 2_500_000  # NTX base units the provider is paid (fixed price)
BUDGET = 3_000_000  # what the escrow locks; the rest goes back to the submitter

HIDDEN = 64
BATCH_SIZE = 64
EXAMPLES = 512

TRAINER_PY = '''"""The demo job's trainer: the numpy MLP of pot's examples, trained by the harness."""

from pot.examples.numpy_mlp import MLPTrainer

__all__ = ["MLPTrainer"]
'''


class DemoJobError(RuntimeError):
    """The fixture repository could not be created (git missing or failing)."""


@dataclass(frozen=True)
class FixtureRepo:
    path: Path  # the repository, e.g. `numpy-mlp.git` under `root`
    root: Path  # what URL_PREFIX stands for
    commit: str

    @property
    def rewrite(self) -> str:
        """`--repo-rewrite` value for `proofnet worker run`."""
        return f"{URL_PREFIX}=file://{self.root}/"


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "proofnet demo",
        "GIT_AUTHOR_EMAIL": "demo@proofnet.local",
        "GIT_COMMITTER_NAME": "proofnet demo",
        "GIT_COMMITTER_EMAIL": "demo@proofnet.local",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DemoJobError(f"git {args[0]} failed: {exc}") from exc
    if done.returncode != 0:
        raise DemoJobError(f"git {args[0]} failed: {done.stderr.strip()[:500]}")
    return done.stdout.strip()


def commit_repo(root: Path, name: str, files: dict[str, str], message: str) -> FixtureRepo:
    """A fresh repository `root/name` (served as URL_PREFIX + name) holding `files`,
    committed."""
    repo = root / name
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    _git(repo, "init", "--quiet")
    for rel, text in files.items():
        (repo / rel).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "-m", message)
    return FixtureRepo(path=repo, root=root, commit=_git(repo, "rev-parse", "HEAD"))


def create_repo(root: Path) -> FixtureRepo:
    """Write and commit the training code under `root/numpy-mlp.git`."""
    return commit_repo(
        root,
        "numpy-mlp.git",
        {"mlp.py": TRAINER_PY},
        "numpy MLP with proof of training",
    )


def job_spec(commit: str, *, seed: int = SEED) -> dict[str, Any]:
    """The demo's job: CPU only, a fixed price, proof files declared as results."""
    return {
        "model": {"repo_url": REPO_URL, "commit": commit},
        "framework": "numpy",
        "image": IMAGE,
        "commands": [],
        "resources": {
            "gpus": 0,
            "gpu_memory_mb": 0,
            "cpus": 1,
            "ram_mb": 1024,
            "disk_mb": 200,
            "max_duration_s": 300,
        },
        "results": [
            {"path": "results/metrics.json", "kind": "json"},
            {"path": "results/model.weights", "kind": "model"},
            {"path": "pot/**", "kind": "model"},
        ],
        "pricing": {"kind": "fixed", "amount": PRICE},
        "seed": seed,
        "proof": {
            "trainer": "mlp:MLPTrainer",
            "config": {"hidden": HIDDEN, "lr": "0.05"},
            "schedule": {"steps": STEPS, "dataset_size": EXAMPLES, "batch_size": BATCH_SIZE},
            "steps_per_checkpoint": STEPS_PER_CHECKPOINT,
            "spot_checks": 2,
            "tolerance_ppm": 0,
        },
    }


class DemoError(RuntimeError):
    """A step of the demo failed; `role` names the process to blame, when there is one."""

    def __init__(self, message: str, role: str = "") -> None:
        super().__init__(message)
        self.role = role
