"""What workers send while running a job (results, logs, metering) and how submitters read it.

Worker endpoints are signed like every worker call (proofnet/messages/worker_auth) and act on
a lease token; the job endpoints answer only the job's owner.
"""

from __future__ import annotations

import contextlib
import functools
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import StreamingResponse
from pydantic import Field
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from api.blob_stores import blob_store_for
from api.config import ApiConfig
from api.deps import (
    ConfigDep,
    CurrentProvider,
    CurrentUser,
    NowDep,
    ReleasePolicyDep,
    SessionDep,
    check_signature,
    provider_of,
    signed_headers,
)
from api.errors import BadRequest, Conflict, LengthRequired, NotFound, RangeNotSatisfiable
from api.models import Provider
from api.schemas.common import PublicBody, RequestBody
from api.services import results as service
from api.storage import BlobMissing, BlobStore
from api.uploads import (
    ChunkWriter,
    UploadBusy,
    UploadError,
    UploadNotFound,
    UploadOffsetMismatch,
    UploadSession,
    UploadStaging,
)
from proofnet.messages.worker_auth import SignedRequest

router = APIRouter(tags=["worker-io"])

CONTENT_SHA256_HEADER = "X-Content-SHA256"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_STREAMED = re.compile(r"/api/v1/worker/leases/[^/]+/(uploads/[^/]+|results/.+)")
_FLUSH_BYTES = 1 << 20


def streams_body(method: str, path: str) -> bool:
    """Whether a request's body streams to an upload (these routes enforce their own size
    limit, `max_upload_bytes`, instead of the JSON body limit)."""
    return method == "PUT" and _STREAMED.fullmatch(path) is not None


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


def get_upload_staging(
    request: Request, store: Annotated[BlobStore, Depends(get_blob_store)]
) -> UploadStaging:
    """The app's upload sessions, staged in the blob store's `staging_dir`."""
    staging: UploadStaging | None = getattr(request.app.state, "upload_staging", None)
    if staging is None or staging.root != store.staging_dir:
        config = request.app.state.config
        staging = UploadStaging(store.staging_dir, ttl_s=config.upload_session_ttl_s)
        request.app.state.upload_staging = staging
    return staging


BlobStoreDep = Annotated[BlobStore, Depends(get_blob_store)]
StagingDep = Annotated[UploadStaging, Depends(get_upload_staging)]


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


class UploadDeclared(RequestBody):
    name: str = Field(min_length=1, max_length=512, description="the result's path")
    size: int = Field(ge=0, le=2**62, description="bytes the file has")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of all its bytes")


class UploadPublic(PublicBody):
    # None when the same file (name, size, hash) was already stored under this lease.
    id: str | None
    name: str
    size: int
    sha256: str | None
    # Bytes the API holds: send the rest from here.
    offset: int
    complete: bool
    result: ResultPublic | None = None


def _upload_public(upload: UploadSession, offset: int, row: Any = None) -> UploadPublic:
    return UploadPublic(
        id=upload.id,
        name=upload.name,
        size=upload.size,
        sha256=upload.sha256,
        offset=offset,
        complete=row is not None,
        result=None if row is None else ResultPublic.model_validate(row),
    )


@router.post("/worker/leases/{token}/uploads", status_code=201)
def start_upload(
    token: str,
    body: UploadDeclared,
    provider: CurrentProvider,
    session: SessionDep,
    config: ConfigDep,
    staging: StagingDep,
    now: NowDep,
) -> UploadPublic:
    """Declare a result file (name, size, SHA-256) and get an upload session for it.

    Send its bytes with `PUT .../uploads/{id}` in chunks, each with `Content-Range:
    bytes FIRST-LAST/SIZE`, in order; the chunk that brings the offset to the size stores
    the file. Declaring the same file again returns the same session and its offset (how a
    worker resumes after a dropped connection or a restart); a file already stored under
    this lease comes back `complete`."""
    started = service.start_upload(
        session,
        staging,
        provider,
        token,
        body.name,
        size=body.size,
        sha256=body.sha256,
        max_bytes=config.max_upload_bytes,
        now=now,
    )
    if started.upload is None:
        assert started.stored is not None
        return UploadPublic(
            id=None,
            name=body.name,
            size=body.size,
            sha256=body.sha256,
            offset=body.size,
            complete=True,
            result=ResultPublic.model_validate(started.stored),
        )
    return _upload_public(started.upload, started.offset)


@router.get("/worker/leases/{token}/uploads/{upload_id}")
def upload_state(
    token: str,
    upload_id: str,
    provider: CurrentProvider,
    session: SessionDep,
    staging: StagingDep,
    now: NowDep,
) -> UploadPublic:
    """Where an upload stands: `offset` is the first byte the API still needs."""
    upload = service.upload_of(session, staging, provider, token, upload_id, now)
    try:
        offset = staging.offset(upload)
    except UploadNotFound as e:
        raise NotFound(str(e)) from e
    return _upload_public(upload, offset)


_RANGE = re.compile(r"bytes (?:(\d{1,19})-(\d{1,19})|\*)/(\d{1,19})")


