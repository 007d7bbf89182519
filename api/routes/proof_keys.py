"""Key requests for sealed proof files (api/services/proof_keys.py): an oracle asks, the
provider grants, the drawn verifier reads the grant and the files' ciphertexts."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse
from pydantic import Field

from api.deps import CurrentProvider, NowDep, SessionDep
from api.errors import BadRequest
from api.routes.oracle_feed import OracleKey
from api.routes.worker_io import BlobStoreDep, stream_blob
from api.schemas.common import PublicBody, RequestBody
from api.services import proof_keys as service
from proofnet.messages.key_grant import KeyGrantError, KeyRequest

router = APIRouter(tags=["proof-keys"])


class KeyRequestBody(RequestBody):
    job_id: str
    nonce: str
    recipient: str
    files: list[str] = Field(max_length=1024)
    oracle_key: str
    signature: str
    # The lease's provider: a resumed job's attempts share a nonce.
    provider: str | None = None


class KeyRequestState(PublicBody):
    id: int
    answered: bool
    created_at: datetime
    answered_at: datetime | None


class FileRef(PublicBody):
    name: str
    sha256: str
    size: int


class PendingKeyRequest(PublicBody):
    id: int
    request: dict[str, Any]
    files: list[FileRef]


class GrantBody(RequestBody):
    grants: dict[str, dict[str, str]] = Field(max_length=1024)


class KeyGrantPublic(PublicBody):
    id: int
    request: dict[str, Any]
    grants: dict[str, dict[str, str]]
    files: list[FileRef]


def _state(row: Any) -> KeyRequestState:
    return KeyRequestState(
        id=row.id,
        answered=row.grants is not None,
        created_at=row.created_at,
        answered_at=row.answered_at,
    )


@router.post("/oracle/key-requests", status_code=201)
def post_key_request(
    body: KeyRequestBody, oracle: OracleKey, session: SessionDep, now: NowDep
) -> KeyRequestState:
    """An oracle asks the provider of a lease to grant a drawn verifier the content keys of
    some of the lease's sealed uploads (the request is signed by that oracle's key)."""
    try:
        request = KeyRequest.from_json(body.model_dump())
    except KeyGrantError as e:
        raise BadRequest(str(e)) from e
    return _state(service.record_request(session, oracle, request, now))


@router.get("/worker/key-requests")
def pending_key_requests(provider: CurrentProvider, session: SessionDep) -> list[PendingKeyRequest]:
    """Key requests for this worker's leases that it has not answered yet."""
    return [
        PendingKeyRequest(
            id=v.row.id or 0,
            request=v.request.to_json(),
            files=[FileRef.model_validate(f) for f in v.files],
        )
        for v in service.pending_for(session, provider)
    ]


@router.post("/worker/key-requests/{request_id}/grant")
def grant_keys(
    request_id: int, body: GrantBody, provider: CurrentProvider, session: SessionDep, now: NowDep
) -> KeyRequestState:
    """The provider's answer: for each file, its content key wrapped for the verifier."""
    return _state(service.answer(session, provider, request_id, body.grants, now))


@router.get("/worker/key-grants/{request_id}")
def key_grant(request_id: int, verifier: CurrentProvider, session: SessionDep) -> KeyGrantPublic:
    """The grant for a request that names this worker as verifier (409 while unanswered)."""
    view = service.grant_for(session, verifier, request_id)
    assert view.row.grants is not None
    return KeyGrantPublic(
        id=request_id,
        request=view.request.to_json(),
        grants=view.row.grants,
        files=[FileRef.model_validate(f) for f in view.files],
    )


@router.get("/worker/key-grants/{request_id}/files/{name:path}", response_class=StreamingResponse)
def granted_file(
    request_id: int,
    name: str,
    verifier: CurrentProvider,
    session: SessionDep,
    store: BlobStoreDep,
    range_header: Annotated[str | None, Header(alias="Range")] = None,
) -> StreamingResponse:
    """The sealed bytes of a file the request names, for its verifier (streamed)."""
    upload = service.granted_file(session, verifier, request_id, name)
    return stream_blob(store, upload.sha256, upload.size, range_header, repr(name))
