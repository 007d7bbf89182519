"""`GET /api/v1/bundles/{sha256}`: a settlement's attestation bundle, relayed from the
oracles and checked against its hash (`api.services.bundles`). Public, immutable."""

from __future__ import annotations

import threading
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response
from starlette.concurrency import run_in_threadpool

from api.errors import NotFound
from api.services.bundles import BundleRelay

router = APIRouter(tags=["bundles"])
_relay_lock = threading.Lock()


def get_bundle_relay(request: Request) -> BundleRelay:
    """`app.state.bundle_relay`, else one over the oracles the config lists (made once)."""
    state = request.app.state
    relay = getattr(state, "bundle_relay", None)
    if relay is None:
        with _relay_lock:
            relay = getattr(state, "bundle_relay", None)
            if relay is None:
                relay = state.bundle_relay = BundleRelay(state.config.cancel_oracle_urls)
    return relay  # type: ignore[no-any-return]


@router.get(
    "/bundles/{sha256}",
    response_class=Response,
    responses={
        200: {"content": {"application/json": {}}, "description": "the bundle's exact bytes"},
        404: {"description": "no oracle has this bundle"},
        503: {"description": "no oracle could be asked, or one served other bytes"},
    },
)
async def bundle(
    sha256: Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")],
    relay: Annotated[BundleRelay, Depends(get_bundle_relay)],
) -> Response:
    body = await run_in_threadpool(relay.get, sha256)
    if body is None:
        raise NotFound(f"no oracle has bundle {sha256}")
    return Response(
        body,
        media_type="application/json",
        headers={"Cache-Control": "public, max-age=31536000, immutable"},
    )
