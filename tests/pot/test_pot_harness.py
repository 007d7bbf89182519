"""The harness trains a job's trainer and replays its segments through the same code path;
replays of an honest run match bit for bit, anything else is caught; the harness that runs
is the network's even when the job's repository ships a `pot` of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pot_fixtures import (
    CONFIG,
    NONCE,
    SCHEDULE,
    SEED,
    forge,
    new_trainer,
    replay,
    train_honest,
)

from pot import Manifest, ProofError, harness, launch
from pot.manifest import rng_path, weights_path
from pot.merkle import verify_inclusion
from pot.schedule import Schedule
from pot.tensors import read_tensors, tensors_hash, write_tensors
from pot.trainer import TrainContext, TrainerError, TrainingState, load_trainer_class


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    job_dir = tmp_path_factory.mktemp("honest")
    return job_dir / "pot", train_honest(job_dir)


def copy_proof(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


# --- training -----------------------------------------------------------------------------


def test_training_commits_every_segment_of_the_schedule(honest: tuple[Path, Manifest]) -> None:
    pot_dir, manifest = honest
    assert manifest.segments == SCHEDULE.segments == 11
    assert [leaf.step for leaf in manifest.leaves] == [SCHEDULE.leaf_step(i) for i in range(12)]
    assert manifest.total_steps == 520
    assert Manifest.load(pot_dir, expected_root=manifest.root) == manifest
    tree = manifest.tree
    for i, leaf in enumerate(manifest.leaves):
        assert verify_inclusion(leaf.encode(), manifest.proof(i), tree.root)
    # Training reduced the loss.
    assert float(manifest.leaves[-1].loss or "nan") < float(manifest.leaves[1].loss or "nan")


def test_same_job_same_root_other_nonce_other_root(
    honest: tuple[Path, Manifest], tmp_path: Path
) -> None:
    assert train_honest(tmp_path / "again").root == honest[1].root
    ctx = TrainContext(
        job_dir=tmp_path / "other",
        job_seed=SEED,
        data_seed=42,  # another data order
        schedule=SCHEDULE,
        config=CONFIG,
    )
    other = harness.train(new_trainer(tmp_path / "other"), ctx, tmp_path / "other" / "pot")
    assert other.root != honest[1].root


# --- replay -------------------------------------------------------------------------------


@pytest.mark.parametrize("segment", [1, 6, 11])
def test_honest_replay_matches_bitwise(honest: tuple[Path, Manifest], segment: int) -> None:
    pot_dir, manifest = honest
    report = replay(pot_dir, manifest, [segment])
    (result,) = report.results
    assert result.bitwise_match and result.distance == 0.0
    assert result.loss == manifest.leaves[segment].loss
    assert result.norm_consistent()
    assert report.passed
    # What the trainer builds from the job seed is checkpoint 0: it trained from scratch.
    assert report.initial_weights_hash == manifest.leaves[0].weights


def test_other_hyperparameters_do_not_replay(honest: tuple[Path, Manifest]) -> None:
    """The replay is the job's trainer at the spec's config; a run at another learning rate
    is not the job, however consistent its own commitments."""
    pot_dir, manifest = honest
    report = replay(pot_dir, manifest, [2], config={**CONFIG, "lr": "0.07"})
    assert not report.passed and report.failures()[0].distance > 1e-6


def test_faked_segment_is_caught_and_its_neighbours_pass(tmp_path: Path) -> None:
    """Segment 3 was not trained (weights nudged, tiny committed norm)."""
    manifest = forge(tmp_path, faked={3})
    report = replay(tmp_path / "pot", manifest, [2, 3, 4])
    assert [r.segment for r in report.failures()] == [3]
    faked = report.results[1]
    assert not faked.bitwise_match and faked.distance > 1e-4
    assert faked.norm_consistent()  # the tiny norm is true: it just is not training


def test_lying_about_an_update_norm_is_visible(
    honest: tuple[Path, Manifest], tmp_path: Path
) -> None:
    pot_dir = copy_proof(honest[0], tmp_path / "pot")
    manifest = honest[1]
    leaves = list(manifest.leaves)
    leaves[4] = type(leaves[4])(**{**leaves[4].to_json(), "update_norm": "0.001"})
    forged = Manifest(manifest.steps_per_checkpoint, manifest.data_seed, tuple(leaves))
    forged.save(pot_dir)
    report = replay(pot_dir, forged, [4])
    assert report.results[0].bitwise_match  # the weights are honest...
    assert not report.results[0].norm_consistent() and not report.passed  # ...the norm is not


def test_tampered_or_missing_files_are_refused(
    honest: tuple[Path, Manifest], tmp_path: Path
) -> None:
    pot_dir = copy_proof(honest[0], tmp_path / "pot")
    manifest = honest[1]
    ctx = TrainContext(tmp_path, SEED, 0, SCHEDULE, CONFIG)
    with pytest.raises(ProofError, match="attested root"):
        harness.replay(new_trainer(tmp_path), ctx, pot_dir, root="00" * 32, segments=[1])

    arrays, _ = read_tensors(weights_path(pot_dir, 2))
    arrays["b1"] = arrays["b1"] + 1.0
    write_tensors(weights_path(pot_dir, 2), arrays)
    with pytest.raises(ProofError, match="weights file does not match"):
        replay(pot_dir, manifest, [3])

    rng = json.loads(rng_path(pot_dir, 4).read_bytes())
    rng["noise"]["state"]["state"] += 1
    rng_path(pot_dir, 4).write_text(json.dumps(rng))
    with pytest.raises(ProofError, match="optimizer/RNG"):
        replay(pot_dir, manifest, [5])

    weights_path(pot_dir, 8).unlink()
    with pytest.raises(ProofError, match="checkpoint 8"):
        replay(pot_dir, manifest, [8])
    with pytest.raises(ProofError, match="within 1..11"):
        replay(pot_dir, manifest, [12])


def test_a_replay_follows_the_schedule_not_the_manifest(
    honest: tuple[Path, Manifest],
) -> None:
    """A replay runs the steps the spec's schedule gives a segment: a proof of another
    schedule cannot be replayed as this job's."""
    pot_dir, manifest = honest
    longer = Schedule(total_steps=600, steps_per_checkpoint=50, dataset_size=512, batch_size=32)
    with pytest.raises(ProofError, match="12"):
        replay(pot_dir, manifest, [1], schedule=longer)


