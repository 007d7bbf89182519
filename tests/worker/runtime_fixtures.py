"""Fixtures for the worker's container-runtime tests.

Docker tests run on a real engine with the local test image built by
scripts/ci/build-test-image.sh. Without an engine they skip with the reason, unless
PROOFNET_REQUIRE_DOCKER=1 (CI sets it), where a missing engine is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import docker
import pytest
from docker.errors import ImageNotFound

from worker.runtime.base import EngineUnavailable
from worker.runtime.docker_runtime import DockerRuntime, connect

TEST_IMAGE = "proofnet/test-numpy:local"


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("PROOFNET_REQUIRE_DOCKER") == "1":
        pytest.fail(f"PROOFNET_REQUIRE_DOCKER=1 but {reason}", pytrace=False)
    pytest.skip(f"{reason} (set PROOFNET_REQUIRE_DOCKER=1 to make this a failure)")


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    try:
        client = connect(timeout_s=60)
    except EngineUnavailable as exc:
        _unavailable(f"no Docker engine: {exc}; start one with scripts/ci/start-dockerd.sh")
    yield client
    client.close()


@pytest.fixture(scope="session")
def test_image_id(docker_client: docker.DockerClient) -> str:
    """The ID (sha256:...) of the local test image with python3 + numpy.

    PROOFNET_TEST_IMAGE (the ID build-test-image.sh prints) wins over the tag.
    """
    wanted = os.environ.get("PROOFNET_TEST_IMAGE") or TEST_IMAGE
    try:
        image = docker_client.images.get(wanted)
    except ImageNotFound:
        _unavailable(
            f"test image {wanted} is missing; build it with scripts/ci/build-test-image.sh"
        )
    if wanted.startswith("sha256:") and image.id != wanted:
        pytest.fail(f"PROOFNET_TEST_IMAGE={wanted} resolved to {image.id}", pytrace=False)
    return str(image.id)


@pytest.fixture
def docker_runtime(docker_client: docker.DockerClient, test_image_id: str) -> DockerRuntime:
    # No registry here: a missing image must fail fast instead of trying to pull.
    return DockerRuntime(docker_client, pull_missing=False)


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work
