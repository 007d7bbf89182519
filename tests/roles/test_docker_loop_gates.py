"""test_docker_loop.py never passes by skipping where CI promises it runs: without a Docker
engine it fails under PROOFNET_REQUIRE_DOCKER=1 (CI) and skips, saying why, elsewhere; without
the torch wheel the PyTorch job fails under PROOFNET_REQUIRE_TORCH=1 (CI, where the wheel is on
disk) and skips elsewhere. Each case runs the module in a child pytest against an engine that
is not there (a socket path that does not exist) or a wheel directory that is empty."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MODULE = Path(__file__).with_name("test_docker_loop.py")
GATES = ("PROOFNET_REQUIRE_DOCKER", "PROOFNET_REQUIRE_TORCH", "PROOFNET_TEST_TORCH_IMAGE")


def _child_pytest(tmp_path: Path, select: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in GATES}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            f"{MODULE}::{select}",
            "-q",
            "-rfEs",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            f"--basetemp={tmp_path / 'child'}",
        ],
        env={**base, "DOCKER_HOST": f"unix://{tmp_path / 'no-engine.sock'}", **env},
        cwd=MODULE.parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.stdout + done.stderr


NUMPY = "test_a_numpy_job_from_its_template_is_paid_after_a_verifier_replays_it"
TORCH = "test_a_pytorch_job_from_its_template_is_paid_after_a_verifier_replays_it"


@pytest.mark.parametrize("required", [True, False])
def test_without_an_engine_the_loop_fails_where_docker_is_required(
    tmp_path: Path, required: bool
) -> None:
    out = _child_pytest(tmp_path, NUMPY, **({"PROOFNET_REQUIRE_DOCKER": "1"} if required else {}))
    if required:
        assert "1 error" in out and "PROOFNET_REQUIRE_DOCKER=1 but no Docker engine" in out, out
        assert "skipped" not in out, out
    else:
        assert "1 skipped" in out and "scripts/ci/start-dockerd.sh" in out, out


@pytest.mark.parametrize("required", [True, False])
def test_without_the_wheel_the_pytorch_job_fails_where_torch_is_required(
    tmp_path: Path, required: bool
) -> None:
    empty = tmp_path / "wheels"
    empty.mkdir()
    out = _child_pytest(
        tmp_path,
        TORCH,
        PROOFNET_TORCH_WHEELS=str(empty),
        **({"PROOFNET_REQUIRE_TORCH": "1"} if required else {}),
    )
    if required:
        assert "1 error" in out and f"PROOFNET_REQUIRE_TORCH=1 but no torch wheel in {empty}" in out
        assert "skipped" not in out, out
    else:
        assert "1 skipped" in out and f"no torch wheel in {empty}" in out, out
