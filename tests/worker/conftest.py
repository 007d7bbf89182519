"""Shared fixtures for worker tests; each area keeps its fixtures in its own module."""

from runtime_fixtures import docker_client, docker_runtime, job_dir, test_image_id  # noqa: F401
