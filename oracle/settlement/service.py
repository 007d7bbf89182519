"""Wiring the settlement engine into an oracle process: its settings, the engine over the
real chain and builders, the app's lifespan hook (start/stop the scheduler) and routers.

    hooks, routers = settlement_extensions(settings, key.signing_key, metrics.registry, db)
    create_app(settings, ..., engine=db, lifespan_hooks=hooks, routers=routers)
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from fastapi import APIRouter, FastAPI
from nacl.signing import SigningKey
from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.engine import Engine
from starlette.concurrency import run_in_threadpool

from oracle.retrieval.blocks import block_reader
from oracle.retrieval.feed import HttpPlacementFeed
from oracle.retrieval.ledger import HoldPolicy, StorageLedger
from proofnet.settings import Settings

from .batcher import ProposerLeaseGuard, SettlementScheduler, default_holder
from .engine import BatchPolicy, SettlementEngine
from .intents import IntentLog
from .metrics import SettlementMetrics
from .queue import AttestationQueue
from .watcher import WatchConfig


class SettlementConfig(BaseModel):
    """The settlement engine's configuration: the `settlement_*` fields of the one settings
    class (`PROOFNET_SETTLEMENT_*`), or values a command line gives."""

    model_config = ConfigDict(frozen=True)

    enabled: bool = False
    deployment_file: Path | None = None
    batch_size: int = Field(default=16, ge=1)
    max_wait_s: float = Field(default=30.0, ge=0)
    interval_s: float = Field(default=2.0, gt=0)
    confirmation_depth: int = Field(default=3, ge=1)
    max_submit_attempts: int = Field(default=3, ge=1)
    lease_ttl_s: float = Field(default=30.0, gt=0)
    cosigners: str = "[]"
    unit_grace_s: float = Field(default=600.0, ge=0)
    unit_deadline_margin_s: float = Field(default=1800.0, ge=0)
    threshold: int = Field(default=1, ge=1)
    holder: str = ""

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> SettlementConfig:
        values = {name: getattr(settings, f"settlement_{name}") for name in cls.model_fields}
        values.update(overrides)
        return cls(**values)


def build_engine(
    settings: Settings,
    config: SettlementConfig,
    signing_key: SigningKey,
    db: Engine,
    registry: CollectorRegistry | None = None,
) -> SettlementEngine:
    """The engine over the configured chain backend and deployment."""
    from pycardano import PaymentSigningKey

    from chain.offchain.backends import chain_context
    from chain.offchain.builders.deployment import Deployment
    from oracle.intake.feed_client import HttpApiFeed

    from .builder_port import CardanoSettlementBuilder
    from .chain_view import chain_view_from_settings
    from .quorum import CoSignerClient, QuorumSigner
    from .readiness import JobEndReadiness, ReadinessPolicy

    if config.deployment_file is None:
        raise ValueError("settlement needs PROOFNET_SETTLEMENT_DEPLOYMENT_FILE")
    deployment = Deployment.load(config.deployment_file)
    key = PaymentSigningKey(bytes(signing_key))
    builder = CardanoSettlementBuilder(chain_context(settings), deployment, key)
    metrics = SettlementMetrics(registry)
    cosigners = [CoSignerClient(c["url"], c["key_hash"]) for c in json.loads(config.cosigners)]
    signer = QuorumSigner(builder, cosigners, config.threshold) if cosigners else None
    chain = chain_view_from_settings(settings)
    readiness = JobEndReadiness(
        HttpApiFeed(settings.api_url, signing_key, settings.network),
        chain,
        db,
        ReadinessPolicy(config.unit_grace_s, config.unit_deadline_margin_s),
    )
    # Storage copies' earnings are paid beside their job's claim (oracle.retrieval); a job
    # that keeps storage waits for its copies as the API lists them. A settlement-only
    # oracle given no API (PROOFNET_API_URL empty: it settles what is fed to its store) has
    # no copies to wait for; its co-signers still apply their own hold.
    source = (
        HttpPlacementFeed(
            httpx.Client(timeout=30.0), settings.api_url, signing_key, settings.network
        )
        if settings.api_url
        else None
    )
    ledger = StorageLedger(
        signing_key,
        settings.network,
        source=source,
        policy=HoldPolicy(
            settings.oracle_storage_placement_grace_s, settings.oracle_storage_final_round_grace_s
        ),
        blocks=block_reader(settings),
    )
    return SettlementEngine(
        IntentLog(db, AttestationQueue(ledger)),
        chain,
        builder,
        signer=signer,
        policy=BatchPolicy(config.batch_size, config.max_wait_s),
        watch=WatchConfig(config.confirmation_depth, config.max_submit_attempts),
        metrics=metrics,
        proposer=config.holder or default_holder(),
        readiness=readiness,
    )


def settlement_extensions(
    settings: Settings,
    signing_key: SigningKey,
    registry: CollectorRegistry | None,
    db: Engine | None = None,
    config: SettlementConfig | None = None,
) -> tuple[list[Any], list[APIRouter]]:
    """Lifespan hooks and routers for `oracle.app.create_app`. The bundle and quorum routes
    are always served; the scheduler runs only when settlement is enabled. The database is
    `db`, else the app's own (`app.state.engine`)."""
    from .cancel import CancelCoSigner
    from .quorum import CoSigner, IntakeReferee
    from .routes import router
    from .slash import SlashCoSigner

    config = config or SettlementConfig.from_settings(settings)

    @contextlib.asynccontextmanager
    async def hook(app: FastAPI) -> AsyncIterator[None]:
        import oracle.settlement.models  # noqa: F401  (registers the tables)
        from oracle.storage.schema import create_tables

        store: Engine = db if db is not None else app.state.engine
        await run_in_threadpool(create_tables, store)
        app.state.settlement_db = store
        scheduler: SettlementScheduler | None = None
        if config.enabled:
            engine = await run_in_threadpool(
                build_engine, settings, config, signing_key, store, registry
            )
            app.state.settlement_cosigner = CoSigner.for_engine(engine, app)
            # The proposer re-checks the segments a co-signer's refusal names itself.
            engine.referee = IntakeReferee(app.state.context)
            app.state.cancel_cosigner = CancelCoSigner.for_engine(engine, app)
            app.state.slash_cosigner = SlashCoSigner.for_engine(engine, app, settings)
            holder = config.holder or default_holder()
            scheduler = SettlementScheduler(
                engine, ProposerLeaseGuard(store, holder, config.lease_ttl_s), config.interval_s
            )
            scheduler.start()
        try:
            yield
        finally:
            if scheduler is not None:
                await run_in_threadpool(scheduler.stop)

    return [hook], [router]
