"""`GET /api/v1/deployment`: the protocol deployment this API runs with (public, cached).

See `proofnet.messages.deployment`; auditors read it instead of trusting a file."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from api.deps import DeploymentDep
from proofnet.messages.deployment import deployment_headers, not_modified

router = APIRouter(tags=["deployment"])


@router.get(
    "/deployment",
    response_class=Response,
    responses={
        200: {"content": {"application/json": {}}, "description": "the deployment JSON"},
        304: {"description": "not modified (If-None-Match)"},
        503: {"description": "no deployment configured"},
    },
)
def deployment(request: Request, deployed: DeploymentDep) -> Response:
    body = deployed.to_json().encode()
    headers = deployment_headers(body)
    if not_modified(request.headers.get("if-none-match"), headers):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)
