"""The settlement engine's HTTP routes, included by `oracle.app.create_app(routers=...)`.

- `GET /api/v1/bundles/{sha256}`: the attestation bundle of a batch, byte for byte as its
  hash in the transaction metadata commits to (auditors fetch it here). Every oracle of a
  quorum serves it: the proposer stored it when it planned the batch, each co-signer stores
  the bundle it signed for, so an auditor does not depend on the proposer staying up.
- `POST /api/v1/quorum/sign` (`{"tx_cbor": hex, "bundle": json text}`): a co-signer's
  review of a proposed batch; 200 `{"witness": hex}` or 409 `{"detail": reason}` (with
  `"pending": true` when its own verification of an attestation is only postponed).
- `POST /api/v1/quorum/cancel` (`{"tx_cbor": hex}`): the review of an escrow cancel the API
  forwards for a submitter (`oracle.settlement.cancel`); 200 `{"witness": hex}` or 409.
- `POST /api/v1/quorum/slash` (`{"tx_cbor": hex}`): the review of a bond slash another
  oracle of the quorum proposes (`oracle.settlement.slash`); 200 `{"witness": hex}` or 409.
- `GET /api/v1/quorum/identity`: `{"key_hash": hex}`, the payment key hash this oracle signs
  with (what a cancel must name as a required signer).

The routes read `app.state.settlement_db` (set by the settlement lifespan hook, falling back
to the intake's `app.state.engine`) and `app.state.settlement_cosigner`.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from .models import SettlementBundle

router = APIRouter()
_SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_SIGN_BODY = 2_000_000
# A cancel or a slash is a few kB; its hex twice that.
MAX_REVIEW_BODY = 64_000


def _db(request: Request) -> Any:
    state = request.app.state
    db = getattr(state, "settlement_db", None) or getattr(state, "engine", None)
    if db is None:
        raise HTTPException(503, "the settlement store is not configured")
    return db


@router.get("/api/v1/bundles/{sha256}")
async def bundle(sha256: str, request: Request) -> Response:
    if not _SHA256.fullmatch(sha256):
        raise HTTPException(400, "bundle id must be 64 lowercase hex digits (its SHA-256)")
    db = _db(request)

    def load() -> bytes | None:
        from sqlmodel import Session

        with Session(db) as session:
            row = session.get(SettlementBundle, sha256)
            return None if row is None else row.body

    body = await run_in_threadpool(load)
    if body is None:
        raise HTTPException(404, f"no bundle {sha256}")
    return Response(
        body,
        media_type="application/json",
        headers={"Cache-Control": "public, max-age=31536000, immutable"},
    )


@router.post("/api/v1/quorum/sign")
async def quorum_sign(request: Request) -> Any:
    from .ports import ChainUnavailable
    from .quorum import QuorumPending, QuorumRefusal

    cosigner = getattr(request.app.state, "settlement_cosigner", None)
    if cosigner is None:
        raise HTTPException(503, "this oracle does not co-sign settlements")
    raw = await request.body()
    if len(raw) > MAX_SIGN_BODY:
        raise HTTPException(413, f"body larger than {MAX_SIGN_BODY} bytes")
    try:
        payload = await request.json()
        tx_cbor = bytes.fromhex(payload["tx_cbor"])
        bundle_body = str(payload["bundle"]).encode()
    except (ValueError, KeyError, TypeError) as exc:
        raise HTTPException(400, f"body must be {{tx_cbor: hex, bundle: json}}: {exc}") from exc
    try:
        witness = await run_in_threadpool(cosigner.review, tx_cbor, bundle_body)
    except QuorumPending as exc:  # its own verification not done yet: ask again soon
        return JSONResponse(status_code=409, content={"detail": exc.reason, "pending": True})
    except QuorumRefusal as exc:
        if exc.fees:  # the verifiers the batch must also pay, for the proposer to add
            fees = [{"leaf_hash": leaf, "evidence": e.to_json()} for leaf, e in exc.fees]
            return JSONResponse(status_code=409, content={"detail": exc.reason, "fees": fees})
        if exc.disputed:  # the segments its own draw found not to replay, with the evidence
            disputed = [r.to_json() for r in exc.disputed]
            return JSONResponse(
                status_code=409, content={"detail": exc.reason, "disputed": disputed}
            )
        raise HTTPException(409, exc.reason) from exc
    except ChainUnavailable as exc:
        raise HTTPException(503, f"chain backend unavailable: {exc}") from exc
    await run_in_threadpool(_keep_bundle, _db(request), bundle_body)
    return {"witness": witness.hex()}


def _keep_bundle(db: Any, body: bytes) -> None:
    """Store a bundle this oracle signed for (content-addressed: storing twice is a no-op)."""
    from sqlalchemy.exc import IntegrityError
    from sqlmodel import Session

    from .bundle import parse_bundle

    bundle = parse_bundle(body)  # the review parsed it already: it is well formed
    with Session(db) as session:
        if session.get(SettlementBundle, bundle.sha256) is not None:
            return
        session.add(
            SettlementBundle(sha256=bundle.sha256, merkle_root=bundle.merkle_root.hex(), body=body)
        )
        try:
            session.commit()
        except IntegrityError:  # a concurrent review of the same bundle stored it first
            session.rollback()


def _cancel_cosigner(request: Request) -> Any:
    cosigner = getattr(request.app.state, "cancel_cosigner", None)
    if cosigner is None:  # a service this oracle does not offer: not a server fault
        raise HTTPException(404, "this oracle does not co-sign escrow cancels")
    return cosigner


@router.get("/api/v1/quorum/identity")
async def quorum_identity(request: Request) -> dict[str, str]:
    return {"key_hash": _cancel_cosigner(request).key_hash.payload.hex()}


async def _review(request: Request, cosigner: Any) -> dict[str, str]:
    """A spend another party asks this oracle to co-sign: its witness, or the refusal."""
    from .ports import ChainUnavailable
    from .quorum import QuorumRefusal

    raw = await request.body()
    if len(raw) > MAX_REVIEW_BODY:
        raise HTTPException(413, f"body larger than {MAX_REVIEW_BODY} bytes")
    try:
        payload = await request.json()
        tx_cbor = bytes.fromhex(payload["tx_cbor"])
    except (ValueError, KeyError, TypeError) as exc:
        raise HTTPException(400, f"body must be {{tx_cbor: hex}}: {exc}") from exc
    try:
        witness = await run_in_threadpool(cosigner.review, tx_cbor)
    except QuorumRefusal as exc:
        raise HTTPException(409, exc.reason) from exc
    except ChainUnavailable as exc:
        raise HTTPException(503, f"chain backend unavailable: {exc}") from exc
    return {"witness": witness.hex()}


@router.post("/api/v1/quorum/cancel")
async def quorum_cancel(request: Request) -> dict[str, str]:
    return await _review(request, _cancel_cosigner(request))


@router.post("/api/v1/quorum/slash")
async def quorum_slash(request: Request) -> dict[str, str]:
    cosigner = getattr(request.app.state, "slash_cosigner", None)
    if cosigner is None:  # a service this oracle does not offer: not a server fault
        raise HTTPException(404, "this oracle does not co-sign bond slashes")
    return await _review(request, cosigner)
