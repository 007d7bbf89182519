"""The numpy example's replay entry point: the oracle's spot-check runner rebuilds the trainer
from the job's own `train` command and replays committed segments bit for bit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from oracle.spotcheck import SpotCheckRequest, needed_files
from worker.pot.env import JobEnv
from worker.pot.examples.numpy_mlp import main, make_trainer, train_arguments
from worker.pot.manifest import Manifest

SEED = 77
NONCE = "ab" * 16
K = 5
TRAIN = ["python3", "train.py", "train", "--steps", "20", "--examples", "128", "--hidden", "8"]
REPO = Path(__file__).resolve().parents[2]


def _train(job_dir: Path, argv: list[str]) -> Manifest:
    flags = argv[argv.index("train") + 1 :]
    code = main(
        ["train", "--job-dir", str(job_dir), "--seed", str(SEED), "--nonce", NONCE, "--k", str(K)]
        + flags
    )
    assert code == 0
    return Manifest.load(job_dir / "pot")


def _replay(work: Path, pot: Path, commands: list[list[str]], root: str) -> dict[str, object]:
    """Run `oracle.spotcheck_runner` as the oracle does, on segments 1 and 4."""
    repo = work / "repo"
    repo.mkdir(parents=True)
    (work / "pot").symlink_to(pot)
    (repo / "proofnet_replay.py").write_text(
        "from worker.pot.examples.numpy_mlp import make_trainer  # noqa: F401\n"
    )
    request = SpotCheckRequest(
        job_id="0" * 64,
        repo_url="https://example.test/r.git",
        commit="1" * 40,
        commands=tuple(tuple(c) for c in commands),
        pot_root=root,
        job_seed=SEED,
        nonce=NONCE,
        steps_per_checkpoint=K,
        segments=(1, 4),
        tolerance_ppm=0,
    )
    done = subprocess.run(
        [sys.executable, "-m", "oracle.spotcheck_runner", str(work)],
        input=request.to_json(),
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        timeout=120,
    )
    report: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return report


def test_the_jobs_own_flags_rebuild_its_trainer(tmp_path: Path) -> None:
    job = tmp_path / "job"
    manifest = _train(job, TRAIN)
    needed = set(needed_files((1, 4)))
    assert "manifest.json" not in needed and needed <= {p.name for p in (job / "pot").iterdir()}
    report = _replay(tmp_path / "honest", job / "pot", [["pip", "list"], TRAIN], manifest.root)
    assert report["status"] == "passed", report


def test_other_hyperparameters_do_not_replay(tmp_path: Path) -> None:
    job = tmp_path / "job"
    manifest = _train(job, TRAIN)
    # The worker claims it ran the spec's command but trained with another learning rate.
    lazy = tmp_path / "lazy"
    lazy_manifest = _train(lazy, [*TRAIN, "--lr", "0.3"])
    assert lazy_manifest.root != manifest.root
    report = _replay(tmp_path / "check", lazy / "pot", [TRAIN], lazy_manifest.root)
    assert report["status"] == "failed", report


def test_commands_without_a_train_step_are_refused(tmp_path: Path) -> None:
    job = JobEnv(job_dir=tmp_path, job_seed=1, nonce=b"\0" * 16, steps_per_checkpoint=K)
    with pytest.raises(ValueError, match="no `train`"):
        make_trainer(job, [["python3", "other.py"]])
    with pytest.raises(ValueError, match="cannot parse"):
        train_arguments([["python3", "train.py", "train", "--bogus"]])
    trainer, indices = make_trainer(job, [TRAIN])
    assert trainer.cfg.hidden == 8 and trainer.cfg.examples == 128
    assert len(indices(1)) == trainer.cfg.batch_size