def _content_range(header: str | None, size: int) -> tuple[int, int]:
    """(first byte, length) of the chunk a `Content-Range` header names; `bytes */SIZE`
    with an empty body completes an upload whose bytes are all in."""
    match = _RANGE.fullmatch(header or "")
    if match is None:
        raise BadRequest("send each chunk with 'Content-Range: bytes FIRST-LAST/SIZE'")
    first, last, total = match.groups()
    if int(total) != size:
        raise BadRequest(f"Content-Range names a file of {total} bytes; this upload is {size}")
    if first is None:
        return size, 0
    start, end = int(first), int(last)
    if start > end or end >= size:
        raise BadRequest(f"Content-Range {start}-{end} is not within the file's {size} bytes")
    return start, end - start + 1


@router.put(
    "/worker/leases/{token}/uploads/{upload_id}",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        }
    },
)
async def upload_chunk(
    token: str,
    upload_id: str,
    request: Request,
    session: SessionDep,
    config: ConfigDep,
    store: BlobStoreDep,
    staging: StagingDep,
    now: NowDep,
    content_range: Annotated[str | None, Header(alias="Content-Range")] = None,
) -> UploadPublic:
    """One chunk of an upload (raw bytes, signed like every worker request, over the
    chunk's SHA-256). A chunk that does not start at the offset is refused (409: ask
    `GET .../uploads/{id}`); one that runs past the declared size or its range (400) or
    whose signature fails (401) leaves nothing behind, nor does a dropped connection."""
    signed = signed_headers(request, config, now)
    provider = await run_in_threadpool(provider_of, session, signed.worker_key)
    upload = await run_in_threadpool(
        service.upload_of, session, staging, provider, token, upload_id, now
    )
    start, length = _content_range(content_range, upload.size)
    ctx = _Upload(request, signed, session, config, store, staging, provider, token, now)
    return await ctx.write(upload, start, length)


@router.put(
    "/worker/leases/{token}/results/{name:path}",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/octet-stream": {"schema": {"type": "string"}}},
        }
    },
)
async def upload_result(
    token: str,
    name: str,
    request: Request,
    session: SessionDep,
    config: ConfigDep,
    store: BlobStoreDep,
    staging: StagingDep,
    now: NowDep,
    content_length: Annotated[int | None, Header(alias="Content-Length", ge=0)] = None,
    content_sha256: Annotated[str | None, Header(alias=CONTENT_SHA256_HEADER)] = None,
) -> ResultPublic:
    """Upload one declared result file whole, in one request (raw bytes, `Content-Length`
    required); streamed to disk and hashed like a chunked upload, with the same size limit.
    With `X-Content-SHA256` the upload is refused unless the bytes hash to it. Large files
    should use `POST .../uploads`, which resumes after a dropped connection."""
    if content_sha256 is not None and not _SHA256.fullmatch(content_sha256):
        raise BadRequest(f"{CONTENT_SHA256_HEADER} must be 64 lowercase hex digits")
    signed = signed_headers(request, config, now)
    if content_length is None:
        raise LengthRequired("send the result with a Content-Length")
    provider = await run_in_threadpool(provider_of, session, signed.worker_key)
    upload = await run_in_threadpool(
        functools.partial(
            service.one_shot_upload,
            session,
            staging,
            provider,
            token,
            name,
            size=content_length,
            sha256=content_sha256,
            max_bytes=config.max_upload_bytes,
            now=now,
        )
    )
    ctx = _Upload(request, signed, session, config, store, staging, provider, token, now)
    try:
        answer = await ctx.write(upload, 0, content_length)
    finally:
        if staging.exists(upload):  # a one-shot upload is never resumed
            await run_in_threadpool(_discard_quietly, staging, upload)
    assert answer.result is not None
    return answer.result


def _discard_quietly(staging: UploadStaging, upload: UploadSession) -> None:
    with contextlib.suppress(UploadError), staging.writing(upload):
        staging.discard(upload)


