from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import CurrentUser, SessionDep
from api.schemas.estimate import EstimateCreate, EstimatePublic, HintInt
from api.services import estimates as service
from api.services.jobs import get_job

router = APIRouter(tags=["estimates"])


@router.post("/estimates")
def estimate_spec(body: EstimateCreate, _user: CurrentUser, session: SessionDep) -> EstimatePublic:
    """Time, CPU, memory and NTX cost of a spec before posting it, as ranges."""
    hints = service.Hints(model_params=body.model_params, tokens=body.tokens)
    return EstimatePublic.of(service.estimate_spec(session, body.spec, hints))


@router.get("/jobs/{job_id}/estimate")
def estimate_job(
    job_id: str,
    user: CurrentUser,
    session: SessionDep,
    model_params: Annotated[HintInt | None, Query(description="model parameters")] = None,
    tokens: Annotated[HintInt | None, Query(description="training tokens")] = None,
) -> EstimatePublic:
    """The estimate for one of your jobs, narrowed by its progress while it runs."""
    job = get_job(session, user, job_id)
    hints = service.Hints(model_params=model_params, tokens=tokens)
    return EstimatePublic.of(service.estimate_job(session, job, hints))
