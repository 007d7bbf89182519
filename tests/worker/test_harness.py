"""The worker provides the proof-of-training harness: a spec naming a trainer trains through
`python3 -m pot train` from the worker's own copy of `pot`, mounted read-only (Docker) or
put on PYTHONPATH (process runtime), whatever the job's repository or image carries."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import pytest

from pot import Manifest, launch
from proofnet.messages.jobspec import JobSpec
from worker import harness
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
