"""The FastAPI application: `create_app(settings)` builds it; nothing happens at import."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool

from api import reads as read_caches
from api.clock import Clock, utcnow
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.errors import ApiError, conflict_of
from api.fastpath import LeanReads, error_response
from api.middleware import BodySizeLimit, RateLimit
from api.migrate import upgrade_head
from api.routes import api_router
from api.routes.web import router as web_router
from api.routes.worker_io import streams_body
from api.services import chain_watch
from api.services.maintenance import sweep
from proofnet.json_limits import JsonLimits
from proofnet.settings import Settings, build_settings

log = logging.getLogger(__name__)


def create_app(
    settings: Settings | None = None,
    *,
    config: ApiConfig | None = None,
    engine: Engine | None = None,
    clock: Clock = utcnow,
    run_sweeper: bool = True,
    lean_reads: bool = True,
) -> FastAPI:
    """Build the API. `config` overrides what `settings` gives; `engine` reuses a pool;
    `lean_reads=False` leaves job status and balance reads to their FastAPI routes rather
    than `api.fastpath` (same answers, more CPU per request).

    On startup the app migrates the database to head (unless `config.auto_migrate` is off),
    starts the lease sweeper, the chain watcher when `config.chain_watch` is on and a
    deployment is configured (api.services.chain_watch; `app.state.run_chain_watch = False`
    keeps it off) and, on PostgreSQL, listens for changes other processes make
    (api.reads); all stop with the app.
    """
    settings = settings or build_settings()
    if config is None:
        config = ApiConfig.from_settings(settings)
    owns_engine = engine is None
    db = engine if engine is not None else make_engine(config.database_url)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if config.auto_migrate:
            await run_in_threadpool(upgrade_head, db)
        await read_caches.start(app.state, db)
        tasks = [asyncio.create_task(_sweeper(app))] if run_sweeper else []
        if chain_watch.wanted(app.state):
            watch_config = chain_watch.config_of(app.state.config)
            tasks.append(
                asyncio.create_task(
                    chain_watch.run(lambda: chain_watch.build(app.state), watch_config)
                )
            )
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await read_caches.stop(app.state)
            pool = getattr(app.state, "read_pool", None)
            if pool is not None:
                await run_in_threadpool(pool.close)
                del app.state.read_pool
            if owns_engine:
                db.dispose()

    app = FastAPI(
        title="proofnet API",
        version="1",
        lifespan=lifespan,
        openapi_url="/api/v1/openapi.json",
        # Served by api.routes.web from files in the installed packages (no CDN).
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.config = config
    app.state.engine = db
    app.state.clock = clock
    # FastAPI tries routes in order: the two most-polled reads come first. They are
    # documented once, where api_router lists them.
    app.include_router(_polled_reads(), include_in_schema=False)
    app.include_router(api_router)
    app.include_router(web_router)
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    # Every insert under a unique constraint can lose a race to a concurrent one (PostgreSQL
    # runs them at once): the loser is told 409, never 500 (api.errors.conflict_of).
    app.add_exception_handler(IntegrityError, _integrity_error)  # type: ignore[arg-type]
    # Each add_middleware wraps what is there, so the last added runs first: the rate
    # limit refuses floods before any body is read, then the body size limit, then hostile
    # JSON (too deep, integers past 64 bits: proofnet.json_limits), then the lean read
    # path (inside all, so all apply to it).
    if lean_reads:
        app.add_middleware(LeanReads, state=app.state)
    app.add_middleware(JsonLimits, max_bytes=config.max_body_bytes, streams=streams_body)
    app.add_middleware(BodySizeLimit, max_bytes=config.max_body_bytes, streams=streams_body)
    app.add_middleware(RateLimit, per_minute=config.rate_limit_per_minute)
    return app


def _polled_reads() -> APIRouter:
    from api.routes import balances, jobs

    router = APIRouter(prefix="/api/v1")
    router.add_api_route("/jobs/{job_id}/status", jobs.job_status, methods=["GET"])
    router.add_api_route("/balances/{address}", balances.get_balance, methods=["GET"])
    return router


async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
    return error_response(exc)


async def _integrity_error(_request: Request, exc: IntegrityError) -> JSONResponse:
    conflict = conflict_of(exc)
    if conflict is None:
        raise exc
    log.info("concurrent change refused: %s", str(exc.orig)[:200])
    return error_response(conflict)


def _sweep_once(app: FastAPI) -> None:
    with open_session(app.state.engine) as session:
        report = sweep(session, app.state.config, app.state.clock())
    if report.leases_expired:
        log.info("requeued %d job(s) whose leases expired", report.leases_expired)


async def _sweeper(app: FastAPI) -> None:
    interval = app.state.config.sweep_interval_s
    while True:
        await asyncio.sleep(interval)
        try:
            await run_in_threadpool(_sweep_once, app)
        except Exception:  # keep sweeping: one failed pass (db restart) must not stop it
            log.exception("lease sweep failed")
