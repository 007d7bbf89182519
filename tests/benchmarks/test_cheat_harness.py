"""The cheating provider's bent harness (benchmarks/cheat_harness.py), without the loop.

`proofnet bench cheat --end-to-end` trusts that each bent library writes the proof its
strategy names, through the same bootstrap the worker runs (`pot.launch`): the honest
control must write the very proof the network's own library writes (same root), and each
cheat the departure it claims, or an end-to-end "caught" would be about something else.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cheat_harness import STRATEGIES, faked, install_bent_library
from demos.job import TRAINER_PY
from pot import launch
from pot.env import PYTHON_LIB
from pot.manifest import Manifest

NONCE = bytes(range(16)).hex()
ARGS = [
    "train",
    "--trainer",
    "mlp:MLPTrainer",
    "--steps",
    "100",
    "--dataset-size",
    "256",
    "--batch-size",
    "32",
    "--k",
    "5",
    "--seed",
    "7",
    "--nonce",
    NONCE,
    "--config",
    json.dumps({"hidden": 16, "lr": "0.05"}),
]


def train(lib: Path, work: Path, *extra: str) -> Manifest:
    """`python -m pot train` as the worker launches it, from library `lib`."""
    code = work / "code"
    code.mkdir(parents=True)
    (code / "mlp.py").write_text(TRAINER_PY)
    done = subprocess.run(
        [*launch.harness_argv(sys.executable, *ARGS, *extra), "--job-dir", str(work / "job")],
        cwd=code,
        env={PYTHON_LIB: str(lib), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return Manifest.load(work / "job" / "pot")


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    root = tmp_path_factory.mktemp("libs")
    lib = launch.install(root / "honest")
    return lib, train(lib, tmp_path_factory.mktemp("honest"))


def bent(honest: tuple[Path, Manifest], tmp_path: Path, strategy: str) -> Manifest:
    lib = install_bent_library(honest[0], tmp_path / "libs", strategy)
    return train(lib, tmp_path / "run")


def test_the_honest_control_writes_the_networks_own_proof(
    honest: tuple[Path, Manifest], tmp_path: Path
) -> None:
    assert bent(honest, tmp_path, "honest_control").root == honest[1].root


@pytest.mark.parametrize(
    ("strategy", "segments"), [("zero_step_proof", 0), ("truncated_schedule", 10)]
)
def test_schedule_cheats_commit_fewer_segments(
    honest: tuple[Path, Manifest], tmp_path: Path, strategy: str, segments: int
) -> None:
    assert bent(honest, tmp_path, strategy).segments == segments


def test_faked_segments_commit_small_norms_there_and_the_honest_ones_elsewhere(
    honest: tuple[Path, Manifest], tmp_path: Path
) -> None:
    proof = bent(honest, tmp_path, "faked_segments_f0.25_small_norms")
    fakes = faked(0.25, 20)
    assert 1 not in fakes and len(fakes) == 5
    first_fake = min(fakes)
    # Identical up to the first fake, then every faked segment's committed norm is tiny.
    assert proof.leaves[:first_fake] == honest[1].leaves[:first_fake]
    for s in fakes:
        assert float(proof.leaves[s].update_norm) < 1e-3 < float(honest[1].leaves[s].update_norm)


@pytest.mark.parametrize(
    "strategy", ["wrong_learning_rate", "smaller_model", "checkpoints_from_another_job"]
)
def test_bent_training_commits_another_proof_of_the_full_schedule(
    honest: tuple[Path, Manifest], tmp_path: Path, strategy: str
) -> None:
    proof = bent(honest, tmp_path, strategy)
    assert proof.segments == 20 and proof.root != honest[1].root


def test_an_unknown_strategy_is_refused(honest: tuple[Path, Manifest], tmp_path: Path) -> None:
    assert "honest_control" in STRATEGIES
    with pytest.raises(ValueError, match="unknown strategy"):
        install_bent_library(honest[0], tmp_path, "idle")


def test_the_forged_resume_commits_a_history_of_its_own_up_to_the_handed_checkpoint(
    honest: tuple[Path, Manifest], tmp_path: Path
) -> None:
    """Handed checkpoint 10 of a lost run, the honest library keeps the prefix's leaves
    0..10; the forged resume (`resume_from_forged_checkpoint`) commits others from leaf 1."""
    lost = tmp_path / "lost"
    train(honest[0], lost)
    handed = ("--resume-from", str(lost / "job" / "pot"), "--resume-at", "10")
    kept = train(honest[0], tmp_path / "kept", *handed)
    assert kept.leaves[:11] == honest[1].leaves[:11]
    lib = install_bent_library(honest[0], tmp_path / "libs", "resume_from_forged_checkpoint")
    forged = train(lib, tmp_path / "forged", *handed)
    assert forged.segments == 20 and forged.leaves[1] != honest[1].leaves[1]
