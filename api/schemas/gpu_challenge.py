"""What the worker sees of its GPUs' checks: each GPU, whether it is offered, and why."""

from __future__ import annotations

from datetime import datetime

from api.models import GpuChallenge
from api.schemas.common import PublicBody
from api.services.gpu_challenges import GpuState
from proofnet.messages.gpu_challenge import GpuChallengeState


def challenge_state(row: GpuChallenge) -> GpuChallengeState:
    assert row.id is not None
    return GpuChallengeState(
        id=row.id,
        gpu_uuid=row.gpu_uuid,
        gpu_model=row.gpu_model,
        seed=row.seed,
        n=row.n,
        dtype=row.dtype,  # type: ignore[arg-type]
        status=row.status,  # type: ignore[arg-type]
        reason=row.reason,
        issued_at=row.issued_at,
        signs_key=row.signs_key,
        started_at=row.started_at,
        elapsed_s=row.elapsed_s,
        measured_tflops=row.measured_tflops,
        reveal=list(row.reveal or []) if row.status == "committed" else [],
    )


class WorkerGpuPublic(PublicBody):
    index: int
    uuid: str
    model: str
    memory_mb: int
    offered: bool
    check_status: str  # unchecked | passed | failed
    why: str  # why it is not offered, or what its offer stands on
    verified_until: datetime | None

    @classmethod
    def of(cls, state: GpuState) -> WorkerGpuPublic:
        g = state.gpu
        return cls(
            index=g.index,
            uuid=g.uuid,
            model=g.model,
            memory_mb=g.memory_mb,
            offered=state.offered,
            check_status=g.check_status,
            why=state.why,
            verified_until=g.verified_until,
        )


class WorkerGpusPublic(PublicBody):
    gpus: list[WorkerGpuPublic]
    challenge_interval_s: int
    challenge_required: bool
