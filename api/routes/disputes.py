"""Dispute units (api/services/disputes.py): an oracle posts a signed dispute of a
provider's segment; the provider's worker reads it and its proof files, posts its signed
commitment to its sandbox replay, then the reveal; oracles read both back."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path
from fastapi.responses import StreamingResponse

from api.deps import CurrentProvider, NowDep, SessionDep
from api.errors import BadRequest
from api.routes.oracle_feed import OracleKey
from api.routes.proof_keys import FileRef
from api.routes.worker_io import BlobStoreDep, stream_blob
from api.schemas.common import PublicBody, RequestBody
from api.services import disputes as service
from proofnet.messages.dispute import DisputeError, DisputeTask

router = APIRouter(tags=["verification"])


class DisputeStatePublic(PublicBody):
    id: int
    digest: str
    commitment: dict[str, Any] | None
    reveal: dict[str, Any] | None
    created_at: datetime


class PendingDisputePublic(PublicBody):
    id: int
    task: dict[str, Any]
    spec: dict[str, Any]
    files: list[FileRef]
    committed: bool


class AnswerBody(RequestBody):
    answer: dict[str, Any]


def _state(state: service.DisputeState) -> DisputeStatePublic:
    return DisputeStatePublic(
        id=state.id,
        digest=state.digest,
        commitment=state.commitment,
        reveal=state.reveal,
        created_at=state.created_at,
    )


@router.post("/oracle/disputes", status_code=201)
def post_dispute(
    body: dict[str, Any], oracle: OracleKey, session: SessionDep, now: NowDep
) -> DisputeStatePublic:
    """An oracle's signed dispute for the provider (the same dispute twice: one unit)."""
    try:
        task = DisputeTask.from_json(body)
    except DisputeError as e:
        raise BadRequest(str(e)) from e
    return _state(service.record_dispute(session, oracle, task, now))


@router.get("/oracle/disputes/{digest}")
def dispute_state(
    _oracle: OracleKey, session: SessionDep, digest: Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")]
) -> DisputeStatePublic:
    return _state(service.state(session, digest))


@router.get("/worker/disputes")
def pending_disputes(provider: CurrentProvider, session: SessionDep) -> list[PendingDisputePublic]:
    """The disputes of this worker's proofs it has not revealed its answer to yet."""
    return [
        PendingDisputePublic(
            id=p.row_id,
            task=p.task.to_json(),
            spec=dict(p.spec),
            files=[FileRef(name=n, sha256=f.sha256, size=f.size) for n, f in p.files],
            committed=p.committed,
        )
        for p in service.pending_for(session, provider)
    ]


@router.get("/worker/disputes/{unit_id}/files/{name:path}", response_class=StreamingResponse)
def dispute_file(
    unit_id: int,
    name: str,
    provider: CurrentProvider,
    session: SessionDep,
    store: BlobStoreDep,
    range_header: Annotated[str | None, Header(alias="Range")] = None,
) -> StreamingResponse:
    """A proof file the dispute names, as the verifiers got it (streamed as uploaded)."""
    upload = service.task_file(session, provider, unit_id, name)
    return stream_blob(store, upload.sha256, upload.size, range_header, repr(name))


@router.post("/worker/disputes/{unit_id}/commitment")
def post_commitment(
    unit_id: int, body: AnswerBody, provider: CurrentProvider, session: SessionDep, now: NowDep
) -> DisputeStatePublic:
    return _state(service.record_commitment(session, provider, unit_id, body.answer, now))


@router.post("/worker/disputes/{unit_id}/reveal")
def post_reveal(
    unit_id: int, body: AnswerBody, provider: CurrentProvider, session: SessionDep, now: NowDep
) -> DisputeStatePublic:
    return _state(service.record_reveal(session, provider, unit_id, body.answer, now))
