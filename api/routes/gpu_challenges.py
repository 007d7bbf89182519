"""The API's GPU challenge rounds and the worker's view of its GPUs (signed worker requests).

Thin over `api.services.gpu_challenges`; the round is described in
proofnet/messages/gpu_challenge.py."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from api.deps import ConfigDep, CurrentProvider, NowDep, SessionDep
from api.schemas.gpu_challenge import WorkerGpuPublic, WorkerGpusPublic, challenge_state
from api.services import gpu_challenges as service
from proofnet.messages.gpu_challenge import (
    GpuChallengeCommit,
    GpuChallengeRequest,
    GpuChallengeReveal,
    GpuChallengeState,
)

router = APIRouter(prefix="/worker", tags=["worker"])

# Bounded like every integer path parameter: a larger one cannot be looked up.
ChallengeId = Annotated[int, Path(ge=1, le=2**63 - 1)]


@router.post("/gpu-challenges")
def issue(
    body: GpuChallengeRequest,
    provider: CurrentProvider,
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
) -> GpuChallengeState:
    """Open a challenge round for one registered GPU: the seed (untimed: derive A and B)."""
    return challenge_state(service.issue(session, config, provider, body.gpu_uuid, now))


@router.post("/gpu-challenges/{challenge_id}/start")
def start(
    challenge_id: ChallengeId,
    provider: CurrentProvider,
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
) -> GpuChallengeState:
    """The API's clock starts: the answer carries the sign vector's key (the product is
    (A diag(d)) B)."""
    return challenge_state(service.start(session, config, provider, challenge_id, now))


@router.post("/gpu-challenges/{challenge_id}/commit")
def commit(
    challenge_id: ChallengeId,
    body: GpuChallengeCommit,
    provider: CurrentProvider,
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
) -> GpuChallengeState:
    """The Merkle root over C: the clock stops; the answer names the rows to reveal (or the
    verdict, when the commitment came too late for the claimed model)."""
    row = service.commit(session, config, provider, challenge_id, body.commitment, now)
    return challenge_state(row)


@router.post("/gpu-challenges/{challenge_id}/reveal")
def reveal(
    challenge_id: ChallengeId,
    body: GpuChallengeReveal,
    provider: CurrentProvider,
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
) -> GpuChallengeState:
    """The rows asked, with their inclusion proofs: the verdict."""
    row = service.reveal(session, config, provider, challenge_id, body.rows, now)
    return challenge_state(row)


@router.get("/gpus")
def gpus(
    provider: CurrentProvider, session: SessionDep, config: ConfigDep, now: NowDep
) -> WorkerGpusPublic:
    """This worker's GPUs: offered or not, and why."""
    return WorkerGpusPublic(
        gpus=[WorkerGpuPublic.of(s) for s in service.gpu_states(session, config, provider, now)],
        challenge_interval_s=config.gpu_challenge_interval_s,
        challenge_required=config.gpu_challenge_required,
    )
