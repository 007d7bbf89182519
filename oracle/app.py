"""The oracle's HTTP service: `create_app(...)` builds it; nothing happens at import.

Routes:
- `POST /api/v1/attestations` (body: COSE_Sign1 bytes, `Content-Type: application/cose`).
  The worker's COSE signature is the authentication: unsigned, forged or misaddressed
  attestations are refused with 4xx and a reason code and are never stored. Accepted ones
  answer 202 `{id, status}` (200 with the stored row for a repeat).
- `GET /api/v1/attestations/{id}` and `GET /api/v1/jobs/{job_id}/attestations`: status and
  reason. Public on purpose: an attestation holds nothing secret (the settlement publishes
  every paid attestation in its bundle for auditors), ids are opaque row numbers, and a
  submitter or provider can read where a payout stands without signing in anywhere.
- `GET /api/v1/escrows/{tx_id}/{index}`: an escrow's datum as this oracle reads it on chain
  (`oracle/intake/escrow_info.py`); workers check sealing keys against its submitter.
- `GET /api/v1/deployment`: the protocol deployment this oracle verifies and settles
  against (`proofnet.messages.deployment`; public, cached; 503 when none is configured).
- `GET /metrics`: Prometheus text from the oracle's own registry.

`lifespan_hooks` are async context-manager factories taking the app, entered after the
intake starts and left before it stops (the settlement engine starts its scheduler there);
`routers` are included under the app (e.g. the settlement engine's bundle and quorum routes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, HTTPException, Path, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy import Engine
from starlette.concurrency import run_in_threadpool

from oracle.intake.accept import Intake, RegistryUnavailable, TooManyAttestations
from oracle.intake.early_replay import EarlyReplay
from oracle.intake.escrow_info import escrow_info_router
from oracle.metrics import CONTENT_TYPE, OracleMetrics
from oracle.models import AttestationRecord
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from oracle.verification.verifiers import VerifierSpotChecker
from oracle.verification.verify import Rejection, VerificationContext
from proofnet.json_limits import JsonLimits
from proofnet.limits import TokenBuckets
from proofnet.messages.deployment import DEPLOYMENT_PATH, deployment_headers, not_modified
from proofnet.messages.oracle_api import ATTESTATIONS_PATH, COSE_CONTENT_TYPE
from proofnet.settings import Settings, build_settings

log = logging.getLogger("oracle.app")

LifespanHook = Callable[[FastAPI], AbstractAsyncContextManager[Any]]


def attestation_view(row: AttestationRecord) -> dict[str, Any]:
    return {
        "id": row.id,
        "status": row.status,
        "reason": row.reason or None,
        "message": row.message or None,
        # Whose fault the verdict is ("provider" | "job"), and `message` says why.
        "fault": row.fault,
        "job_id": row.job_id,
        "escrow": {"tx_id": row.escrow_tx_id, "index": row.escrow_index},
        "worker_key": row.worker_key,
        "payout_address": row.payout_address,
        "amount": row.amount,
        "unit": row.unit_index,  # the unit of a topology job; null for a single-unit job
        # The attempt of a resumed job the attestation names (each paid for its segments).
        "attempt": row.attempt,
        "leaf_hash": row.leaf_hash,
        "received_at": row.received_at.isoformat(),
        "updated_at": row.updated_at.isoformat(),
    }


def client_address(request: Request) -> str:
    """Who is asking, for per-address limits: the peer's IP (a proxy in front of the oracle
    must be trusted to be one address)."""
    return request.client.host if request.client is not None else "unknown"


def too_many(retry_after_s: float, detail: str) -> JSONResponse:
    return JSONResponse(
        status_code=429,
        content={"detail": detail},
        headers={"retry-after": str(max(1, math.ceil(retry_after_s)))},
    )


def create_app(
    settings: Settings | None = None,
    *,
    context: VerificationContext | Callable[[AttestationStore], VerificationContext] | None = None,
    engine: Engine | None = None,
    database_url: str | None = None,
    metrics: OracleMetrics | None = None,
    workers: int = 2,
    inline: bool = False,
    sweep_interval_s: float = 5.0,
    early_interval_s: float = 15.0,
    lifespan_hooks: Sequence[LifespanHook] = (),
    routers: Sequence[APIRouter] = (),
    verifier: str = "",
) -> FastAPI:
    """Build the oracle app.

    `context` is the verification context, or a factory given the store (the context reads
    the store); by default it is built from `settings` (`oracle.service.context_from_settings`:
    chain backend, API feed signed with the oracle key, spot checks). The database is
    `engine`, else `database_url`, else `settings.database_url`.
    """
    settings = settings or build_settings()
    owns_engine = engine is None
    db = engine if engine is not None else make_engine(database_url or settings.database_url)
    store = AttestationStore(db, max_retry_delay_s=settings.oracle_max_retry_delay_s)
    metrics = metrics or OracleMetrics()
    if context is None:
        from oracle.service import context_from_settings

        ctx = context_from_settings(settings, store, metrics)
    elif isinstance(context, VerificationContext):
        ctx = context
    else:
        ctx = context(store)
    intake = Intake(
        store,
        ctx,
        metrics,
        workers=workers,
        inline=inline,
        verifier=verifier,
        per_key=TokenBuckets(settings.oracle_attestations_per_minute_per_key),
    )
    per_address = TokenBuckets(settings.oracle_attestations_per_minute_per_address)
    max_bytes = settings.oracle_max_attestation_bytes

    def pending() -> float:
        try:
            return float(store.count_by_status().get("received", 0))
        except Exception:  # a scrape must not fail because the database blinked
            return float("nan")

    metrics.track_pending(pending)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(store.create_schema)
        task = asyncio.create_task(_sweeper(intake, sweep_interval_s))
        early = _early_replay(ctx, store)
        early_task = (
            None if early is None else asyncio.create_task(_early_replayer(early, early_interval_s))
        )
        try:
            async with contextlib.AsyncExitStack() as stack:
                for hook in lifespan_hooks:
                    await stack.enter_async_context(hook(app))
                yield
        finally:
            for running in (task, early_task):
                if running is None:
                    continue
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running
            await run_in_threadpool(intake.close)
            if owns_engine:
                db.dispose()

    app = FastAPI(title="proofnet oracle", version="1", lifespan=lifespan, docs_url="/api/v1/docs")
    app.state.settings = settings
    app.state.store = store
    app.state.engine = db
    app.state.metrics = metrics
    app.state.intake = intake
    app.state.context = ctx
    # Hostile JSON (too deep, integers past 64 bits, NaN) is refused before any route parses
    # it (the co-signing route reads JSON); COSE attestation bodies are not JSON, untouched.
    app.add_middleware(JsonLimits, max_bytes=4 << 20)

    @app.post(ATTESTATIONS_PATH, status_code=202)
    async def submit_attestation(request: Request) -> JSONResponse:
        wait = per_address.take(client_address(request))
        if wait > 0:
            return too_many(wait, "too many attestations from this address; slow down")
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != COSE_CONTENT_TYPE:
            raise HTTPException(415, f"send the COSE_Sign1 bytes as {COSE_CONTENT_TYPE}")
        too_big = f"attestations are at most {max_bytes} bytes"
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise HTTPException(413, too_big)
        body = bytearray()
        async for chunk in request.stream():
            body.extend(chunk)
            if len(body) > max_bytes:
                raise HTTPException(413, too_big)
        try:
            accepted = await run_in_threadpool(intake.accept, bytes(body))
        except Rejection as exc:
            status = {"malformed": 422, "worker_unregistered": 403}.get(str(exc.reason), 400)
            return JSONResponse(
                status_code=status, content={"detail": exc.message, "reason": str(exc.reason)}
            )
        except TooManyAttestations as exc:
            return too_many(exc.retry_after_s, str(exc))
        except RegistryUnavailable as exc:
            return JSONResponse(status_code=503, content={"detail": str(exc)})
        view = attestation_view(accepted.record)
        return JSONResponse(
            status_code=202 if accepted.created else 200,
            content={"id": view["id"], "status": view["status"], "duplicate": not accepted.created},
        )

    @app.get(ATTESTATIONS_PATH + "/{attestation_id}")
    async def get_attestation(
        attestation_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    ) -> dict[str, Any]:
        row = await run_in_threadpool(store.get, attestation_id)
        if row is None:
            raise HTTPException(404, f"no attestation {attestation_id}")
        return attestation_view(row)

    @app.get("/api/v1/jobs/{job_id}/attestations")
    async def job_attestations(job_id: str) -> dict[str, Any]:
        rows = await run_in_threadpool(store.for_job, job_id)
        return {"job_id": job_id, "data": [attestation_view(r) for r in rows]}

    @app.get("/api/v1/jobs/{job_id}/early-checks")
    async def job_early_checks(job_id: str) -> dict[str, Any]:
        """The early replays of the job's first segment: whose fault a failure is and why."""
        rows = await run_in_threadpool(store.early_checks, job_id)
        return {
            "job_id": job_id,
            "data": [
                {
                    "attempt": r.attempt,
                    "nonce": r.nonce,
                    "status": r.status,
                    "fault": r.fault,
                    "reason": r.reason or None,
                    "message": r.message,
                    "prefix_root": r.prefix_root,
                    "verifier": r.verifier,
                    "checked_at": r.checked_at.isoformat(),
                }
                for r in rows
            ],
        }

    @app.get("/metrics")
    async def metrics_route() -> Response:
        body = await run_in_threadpool(metrics.render)
        return Response(content=body, media_type=CONTENT_TYPE)

    @app.get("/api/v1/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(DEPLOYMENT_PATH, response_class=Response)
    def deployment(request: Request) -> Response:
        from oracle.service import OracleConfigError, deployment_of

        deployed = getattr(app.state, "deployment", None)
        if deployed is None:
            try:
                deployed = deployment_of(settings)
            except OracleConfigError as exc:
                return JSONResponse(status_code=503, content={"detail": str(exc)})
            app.state.deployment = deployed
        body = deployed.to_json().encode()
        headers = deployment_headers(body)
        if not_modified(request.headers.get("if-none-match"), headers):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    app.include_router(
        escrow_info_router(
            ctx.chain,
            ctx.escrow_script_hash,
            TokenBuckets(settings.oracle_escrow_lookups_per_minute_per_address),
        )
    )
    for router in routers:
        app.include_router(router)
    return app


def _early_replay(ctx: VerificationContext, store: AttestationStore) -> EarlyReplay | None:
    """The round of early replays, when spot checks are drawn verifiers' and the feed lists
    early commits (never for the local demo's replay on this host)."""
    checker = ctx.spot_checker
    if not isinstance(checker, VerifierSpotChecker) or not callable(
        getattr(ctx.feed, "early_commits", None)
    ):
        return None
    stops = ctx.feed if callable(getattr(ctx.feed, "post_job_fault", None)) else None
    return EarlyReplay(ctx.feed, checker, store, stops)  # type: ignore[arg-type]


async def _early_replayer(early: EarlyReplay, interval: float) -> None:
    while True:
        try:
            await run_in_threadpool(early.run_once)
        except Exception:  # one failed round (database restart) must not stop the rounds
            logging.getLogger("oracle.early").exception("early replay round failed")
        await asyncio.sleep(interval)


async def _sweeper(intake: Intake, interval: float) -> None:
    while True:
        try:
            await run_in_threadpool(intake.sweep)
        except Exception:  # one failed pass (database restart) must not stop the sweeps
            log.exception("verification sweep failed")
        await asyncio.sleep(interval)
