"""Verification units (api/services/verifications.py): an oracle lists candidate verifiers
and posts a signed task for the one it drew; the verifier reads its tasks and their proof
files and posts its signed report; oracles read the report back."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query
from fastapi.responses import StreamingResponse

from api.deps import ConfigDep, CurrentProvider, NowDep, SessionDep
from api.errors import BadRequest
from api.routes.oracle_feed import OracleKey
from api.routes.proof_keys import FileRef
from api.routes.worker_io import BlobStoreDep, stream_blob
from api.schemas.common import PublicBody, RequestBody
from api.services import verifications as service
from proofnet.messages.verification import VerificationError, VerificationTask

router = APIRouter(tags=["verification"])


class CandidatePublic(PublicBody):
    worker_key: str
    payout_address: str


class VerificationState(PublicBody):
    id: int
    digest: str
    reported: bool
    report: dict[str, Any] | None
    created_at: datetime


class PendingVerification(PublicBody):
    id: int
    task: dict[str, Any]
    spec: dict[str, Any]
    files: list[FileRef]
    key_requests: list[int]


class ReportBody(RequestBody):
    report: dict[str, Any]


def _state(state: service.VerificationUnitState) -> VerificationState:
    return VerificationState(
        id=state.id,
        digest=state.digest,
        reported=state.report is not None,
        report=state.report,
        created_at=state.created_at,
    )


@router.get("/oracle/verifiers")
def verifier_candidates(
    _oracle: OracleKey,
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
    device_class: Annotated[str, Query(max_length=128)],
    exclude: Annotated[str, Query(pattern=r"^[0-9a-f]{64}$")],
) -> list[CandidatePublic]:
    """Online workers that can replay a proof made on `device_class`, other than worker
    `exclude` (the provider) and any worker paid to its address."""
    found = service.candidates(session, config, device_class, exclude, now)
    return [
        CandidatePublic(worker_key=c.worker_key, payout_address=c.payout_address) for c in found
    ]


@router.post("/oracle/verifications", status_code=201)
def post_task(
    body: dict[str, Any], oracle: OracleKey, session: SessionDep, now: NowDep
) -> VerificationState:
    """An oracle's signed task for the verifier it drew (the same task twice: one unit)."""
    try:
        task = VerificationTask.from_json(body)
    except VerificationError as e:
        raise BadRequest(str(e)) from e
    return _state(service.record_task(session, oracle, task, now))


@router.get("/oracle/verifications/{digest}")
def task_state(
    _oracle: OracleKey, session: SessionDep, digest: Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]
) -> VerificationState:
    """A task's state and, once the verifier answered, its signed report."""
    return _state(service.state(session, digest))


@router.get("/worker/verifications")
def pending_tasks(
    verifier: CurrentProvider, session: SessionDep, now: NowDep
) -> list[PendingVerification]:
    """The tasks this worker was drawn for and has not reported yet (asking makes it a
    candidate verifier for a while: `verifier_online_s`)."""
    return [
        PendingVerification(
            id=p.row_id,
            task=p.task.to_json(),
            spec=dict(p.spec),
            files=[FileRef(name=n, sha256=f.sha256, size=f.size) for n, f in p.files],
            key_requests=p.key_requests,
        )
        for p in service.pending_for(session, verifier, now)
    ]


@router.get("/worker/verifications/{unit_id}/files/{name:path}", response_class=StreamingResponse)
def task_file(
    unit_id: int,
    name: str,
    verifier: CurrentProvider,
    session: SessionDep,
    store: BlobStoreDep,
    range_header: Annotated[str | None, Header(alias="Range")] = None,
) -> StreamingResponse:
    """A proof file the task names, for its verifier (streamed as uploaded)."""
    upload = service.task_file(session, verifier, unit_id, name)
    return stream_blob(store, upload.sha256, upload.size, range_header, repr(name))


@router.post("/worker/verifications/{unit_id}/report")
def post_report(
    unit_id: int, body: ReportBody, verifier: CurrentProvider, session: SessionDep, now: NowDep
) -> VerificationState:
    """The verifier's signed report of the hashes its replay computed."""
    return _state(service.record_report(session, verifier, unit_id, body.report, now))