def test_a_checkpoint_that_is_not_the_jobs_model_is_a_proof_error(
    honest: tuple[Path, Manifest],
) -> None:
    pot_dir, manifest = honest
    with pytest.raises(ProofError, match="does not load into the job's trainer"):
        replay(pot_dir, manifest, [2], config={"hidden": 8, "features": 16})


def test_a_model_trained_elsewhere_shows_in_the_initial_hash(tmp_path: Path) -> None:
    """Checkpoint 0 must be what the trainer builds from the job seed: a run that starts
    from another model replays fine segment by segment, but not from scratch."""
    ctx = TrainContext(tmp_path, SEED, 7, SCHEDULE, CONFIG)
    trainer = new_trainer(tmp_path)
    trainer.restore(new_trainer(tmp_path, seed=SEED + 1).state())  # another model's start
    manifest = harness.train(trainer, ctx, tmp_path / "pot")
    report = harness.replay(
        new_trainer(tmp_path), ctx, tmp_path / "pot", root=manifest.root, segments=[1]
    )
    assert report.passed
    assert report.initial_weights_hash != manifest.leaves[0].weights
    assert report.initial_weights_hash == tensors_hash(new_trainer(tmp_path).state().params)


def test_a_trainer_cannot_tell_training_from_replaying(tmp_path: Path) -> None:
    """The attack: a submitter's trainer that departs only when it is replayed (on a
    verifier), so the honest provider's proof fails and the provider is blamed. Here it
    records everything the harness shows it, segment by segment: its context, the calls it
    gets and the values it is handed (the restored state's arrays, their dtypes and flags,
    the RNG state's JSON types), the steps and their data. Training and replaying a
    segment show it the same thing, so there is nothing to depart on."""
    views: list[list[object]] = []

    def describe(state: TrainingState) -> tuple[object, ...]:
        arrays = {**state.params, **state.optimizer}
        return (
            tuple(
                (k, a.dtype.str, a.shape, a.flags.writeable, a.flags.c_contiguous, a.tobytes())
                for k, a in sorted(arrays.items())
            ),
            json.dumps(state.rng, sort_keys=True),
            type(state.rng).__name__,
            type(state.params).__name__,
        )

    class Spy:
        def __init__(self, ctx: TrainContext) -> None:
            self.inner = new_trainer(ctx.job_dir)
            self.view: list[object] = [repr(ctx)]
            views.append(self.view)

        def state(self):  # type: ignore[no-untyped-def]
            self.view.append("state")
            return self.inner.state()

        def restore(self, state):  # type: ignore[no-untyped-def]
            self.view.append(("restore", describe(state)))
            self.inner.restore(state)

        def train_step(self, step: int, indices: np.ndarray) -> float:
            self.view.append(("step", step, indices.dtype.str, indices.tobytes()))
            return self.inner.train_step(step, indices)

    schedule = Schedule(total_steps=25, steps_per_checkpoint=10, dataset_size=512, batch_size=32)
    ctx = TrainContext(tmp_path, SEED, 5, schedule, CONFIG)
    manifest = harness.train(Spy(ctx), ctx, tmp_path / "pot")
    harness.replay(Spy(ctx), ctx, tmp_path / "pot", root=manifest.root, segments=[2])
    trained, replayed = views

    def segment(view: list[object], first: int, last: int) -> list[object]:
        """From the restore that opens steps first..last to the state() after them."""

        def at(kind: str, step: int | None = None) -> list[int]:
            return [
                i
                for i, c in enumerate(view)
                if isinstance(c, tuple) and c[0] == kind and (step is None or c[1] == step)
            ]

        start = max(i for i in at("restore") if i < at("step", first)[0])
        end = at("step", last)[0] + 2  # its state() included
        return view[start:end]

    assert trained[:2] == replayed[:2]  # the same context, then state() once built
    opened = segment(trained, 11, 20)
    assert opened == segment(replayed, 11, 20)
    assert opened[0][0] == "restore" and opened[1] == "state" and opened[-1] == "state"  # type: ignore[index]


