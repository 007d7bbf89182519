"""The worker provides the proof-of-training harness: a spec naming a trainer trains through
`python3 -m pot train` from the worker's own copy of `pot`, mounted read-only (Docker) or
put on PYTHONPATH (process runtime), whatever the job's repository or image carries."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any, NoReturn

import pytest

from pot import Manifest, check_resumed, launch
from pot.examples.numpy_mlp import MLPTrainer
from pot.harness import run_segment
from pot.manifest import PREFIX_NAME, optimizer_path, rng_path, weights_path
from pot.recorder import ProofOfTraining
from pot.schedule import Schedule
from pot.trainer import TrainContext
from proofnet.messages.jobspec import JobSpec
from worker import harness
from worker.results import committed_checkpoint
from worker.runtime.base import InvalidRunSpec, LogLine, RunReason, RunSpec
from worker.runtime.docker_runtime import DockerRuntime
from worker.runtime.process_runtime import ProcessRuntime

NONCE = bytes(range(32))


def spec(**proof: Any) -> JobSpec:
    return JobSpec.from_dict(
        {
            "model": {"repo_url": "https://git.example.test/mlp.git", "commit": "a" * 40},
            "framework": "numpy",
            "image": "proofnet/test@sha256:" + "e" * 64,
            "commands": [["python3", "prepare.py"]],
            "resources": {
                "gpus": 0,
                "gpu_memory_mb": 0,
                "cpus": 1,
                "ram_mb": 1024,
                "disk_mb": 100,
                "max_duration_s": 60,
            },
            "results": [{"path": "pot/**", "kind": "model"}],
            "pricing": {"kind": "fixed", "amount": 10},
            "seed": 5,
            "proof": {"steps_per_checkpoint": 10, **proof},
        }
    )


TRAINED = {
    "trainer": "mlp:MLPTrainer",
    "config": {"hidden": 8},
    "schedule": {"steps": 20, "dataset_size": 128, "batch_size": 16},
}


def test_a_spec_with_a_trainer_ends_with_the_networks_harness() -> None:
    with_trainer = harness.training_commands(spec(**TRAINED))
    assert with_trainer[0] == ("python3", "prepare.py")
    assert with_trainer[1] == launch.harness_argv("python3", "train")
    assert harness.describe(with_trainer[1]) == "python3 -m pot train (the network's harness)"
    # The twin: a job that trains in its own commands runs just those.
    assert harness.training_commands(spec()) == (("python3", "prepare.py"),)


def _job_dir(root: Path) -> Path:
    """A checked-out repository with the trainer, and a `pot` package of its own that
    would report a finished training if it ran."""
    job = root / "job"
    (job / "pot").mkdir(parents=True)
    (job / "prepare.py").write_text("print('prepared')\n")
    (job / "mlp.py").write_text("from pot.examples.numpy_mlp import MLPTrainer\n")
    fake = 'print(\'{"status": "trained", "pot_root": "%s"}\' % ("0" * 64))\n'
    for name in ("__init__.py", "__main__.py", "cli.py"):
        (job / "pot" / name).write_text(fake)
    return job


def test_the_process_runtime_runs_the_workers_copy(tmp_path: Path) -> None:
    job = _job_dir(tmp_path)
    lib = harness.provide_library(tmp_path / "harness")
    job_spec = spec(**TRAINED)
    runtime = ProcessRuntime()
    lines: list[LogLine] = []
    for argv in harness.training_commands(job_spec):
        # The test interpreter stands in for the host's python3 (which may lack numpy).
        argv = (sys.executable, *argv[1:])
        result = runtime.execute(
            RunSpec(
                image="host",
                argv=argv,
                work_dir=job,
                env=job_spec.job_env(job, NONCE).to_environ(),
                wall_clock_limit_s=120,
                python_lib=lib,
            ),
            on_log=lines.append,
        )
        assert result.reason is RunReason.COMPLETED, [line.text for line in lines]
    out = json.loads([line.text for line in lines if line.text.startswith("{")][-1])
    manifest = Manifest.load(job / "pot")
    assert out["status"] == "trained" and out["pot_root"] == manifest.root != "0" * 64
    assert manifest.segments == 2 and manifest.total_steps == 20


def _run_all(job: Path, lib: Path, commands: Any, job_spec: JobSpec) -> list[str]:
    lines: list[LogLine] = []
    for argv in commands:
        result = ProcessRuntime().execute(
            RunSpec(
                image="host",
                argv=(sys.executable, *argv[1:]),
                work_dir=job,
                env=job_spec.job_env(job, NONCE).to_environ(),
                wall_clock_limit_s=120,
                python_lib=lib,
            ),
            on_log=lines.append,
        )
        assert result.reason is RunReason.COMPLETED, [line.text for line in lines]
    return [line.text for line in lines]


def test_a_resumed_job_continues_from_the_lost_attempts_checkpoint(tmp_path: Path) -> None:
    """What the worker runs for a claim that resumes: the lost attempt's prefix and
    checkpoint 1 in RESUME_DIR (as downloaded), the harness told to resume there; the proof
    is the one an uninterrupted run makes, and chains to the prefix."""
    job_spec = spec(**TRAINED)
    lib = harness.provide_library(tmp_path / "harness")
    whole = _job_dir(tmp_path / "whole")
    _run_all(whole, lib, harness.training_commands(job_spec), job_spec)
    honest = Manifest.load(whole / "pot")
    # The lost attempt had committed checkpoints 0 and 1 (their files, and the prefix).
    job = _job_dir(tmp_path / "next")
    resume_dir = job / harness.RESUME_DIR
    resume_dir.mkdir(parents=True)
    Manifest(
        steps_per_checkpoint=honest.steps_per_checkpoint,
        data_seed=honest.data_seed,
        leaves=honest.leaves[:2],
    ).save(resume_dir, name=PREFIX_NAME)
    for path in (weights_path, optimizer_path, rng_path):
        shutil.copyfile(path(whole / "pot", 1), path(resume_dir, 1))
    commands = harness.training_commands(job_spec, resume_at=1)
    assert harness.describe(commands[-1]).endswith(
        f"train --resume-from {harness.RESUME_DIR} --resume-at 1 (the network's harness)"
    )
    _run_all(job, lib, commands, job_spec)
    resumed = Manifest.load(job / "pot")
    check_resumed(resumed, Manifest.load(resume_dir, name=PREFIX_NAME), 1)
    assert resumed.root == honest.root


def test_python_lib_must_be_an_existing_absolute_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidRunSpec, match="python_lib"):
        RunSpec(image="host", argv=("true",), work_dir=tmp_path, python_lib=Path("relative"))
    with pytest.raises(InvalidRunSpec, match="python_lib"):
        RunSpec(image="host", argv=("true",), work_dir=tmp_path, python_lib=tmp_path / "none")


class _NoEngine:
    def __getattr__(self, name: str) -> NoReturn:
        raise AssertionError(f"the runtime used the engine ({name})")


def test_docker_mounts_the_library_read_only_first_on_the_path(tmp_path: Path) -> None:
    lib = harness.provide_library(tmp_path / "harness")
    runtime = DockerRuntime(_NoEngine())  # type: ignore[arg-type]
    run = RunSpec(
        image="sha256:" + "ab" * 32,
        argv=launch.harness_argv("python3", "train"),
        work_dir=tmp_path,
        # Nothing the job's environment says moves the library off the front.
        env={"PYTHONPATH": "/work/vendor", "PROOFNET_PYTHON_LIB": "/work/pot"},
        python_lib=lib,
    )
    config = runtime.container_config(run, image_id=run.image, user="1000:1000", work_dir=tmp_path)
    assert config["volumes"][str(lib)] == {"bind": launch.LIB_MOUNT, "mode": "ro"}
    assert config["volumes"][str(tmp_path)] == {"bind": "/work", "mode": "rw"}
    assert config["environment"]["PROOFNET_PYTHON_LIB"] == launch.LIB_MOUNT
    assert config["environment"]["PYTHONPATH"] == launch.LIB_MOUNT
    assert config["read_only"] is True
    # The twin: without a library nothing is mounted besides the work dir.
    plain = runtime.container_config(
        RunSpec(image=run.image, argv=("true",), work_dir=tmp_path),
        image_id=run.image,
        user="1000:1000",
        work_dir=tmp_path,
    )
    assert list(plain["volumes"]) == [str(tmp_path)]
    assert "PROOFNET_PYTHON_LIB" not in plain["environment"]


def test_a_run_stopped_early_leaves_its_last_committed_checkpoint(tmp_path: Path) -> None:
    """What a worker uploads before releasing a job it stopped mid-run (the recorder's
    prefix and the files of its last checkpoint), so the next provider resumes there."""
    schedule = Schedule(total_steps=40, steps_per_checkpoint=10, dataset_size=128, batch_size=16)
    ctx = TrainContext(tmp_path, 5, 9, schedule, {"hidden": 8})
    trainer = MLPTrainer(ctx)
    recorder = ProofOfTraining(tmp_path / "pot", steps_per_checkpoint=10, data_seed=9)
    recorder.start(trainer.state())
    recorder.leaves  # noqa: B018 - waits for the writes
    assert committed_checkpoint(tmp_path) == []  # only the initial state: nothing to resume
    for segment in (1, 2):
        run_segment(
            trainer,
            schedule.sampler(9),
            schedule.segment_steps(segment),
            lambda _s, idx, loss: recorder.record_step(idx, loss),
        )
        recorder.commit(trainer.state())
    leaf = recorder.leaves[2]
    left = committed_checkpoint(tmp_path)
    assert [r.name for r in left] == [
        "pot/prefix.json",
        "pot/000002.weights",
        "pot/000002.optim",
        "pot/000002.rng.json",
    ]
    assert left[1].sha256 == leaf.weights
    # A checkpoint file gone missing: nothing is left rather than a checkpoint that won't load.
    (tmp_path / "pot" / "000002.optim").unlink()
    assert committed_checkpoint(tmp_path) == []
