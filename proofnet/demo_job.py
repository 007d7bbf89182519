"""The demo's training job: a local git repository with the numpy MLP and its replay entry
point, committed on the fly, and the job spec that pins that commit.

The repository holds `train.py` (runs `worker.pot.examples.numpy_mlp`), `proofnet_replay.py`
(the oracle's spot-check entry point, `oracle.spotcheck`) and the proof-of-training package
they import (standard library + numpy only), so a worker's process runtime and an oracle's
replay both run it with nothing but python3 and numpy. The spec names it by an https URL
(what a spec must carry); workers and oracles are pointed at the local path with git's
`insteadOf` rewrite.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_URL = "https://git.proofnet.demo/numpy-mlp.git"
URL_PREFIX = "https://git.proofnet.demo/"
# The process runtime runs jobs on the host and ignores the image; the spec still pins one
# by digest, as every spec must. (A container runtime would need this digest to exist.)
IMAGE = "proofnet/demo-numpy@sha256:" + hashlib.sha256(b"proofnet demo image").hexdigest()
SEED = 20_240_601
STEPS = 40
STEPS_PER_CHECKPOINT = 10
PRICE = 2_500_000  # NTX base units the provider is paid (fixed price)
BUDGET = 3_000_000  # what the escrow locks; the rest goes back to the submitter

TRAIN_PY = '''"""numpy MLP training with proof of training (worker.pot.examples.numpy_mlp)."""
import sys

from worker.pot.examples.numpy_mlp import main

sys.exit(main(sys.argv[1:]))
'''
REPLAY_PY = '''"""The oracle's replay entry point: make_trainer(job_env, commands)."""
from worker.pot.examples.numpy_mlp import make_trainer  # noqa: F401
'''
_SOURCE = Path(__file__).resolve().parents[1]


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

    def git_env(self) -> dict[str, str]:
        """Environment that makes git (an oracle's repo cache) fetch REPO_URL from here."""
        return {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": f"url.file://{self.root}/.insteadOf",
            "GIT_CONFIG_VALUE_0": URL_PREFIX,
        }


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


def vendor_pot_library(repo: Path) -> None:
    """Copy the proof-of-training library (numpy only) into a model repository, as a
    training repository vendors it, so its jobs run in images without proofnet installed."""
    for rel in ("proofnet/__init__.py", "worker/__init__.py"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("")
    messages = repo / "proofnet" / "messages"
    messages.mkdir()
    for name in ("__init__.py", "canonical.py", "merkle.py"):
        shutil.copy(_SOURCE / "proofnet" / "messages" / name, messages / name)
    shutil.copytree(
        _SOURCE / "worker" / "pot",
        repo / "worker" / "pot",
        ignore=shutil.ignore_patterns("__pycache__", "torch_adapter.py"),
    )


def commit_repo(root: Path, name: str, files: dict[str, str], message: str) -> FixtureRepo:
    """A fresh repository `root/name` (served as URL_PREFIX + name) holding the vendored
    proof-of-training library and `files`, committed."""
    repo = root / name
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    _git(repo, "init", "--quiet")
    vendor_pot_library(repo)
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
        {"train.py": TRAIN_PY, "proofnet_replay.py": REPLAY_PY},
        "numpy MLP with proof of training",
    )


def job_spec(commit: str, *, seed: int = SEED) -> dict[str, Any]:
    """The demo's job: CPU only, a fixed price, proof files declared as results."""
    return {
        "model": {"repo_url": REPO_URL, "commit": commit},
        "framework": "numpy",
        "image": IMAGE,
        "commands": [
            ["python3", "train.py", "train", "--steps", str(STEPS), "--examples", "512"],
        ],
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
            "steps_per_checkpoint": STEPS_PER_CHECKPOINT,
            "spot_checks": 2,
            "tolerance_ppm": 0,
        },
    }