# --- loading a job's trainer ------------------------------------------------------------------


def test_trainer_references_are_checked(tmp_path: Path) -> None:
    (tmp_path / "notatrainer.py").write_text("class T:\n    pass\n")
    with pytest.raises(TrainerError, match="no state"):
        load_trainer_class("notatrainer:T", tmp_path)
    with pytest.raises(TrainerError, match="no class"):
        load_trainer_class("notatrainer:Missing", tmp_path)
    with pytest.raises(TrainerError, match="cannot import"):
        load_trainer_class("no_such_module_here:T", tmp_path)
    with pytest.raises(ValueError, match="module:Class"):
        load_trainer_class("../evil:T", tmp_path)


# --- the command line, and whose harness runs -------------------------------------------------

FLAGS = [
    "--trainer",
    "mlp:MLPTrainer",
    "--config",
    json.dumps({"hidden": 16}),
    "--steps",
    "30",
    "--dataset-size",
    "256",
    "--batch-size",
    "32",
    "--k",
    "10",
    "--seed",
    "7",
    "--nonce",
    NONCE.hex(),
]
ROGUE = 'raise SystemExit("the repository\'s own pot ran")\n'


def _repo(root: Path) -> Path:
    """A job repository with a trainer module and, to play the saboteur, a `pot` of its own."""
    repo = root / "repo"
    (repo / "pot").mkdir(parents=True)
    (repo / "mlp.py").write_text("from pot.examples.numpy_mlp import MLPTrainer\n")
    for name in ("__init__.py", "__main__.py", "cli.py", "harness.py"):
        (repo / "pot" / name).write_text(ROGUE)
    return repo


