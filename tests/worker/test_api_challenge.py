"""The worker answers the API's GPU challenge round (worker/api_challenge.py) against the real
API, served in-thread on a real clock.

No GPU exists on the test machine: `compute` stands in for the GPU with numpy at a small n
(the exact product a GPU computes, the same commitment and reveal code). The CUDA path of
`compute_on_gpu` (torch or cupy, the GPU picked by NVML UUID) runs in
`scripts/device_check.sh` where a GPU is present."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agent_fixtures import ApiServer, make_api_server

from proofnet.messages.gpu_challenge import WORKER_GPUS_PATH
from worker.api_challenge import Factors, challenge_due, due_gpus, gpu_checks
from worker.api_client import ApiClient
from worker.challenge import ChallengeResult, ChallengeSpec, commitment_tree, run_challenge
from worker.identity import bind_payout_address, create_key

NETWORK = "devnet"
GPU_UUID = "GPU-6f1e0c3a-0000-0000-0000-000000000000"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiServer]:
    yield from make_api_server(tmp_path, gpu_challenge_required=True, gpu_challenge_n=64)


def _register_with_one_gpu(api: ApiServer, key_file: Path) -> ApiClient:
    from api_support import Wallet, capabilities

    key = create_key(key_file)
    client = ApiClient(api.url, key, NETWORK)
    nonce = client.request("POST", "/api/v1/worker/challenge").json()["nonce"]
    binding = bind_payout_address(key, Wallet().address, NETWORK, nonce)
    offered = [{"index": 0, "uuid": GPU_UUID, "name": "NVIDIA L4", "memory_mb": 23034}]
    body = {
        "binding": binding.model_dump(mode="json"),
        "gpus": offered,
        "capabilities": capabilities(offered),
    }
    client.request("POST", "/api/v1/worker/register", body=json.dumps(body).encode())
    return client


def numpy_gpu(spec: ChallengeSpec, index: int, uuid: str, factors: Factors) -> ChallengeResult:
    """Stands in for the GPU (none here): the same exact product, on the CPU."""
    return run_challenge(spec, backend="numpy", repeats=1, matrices=factors)


def unsigned_gpu(spec: ChallengeSpec, index: int, uuid: str, factors: Factors) -> ChallengeResult:
    """A device that computed A @ B ahead of the start, ignoring the sign vector."""
    return run_challenge(spec, backend="numpy", repeats=1)


def wrong_gpu(spec: ChallengeSpec, index: int, uuid: str, factors: Factors) -> ChallengeResult:
    """A device that returns plausible garbage: right shape and range, wrong values."""
    honest = numpy_gpu(spec, index, uuid, factors)
    c = np.random.default_rng(1).integers(-64, 64, size=honest.c.shape).astype(np.int64)
    return ChallengeResult(
        spec=spec,
        c=c,
        tree=commitment_tree(c),
        elapsed_s=honest.elapsed_s,
        backend="numpy",
        device="cpu",
    )


def _offered(client: ApiClient) -> list[bool]:
    return [g["offered"] for g in client.request("GET", WORKER_GPUS_PATH).json()["gpus"]]


def test_worker_answers_the_api_round_and_its_gpu_is_then_offered(
    api: ApiServer, tmp_path: Path
) -> None:
    with _register_with_one_gpu(api, tmp_path / "key") as client:
        assert _offered(client) == [False]
        (outcome,) = challenge_due(client, datetime.now(UTC), numpy_gpu)
        assert (outcome.gpu_uuid, outcome.status) == (GPU_UUID, "passed"), outcome
        assert _offered(client) == [True]
        # Passed and far from expiry: nothing is due until the interval nearly ran out.
        assert due_gpus(gpu_checks(client), datetime.now(UTC)) == []


def test_a_device_computing_the_wrong_product_fails_the_api_round(
    api: ApiServer, tmp_path: Path
) -> None:
    with _register_with_one_gpu(api, tmp_path / "key") as client:
        (outcome,) = challenge_due(client, datetime.now(UTC), wrong_gpu)
        assert outcome.status == "failed" and "Freivalds" in outcome.reason
        (gpu,) = client.request("GET", WORKER_GPUS_PATH).json()["gpus"]
        assert not gpu["offered"] and "wrong answer" in gpu["why"]


def test_a_product_computed_before_the_start_fails(api: ApiServer, tmp_path: Path) -> None:
    """Precomputing A @ B while the clock is stopped does not help: the product the round
    asks for depends on the sign vector revealed at the start."""
    with _register_with_one_gpu(api, tmp_path / "key") as client:
        (outcome,) = challenge_due(client, datetime.now(UTC), unsigned_gpu)
        assert outcome.status == "failed" and "Freivalds" in outcome.reason


def test_due_gpus_picks_unchecked_and_soon_expiring() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    checks: dict[str, Any] = {
        "gpus": [
            {"index": 0, "uuid": "a", "check_status": "unchecked", "verified_until": None},
            {
                "index": 1,
                "uuid": "b",
                "check_status": "passed",
                "verified_until": "2030-01-01T00:05:00+00:00",
            },
            {
                "index": 2,
                "uuid": "c",
                "check_status": "passed",
                "verified_until": "2030-01-02T00:00:00+00:00",
            },
            {
                "index": 3,
                "uuid": "d",
                "check_status": "failed",
                "verified_until": None,
                "why": "the worker's own challenge failed: ...",
            },
        ]
    }
    assert [g["uuid"] for g in due_gpus(checks, now)] == ["a", "b"]
