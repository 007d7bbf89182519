"""The worker's side of the API's GPU challenge round (proofnet/messages/gpu_challenge.py).

For each registered GPU: ask the API for a seed and derive A and B (untimed), ask it to start
(its clock runs from here; the answer carries the sign vector d), compute C = (A diag(d)) B on
that GPU (selected by NVML UUID through `worker.challenge.run_challenge`, torch or cupy on
CUDA), send the Merkle root over C's rows at once, then reveal the rows the API draws.
The API judges; this module only answers. Onboarding runs it after registering, and the
agent again when a GPU's check is due (`due_gpus`), since the API offers a GPU only while its
last round passed within the API's interval.

I/O: HTTP to the API through `ApiClient`; the GPU through `run_challenge`. Tests inject
`compute` (a numpy stand-in) where no GPU exists.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from proofnet.messages.gpu_challenge import (
    GPU_CHALLENGES_PATH,
    WORKER_GPUS_PATH,
    GpuChallengeState,
    challenge_matrices,
    column_signs,
)
from proofnet.messages.registration import InclusionProofReport, RevealedRowReport
from worker.challenge import ChallengeResult, ChallengeSpec, run_challenge

Factors = tuple[np.ndarray, np.ndarray]
# (spec, gpu index, gpu uuid, factors) -> the computed challenge; the default runs it on that
# GPU.
Compute = Callable[[ChallengeSpec, int, str, Factors], ChallengeResult]


def compute_on_gpu(spec: ChallengeSpec, index: int, uuid: str, factors: Factors) -> ChallengeResult:
    """C on the GPU with NVML UUID `uuid` (torch, then cupy); never on the CPU: a GPU's round
    computed on the CPU would only fail on the API's clock."""
    for backend in ("torch", "cupy"):
        try:
            return run_challenge(
                spec,
                backend=backend,  # type: ignore[arg-type]
                gpu_index=index,
                gpu_uuid=uuid,
                repeats=1,
                matrices=factors,
            )
        except Exception as e:  # the next backend, or the error below
            last = e
    raise RuntimeError(f"no CUDA backend could run the challenge on {uuid}: {last}")


@dataclass(frozen=True)
class RoundOutcome:
    gpu_uuid: str
    status: str  # passed | failed
    reason: str
    elapsed_s: float | None


def _call(api: Any, method: str, path: str, payload: Any = None) -> Any:
    body = b"" if payload is None else json.dumps(payload).encode()
    return api.request(method, path, body=body).json()


def run_round(api: Any, gpu_index: int, gpu_uuid: str, compute: Compute) -> RoundOutcome:
    """One round for one GPU against `api` (a `worker.api_client.ApiClient`)."""
    issued = GpuChallengeState.model_validate(
        _call(api, "POST", GPU_CHALLENGES_PATH, {"gpu_uuid": gpu_uuid})
    )
    spec = ChallengeSpec(seed=issued.seed, n=issued.n, dtype=issued.dtype)
    a, b = challenge_matrices(spec.seed, spec.n)  # before the clock starts
    started = GpuChallengeState.model_validate(
        _call(api, "POST", f"{GPU_CHALLENGES_PATH}/{issued.id}/start")
    )
    if started.status != "started" or started.signs_key is None:
        return RoundOutcome(gpu_uuid, started.status, started.reason, None)
    result = compute(spec, gpu_index, gpu_uuid, (a * column_signs(started.signs_key, spec.n), b))
    committed = GpuChallengeState.model_validate(
        _call(
            api,
            "POST",
            f"{GPU_CHALLENGES_PATH}/{issued.id}/commit",
            {"commitment": result.commitment},
        )
    )
    if committed.status != "committed":
        return RoundOutcome(gpu_uuid, committed.status, committed.reason, committed.elapsed_s)
    rows = [
        RevealedRowReport(
            index=row.index,
            values=list(row.values),
            proof=InclusionProofReport(
                index=row.proof.index,
                size=row.proof.size,
                path=[h.hex() for h in row.proof.path],
            ),
        ).model_dump()
        for row in result.reveal(committed.reveal)
    ]
    verdict = GpuChallengeState.model_validate(
        _call(api, "POST", f"{GPU_CHALLENGES_PATH}/{issued.id}/reveal", {"rows": rows})
    )
    return RoundOutcome(gpu_uuid, verdict.status, verdict.reason, committed.elapsed_s)


def gpu_checks(api: Any) -> dict[str, Any]:
    """The API's view of this worker's GPUs: offered or not, and why."""
    return dict(_call(api, "GET", WORKER_GPUS_PATH))


def due_gpus(checks: dict[str, Any], now: datetime, *, margin_s: float = 600) -> list[Any]:
    """The GPUs to challenge now: never checked, or passing for less than `margin_s` more.
    A GPU the worker's own report failed is left alone (it needs a new onboarding)."""
    due = []
    for gpu in checks.get("gpus") or []:
        until = gpu.get("verified_until")
        if gpu.get("check_status") == "failed" and "the worker's own" in str(gpu.get("why")):
            continue
        if until is None:
            due.append(gpu)
            continue
        expires = datetime.fromisoformat(until)
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=UTC)
        if expires - now < timedelta(seconds=margin_s):
            due.append(gpu)
    return due


def challenge_due(api: Any, now: datetime, compute: Compute = compute_on_gpu) -> list[RoundOutcome]:
    """Run a round for every GPU whose check is due."""
    return [
        run_round(api, int(g["index"]), str(g["uuid"]), compute)
        for g in due_gpus(gpu_checks(api), now)
    ]