def _harness(lib: Path, repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(lib),
        "PROOFNET_PYTHON_LIB": str(lib),
    }
    return subprocess.run(
        list(launch.harness_argv(sys.executable, *args)),
        cwd=repo,
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_networks_harness_runs_even_when_the_repository_ships_pot(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    lib = launch.install(tmp_path / "harness")
    assert (lib / "pot" / "cli.py").read_bytes() == (launch.package_dir() / "cli.py").read_bytes()
    job = ["--job-dir", str(tmp_path / "run"), "--code-dir", str(repo)]
    trained = _harness(lib, repo, "train", *job, *FLAGS)
    assert trained.returncode == 0, trained.stderr
    out = json.loads(trained.stdout.splitlines()[-1])
    assert out["status"] == "trained" and out["segments"] == 3 and out["steps"] == 30
    metrics = json.loads((tmp_path / "run" / "results" / "metrics.json").read_text())
    assert metrics["steps"] == 30 and metrics["final_loss"] == out["final_loss"]

    replayed = _harness(
        lib, repo, "replay", *job, *FLAGS, "--root", out["pot_root"], "--segments", "1,3"
    )
    assert replayed.returncode == 0, replayed.stderr
    report = json.loads(replayed.stdout.splitlines()[-1])
    assert report["status"] == "passed" and [r["segment"] for r in report["results"]] == [1, 3]

    # The twin: the same repository run as `python -m pot` from its own directory gets
    # the repository's pot: that is what the bootstrap prevents.
    plain = subprocess.run(
        [sys.executable, "-m", "pot", "train"],
        cwd=repo,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(lib)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert "the repository's own pot ran" in plain.stderr


def test_a_tampered_copy_of_the_harness_is_replaced(tmp_path: Path) -> None:
    lib = launch.install(tmp_path / "harness")
    target = lib / "pot" / "harness.py"
    target.chmod(0o644)
    target.write_text(ROGUE)
    assert launch.install(tmp_path / "harness") == lib
    assert target.read_bytes() == (launch.package_dir() / "harness.py").read_bytes()


def test_cli_exit_codes(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    lib = launch.install(tmp_path / "harness")
    job = ["--job-dir", str(tmp_path / "run"), "--code-dir", str(repo)]
    out = json.loads(_harness(lib, repo, "train", *job, *FLAGS).stdout.splitlines()[-1])
    root = out["pot_root"]
    other_lr = [*FLAGS[:3], json.dumps({"hidden": 16, "lr": "0.2"}), *FLAGS[4:]]
    mismatch = _harness(lib, repo, "replay", *job, *other_lr, "--root", root, "--segments", "2")
    assert mismatch.returncode == 1
    assert json.loads(mismatch.stdout.splitlines()[-1])["status"] == "failed"
    wrong_root = _harness(lib, repo, "replay", *job, *FLAGS, "--root", "0" * 64, "--segments", "2")
    assert wrong_root.returncode == 3
    no_schedule = _harness(lib, repo, "train", *job, "--trainer", "mlp:MLPTrainer", "--seed", "1")
    assert no_schedule.returncode == 2 and "(--nonce)" in no_schedule.stderr
    checked = _harness(lib, repo, "check", *job, *FLAGS)
    assert checked.returncode == 0
    assert json.loads(checked.stdout.splitlines()[-1])["status"] == "follows_schedule"
    longer = [*FLAGS[:5], "40", *FLAGS[6:]]
    off = _harness(lib, repo, "check", *job, *longer)
    assert off.returncode == 3
    assert json.loads(off.stdout.splitlines()[-1])["status"] == "segment_count"
    crash = tmp_path / "repo" / "crash.py"
    crash.write_text(
        "from pot.examples.numpy_mlp import MLPTrainer\n"
        "class Crash(MLPTrainer):\n"
        "    def train_step(self, step, indices):\n"
        "        raise RuntimeError('boom')\n"
    )
    crashed = _harness(
        lib,
        repo,
        "train",
        "--job-dir",
        str(tmp_path / "run2"),
        *FLAGS[2:],
        "--trainer",
        "crash:Crash",
    )
    assert crashed.returncode == 4
    assert "boom" in json.loads(crashed.stdout.splitlines()[-1])["message"]
