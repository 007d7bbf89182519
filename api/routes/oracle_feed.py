"""The oracle feed (signed by an oracle key listed in the API config) and the submitter's
escrow record (`POST /api/v1/jobs/{job_id}/escrow`, owner only, checked on chain)."""

from __future__ import annotations

import functools
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import Field

from api.deps import (
    ChainDep,
    ConfigDep,
    CurrentUser,
    DeploymentDep,
    NowDep,
    SessionDep,
    SignedWorkerKey,
)
from api.errors import BadRequest, Forbidden
from api.routes.worker_io import BlobStoreDep, stream_blob
from api.schemas.common import PublicBody, RequestBody
from api.services import job_faults, payable_escrow
from api.services import oracle_feed as service
from proofnet.messages.job_fault import JobFaultError, JobFaultVerdict

router = APIRouter(tags=["oracle"])


def get_oracle_key(worker_key: SignedWorkerKey, config: ConfigDep) -> str:
    """The request is signed (worker request scheme) by a key the config lists as an oracle."""
    if worker_key not in config.oracle_keys:
        raise Forbidden("this key is not an oracle key of this API")
    return worker_key


OracleKey = Annotated[str, Depends(get_oracle_key)]


@router.get("/oracle/jobs/{job_id}")
def oracle_job(job_id: str, _oracle: OracleKey, session: SessionDep) -> dict[str, Any]:
    return service.job_feed(session, job_id)


@router.get("/oracle/early-commits")
def oracle_early_commits(_oracle: OracleKey, session: SessionDep) -> list[dict[str, Any]]:
    """Running leases whose first segment is committed and uploaded: replayed early."""
    return service.early_commits(session)


@router.get("/oracle/jobs/{job_id}/results/{name:path}")
def oracle_job_result(
    job_id: str,
    name: str,
    _oracle: OracleKey,
    session: SessionDep,
    store: BlobStoreDep,
    range_header: Annotated[str | None, Header(alias="Range")] = None,
) -> StreamingResponse:
    row = service.job_result_row(session, job_id, name)
    return stream_blob(store, row.sha256, row.size, range_header, repr(name))


@router.get("/oracle/workers/{worker_key}")
def oracle_worker(
    worker_key: str, _oracle: OracleKey, session: SessionDep, config: ConfigDep
) -> dict[str, Any]:
    return service.worker_feed(session, worker_key, config.network)


class EscrowRecord(RequestBody):
    tx_id: str = Field(pattern=r"^[0-9a-f]{64}$")
    index: int = Field(ge=0, le=2**32 - 1)


class EscrowPublic(PublicBody):
    job_id: str
    tx_id: str
    index: int
    budget: int
    deadline_ms: int


@functools.lru_cache(maxsize=1)
def escrow_script_hash() -> str:
    """The escrow validator's hash (no parameters: every deployment shares it)."""
    from chain.offchain.scripts import apply_params, script_hash

    return script_hash(apply_params("escrow")).payload.hex()


@router.post("/jobs/{job_id}/escrow", response_model=EscrowPublic)
def record_escrow(
    job_id: str,
    body: EscrowRecord,
    user: CurrentUser,
    session: SessionDep,
    now: NowDep,
    config: ConfigDep,
    context: ChainDep,
    deployment: DeploymentDep,
) -> Any:
    """Record the job's escrow: only an unspent output of this deployment's escrow script
    that can pay the job (`api.services.payable_escrow`), checked on chain now."""
    job = service.get_job(session, user, job_id)  # owner only, before touching the chain
    try:
        found = payable_escrow.lookup(context, body.tx_id, body.index)
    except payable_escrow.EscrowBackendError as e:
        return JSONResponse(status_code=503, content={"detail": str(e)})
    terms = payable_escrow.terms_for(job, user, deployment, config, now)
    checked = payable_escrow.require_payable(found, terms)
    row = service.record_escrow(
        session, user, job_id, tx_id=body.tx_id, index=body.index, found=checked, now=now
    )
    return EscrowPublic(
        job_id=job_id,
        tx_id=row.tx_id,
        index=row.output_index,
        budget=row.budget,
        deadline_ms=row.deadline_ms,
    )


class JobFaultPublic(PublicBody):
    job_id: str
    nonce: str
    attempt: int
    oracles: list[str]
    threshold: int
    stopped: bool
    stop: dict[str, Any] | None


@router.post("/oracle/job-faults")
def post_job_fault(
    body: dict[str, Any],
    oracle: OracleKey,
    session: SessionDep,
    config: ConfigDep,
    store: BlobStoreDep,
    now: NowDep,
) -> JobFaultPublic:
    """An oracle's signed early job-fault verdict on a running lease: kept, one per oracle
    key; the lease stops once the deployment's threshold of oracle keys signed it."""
    try:
        verdict = JobFaultVerdict.from_json(body)
    except JobFaultError as e:
        raise BadRequest(str(e)) from e
    state = job_faults.record_verdict(session, config, store, oracle, verdict, now)
    return JobFaultPublic(
        job_id=state.job_id,
        nonce=state.nonce,
        attempt=state.attempt,
        oracles=list(state.oracles),
        threshold=state.threshold,
        stopped=state.stop is not None,
        stop=None if state.stop is None else state.stop.model_dump(mode="json"),
    )