@dataclass(frozen=True)
class _Upload:
    """What writing a chunk needs: the request, its signature and the stores."""

    request: Request
    signed: SignedRequest
    session: Session
    config: ApiConfig
    store: BlobStore
    staging: UploadStaging
    provider: Provider
    token: str
    now: datetime

    async def write(self, upload: UploadSession, start: int, length: int) -> UploadPublic:
        try:
            with self.staging.writing(upload) as writer:
                if start != writer.offset:
                    raise UploadOffsetMismatch(writer.offset, start)
                try:
                    await self._receive(writer, length)
                    await run_in_threadpool(
                        check_signature,
                        self.request,
                        self.signed,
                        writer.chunk_digest.hexdigest(),
                        self.session,
                        self.config,
                        self.now,
                    )
                except BaseException:  # a refused or broken-off chunk leaves nothing
                    await run_in_threadpool(writer.rollback)
                    raise
                await run_in_threadpool(writer.keep)
                if not writer.complete():
                    return _upload_public(upload, writer.offset)
                row = await run_in_threadpool(
                    service.finish_upload,
                    self.session,
                    self.store,
                    self.staging,
                    writer,
                    self.provider,
                    self.token,
                    self.now,
                )
                return _upload_public(upload, writer.offset, row)
        except UploadBusy as e:
            raise Conflict(str(e)) from e
        except UploadOffsetMismatch as e:
            raise Conflict(str(e)) from e
        except UploadNotFound as e:
            raise NotFound(str(e)) from e

    async def _receive(self, writer: ChunkWriter, length: int) -> None:
        """Write exactly `length` body bytes in batches of about 1 MiB, off the event loop."""
        pending = bytearray()
        got = 0
        async for piece in self.request.stream():
            got += len(piece)
            if got > length:
                raise BadRequest(
                    f"the body is longer than the {length} bytes its Content-Range names"
                )
            pending += piece
            if len(pending) >= _FLUSH_BYTES:
                await run_in_threadpool(writer.write, bytes(pending))
                pending.clear()
        if pending:
            await run_in_threadpool(writer.write, bytes(pending))
        if got != length:
            raise BadRequest(f"the body has {got} bytes; its Content-Range names {length}")


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
    range_header: Annotated[str | None, Header(alias="Range")] = None,
) -> StreamingResponse:
    """Input checkpoint `position` (in `unit.inputs` order) of the unit this lease is for;
    check its SHA-256 against the claim's `unit.inputs[position].sha256`. `Range: bytes=N-`
    resumes a broken-off download."""
    ref = service.lease_input(session, provider, token, position, now)
    return stream_blob(
        store,
        ref.sha256,
        ref.size,
        range_header,
        f"input checkpoint {position} (of unit {ref.unit})",
    )


@router.get(
    "/worker/leases/{token}/resume/{position}",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/octet-stream": {}}}},
)
def lease_resume_file(
    token: str,
    position: Annotated[int, PathParam(ge=0, le=16)],
    provider: CurrentProvider,
    session: SessionDep,
    store: BlobStoreDep,
    now: NowDep,
    range_header: Annotated[str | None, Header(alias="Range")] = None,
) -> StreamingResponse:
    """File `position` (in `resume.files` order) of the lost attempt this lease resumes:
    its committed prefix, then the checkpoint's files; check each against the claim's
    `resume.files[position].sha256`. `Range: bytes=N-` resumes a broken-off download."""
    ref = service.lease_resume_file(session, provider, token, position, now)
    return stream_blob(store, ref.sha256, ref.size, range_header, f"resume file {ref.name}")


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
def job_results(
    job_id: str, user: CurrentUser, session: SessionDep, policy: ReleasePolicyDep
) -> list[ResultPublic]:
    """The job's results, once an oracle quorum's verdict released them (409 before, with
    what the release waits on: `GET /jobs/{job_id}/release`)."""
    rows = service.job_results(session, user, job_id, policy)
    return [ResultPublic.model_validate(r) for r in rows]


_BYTES_FROM = re.compile(r"bytes=(\d{1,19})-")


def stream_blob(
    store: BlobStore,
    sha256: str,
    size: int,
    range_header: str | None,
    what: str,
    headers: dict[str, str] | None = None,
) -> StreamingResponse:
    """The blob streamed from the store (never read whole); `Range: bytes=N-` resumes a
    broken-off download from byte N (206). `X-Content-SHA256` is always the whole blob's."""
    start = 0
    if range_header is not None:
        match = _BYTES_FROM.fullmatch(range_header.strip())
        if match is None:
            raise BadRequest("only 'Range: bytes=FIRST-' is served (to resume a download)")
        start = int(match.group(1))
        if start >= size and size > 0:
            raise RangeNotSatisfiable(f"{what} has {size} bytes; nothing from byte {start}")
    try:
        chunks = store.open_chunks(sha256, start=start)
    except BlobMissing as e:
        raise NotFound(f"the bytes of {what} are missing from storage") from e
    answer = {
        CONTENT_SHA256_HEADER: sha256,
        "Content-Length": str(size - start),
        "Accept-Ranges": "bytes",
        **(headers or {}),
    }
    if range_header is not None:
        answer["Content-Range"] = f"bytes {start}-{max(start, size - 1)}/{size}"
    return StreamingResponse(
        chunks,
        status_code=206 if range_header is not None else 200,
        media_type="application/octet-stream",
        headers=answer,
    )


@router.get("/jobs/{job_id}/results/{name:path}", response_class=StreamingResponse)
def job_result(
    job_id: str,
    name: str,
    user: CurrentUser,
    session: SessionDep,
    store: BlobStoreDep,
    policy: ReleasePolicyDep,
    range_header: Annotated[str | None, Header(alias="Range")] = None,
) -> StreamingResponse:
    row = service.job_result(session, user, job_id, name, policy)
    return stream_blob(
        store,
        row.sha256,
        row.size,
        range_header,
        f"result {name!r}",
        {"Content-Disposition": f"attachment; filename*=UTF-8''{quote(name.rsplit('/', 1)[-1])}"},
    )


@router.get("/jobs/{job_id}/usage")
def job_usage(job_id: str, user: CurrentUser, session: SessionDep) -> UsagePublic | None:
    row = service.job_usage(session, user, job_id)
    return None if row is None else UsagePublic.model_validate(row)
