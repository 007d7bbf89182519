"""What workers send while running a job (results, logs, metering) and how submitters read it.

Worker endpoints are signed like every worker call (proofnet/messages/worker_auth) and act on
a lease token; the job endpoints answer only the job's owner.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import StreamingResponse
from pydantic import Field

from api.deps import ConfigDep, CurrentProvider, CurrentUser, NowDep, SessionDep
from api.errors import BadRequest, NotFound
from api.schemas.common import PublicBody, RequestBody
from api.services import results as service
from api.storage import BlobMissing, BlobStore, blob_store_for

router = APIRouter(tags=["worker-io"])

CONTENT_SHA256_HEADER = "X-Content-SHA256"
_SHA256 = re.compile(r"[0-9a-f]{64}")


def get_blob_store(request: Request) -> BlobStore:
    """The app's blob store: `app.state.blob_store` when set, else `<data_dir>/blobs`."""
    store: BlobStore | None = getattr(request.app.state, "blob_store", None)
    if store is None:
        data_dir = getattr(request.app.state.config, "data_dir", None)
        if data_dir is None:
            from proofnet.settings import build_settings

            data_dir = build_settings().data_dir
        store = blob_store_for(Path(data_dir), getattr(request.app.state, "settings", None))
        request.app.state.blob_store = store
    return store


async def _raw_body(request: Request) -> bytes:
    return await request.body()


BlobStoreDep = Annotated[BlobStore, Depends(get_blob_store)]
RawBody = Annotated[bytes, Depends(_raw_body)]


class ResultPublic(PublicBody):
    name: str
    sha256: str
    size: int
    uploaded_at: datetime


class LogLineBody(RequestBody):
    at: float = Field(description="POSIX seconds when the worker saw the line")
    stream: Literal["stdout", "stderr", "runtime", "worker"]
    text: str = Field(max_length=64 * 1024)


class LogBatch(RequestBody):
    lines: list[LogLineBody] = Field(max_length=service.MAX_LOG_LINES_PER_REQUEST)


class LogAppendPublic(PublicBody):
    stored: int
    truncated_lines: int
    dropped_old: int


class UsageReport(RequestBody):
    duration_s: float = Field(ge=0)
    gpu_seconds: float = Field(ge=0)
    gpu_busy_seconds: float = Field(ge=0)
    gpu_count: int = Field(ge=0, le=64)
    energy_j: float | None = Field(default=None, ge=0)
    energy_source: Literal["counter", "power-integral", "none"]
    samples: int = Field(ge=0)
    running: bool


class UsagePublic(PublicBody):
    usage: dict[str, Any]
    updated_at: datetime


class LogLinePublic(PublicBody):
    id: int
    attempt: int
    at: datetime
    stream: str
    text: str


class JobLogsPublic(PublicBody):
    lines: list[LogLinePublic]
    # Pass as `after` to read on from here.
    next_after: int


@router.put("/worker/leases/{token}/results/{name:path}")
def upload_result(
    token: str,
    name: str,
    body: RawBody,
    provider: CurrentProvider,
    session: SessionDep,
    config: ConfigDep,
    store: BlobStoreDep,
    now: NowDep,
    content_sha256: Annotated[str | None, Header(alias=CONTENT_SHA256_HEADER)] = None,
) -> ResultPublic:
    """Upload one declared result file (raw bytes); the API hashes it and records the hash.

    With `X-Content-SHA256` the upload is refused unless the bytes hash to it."""
    if content_sha256 is not None and not _SHA256.fullmatch(content_sha256):
        raise BadRequest(f"{CONTENT_SHA256_HEADER} must be 64 lowercase hex digits")
    row = service.store_result(
        session,
        store,
        provider,
        token,
        name,
        body,
        max_bytes=int(getattr(config, "max_result_bytes", config.max_body_bytes)),
        expected_sha256=content_sha256,
        now=now,
    )
    return ResultPublic.model_validate(row)


@router.get(
    "/worker/leases/{token}/inputs/{position}",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/octet-stream": {}}}},
)
def lease_input(
    token: str,
    position: Annotated[int, PathParam(ge=0, le=100_000)],
    provider: CurrentProvider,
    session: SessionDep,
    store: BlobStoreDep,
    now: NowDep,
) -> StreamingResponse:
    """Input checkpoint `position` (in `unit.inputs` order) of the unit this lease is for;
    check its SHA-256 against the claim's `unit.inputs[position].sha256`."""
    ref = service.lease_input(session, provider, token, position, now)
    try:
        chunks = store.open_chunks(ref.sha256)
    except BlobMissing as e:
        raise NotFound(
            f"input checkpoint {position} (of unit {ref.unit}) is missing from storage"
        ) from e
    return StreamingResponse(
        chunks,
        media_type="application/octet-stream",
        headers={CONTENT_SHA256_HEADER: ref.sha256, "Content-Length": str(ref.size)},
    )


@router.post("/worker/leases/{token}/logs")
def append_logs(
    token: str, body: LogBatch, provider: CurrentProvider, session: SessionDep, now: NowDep
) -> LogAppendPublic:
    lines = [
        service.LogLineIn(at=service.as_utc(line.at), stream=line.stream, text=line.text)
        for line in body.lines
    ]
    appended = service.append_logs(session, provider, token, lines, now)
    return LogAppendPublic.model_validate(appended)


@router.post("/worker/leases/{token}/telemetry")
def report_usage(
    token: str, body: UsageReport, provider: CurrentProvider, session: SessionDep, now: NowDep
) -> UsagePublic:
    row = service.record_usage(session, provider, token, body.model_dump(mode="json"), now)
    return UsagePublic.model_validate(row)


@router.get("/jobs/{job_id}/logs")
def job_logs(
    job_id: str,
    user: CurrentUser,
    session: SessionDep,
    after: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0,
    limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
) -> JobLogsPublic:
    rows = service.job_logs(session, user, job_id, after=after, limit=limit)
    return JobLogsPublic(
        lines=[LogLinePublic.model_validate(r) for r in rows],
        next_after=rows[-1].id if rows and rows[-1].id is not None else after,
    )


@router.get("/jobs/{job_id}/results")
def job_results(job_id: str, user: CurrentUser, session: SessionDep) -> list[ResultPublic]:
    return [ResultPublic.model_validate(r) for r in service.job_results(session, user, job_id)]


@router.get("/jobs/{job_id}/results/{name:path}", response_class=StreamingResponse)
def job_result(
    job_id: str, name: str, user: CurrentUser, session: SessionDep, store: BlobStoreDep
) -> StreamingResponse:
    row = service.job_result(session, user, job_id, name)
    try:
        chunks = store.open_chunks(row.sha256)
    except BlobMissing as e:
        raise NotFound(f"the bytes of result {name!r} are missing from storage") from e
    return StreamingResponse(
        chunks,
        media_type="application/octet-stream",
        headers={
            CONTENT_SHA256_HEADER: row.sha256,
            "Content-Length": str(row.size),
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name.rsplit('/', 1)[-1])}",
        },
    )


@router.get("/jobs/{job_id}/usage")
def job_usage(job_id: str, user: CurrentUser, session: SessionDep) -> UsagePublic | None:
    row = service.job_usage(session, user, job_id)
    return None if row is None else UsagePublic.model_validate(row)
