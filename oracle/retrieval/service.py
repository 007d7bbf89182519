"""Wiring retrieval challenges into the oracle process: a lifespan hook running rounds on
an interval (`PROOFNET_ORACLE_STORAGE_CHALLENGE_INTERVAL_S`; 0 runs none)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from apscheduler.schedulers.background import BackgroundScheduler
from fastapi import FastAPI
from nacl.signing import SigningKey

from chain.offchain.backends import BLOCKFROST_URLS
from oracle.retrieval.challenger import (
    Beacon,
    BeaconError,
    Challenger,
    chain_beacon,
    random_beacon,
    s3_writer,
)
from oracle.retrieval.feed import HttpPlacementFeed, PlacementFeedError
from proofnet.egress import EgressPolicy
from proofnet.pinned_http import pinned_client
from proofnet.settings import Settings

log = logging.getLogger("oracle.retrieval")


class RetrievalConfigError(ValueError):
    """The retrieval settings are unusable; the message names the setting."""


def egress_of(settings: Settings) -> EgressPolicy:
    networks = [n for n in settings.oracle_storage_allow_networks.split(",") if n.strip()]
    try:
        return EgressPolicy.allowing(networks)
    except ValueError as exc:
        raise RetrievalConfigError(f"PROOFNET_ORACLE_STORAGE_ALLOW_NETWORKS: {exc}") from exc


def run_round(challenger: Challenger) -> None:
    try:
        report = challenger.round()
    except (PlacementFeedError, BeaconError) as exc:
        log.warning("storage challenge round skipped: %s", exc)
        return
    if report.outcomes:
        log.info("storage challenges: %d passed, %d failed", report.passed, report.failed)


def beacon_of(settings: Settings, http: httpx.Client) -> Beacon:
    """The chain's latest block hash where the oracle reads a Blockfrost-shaped API (the
    devnet's, or Blockfrost's), else fresh randomness (which a co-signer cannot tell from
    a picked seed: docs/storage.md)."""
    if settings.chain_backend == "devnet":
        return chain_beacon(http, settings.devnet_url)
    if settings.chain_backend == "blockfrost" and settings.network in BLOCKFROST_URLS:
        http.headers["project_id"] = settings.blockfrost_project_id
        return chain_beacon(http, BLOCKFROST_URLS[settings.network])
    return random_beacon


def retrieval_hook(
    settings: Settings, signing_key: SigningKey
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """The hook for `oracle.app.create_app`; validates the settings now, at start-up."""
    policy = egress_of(settings)
    interval = settings.oracle_storage_challenge_interval_s

    @contextlib.asynccontextmanager
    async def hook(app: FastAPI) -> AsyncIterator[None]:
        if interval <= 0:
            yield
            return
        reads = pinned_client(policy, allow_http=True, timeout=30.0)
        api = httpx.Client(timeout=30.0)
        chain = httpx.Client(timeout=30.0)
        challenger = Challenger(
            engine=app.state.engine,
            feed=HttpPlacementFeed(api, settings.api_url, signing_key, settings.network),
            http=reads,
            # Writes of re-replicated copies go through the same pinned client as reads.
            writer=s3_writer(
                reads, settings.oracle_storage_access_key, settings.oracle_storage_secret_key
            ),
            beacon=beacon_of(settings, chain),
            max_strikes=settings.oracle_storage_max_strikes,
            strike_window_s=settings.oracle_storage_strike_window_s,
        )
        scheduler: Any = BackgroundScheduler()
        scheduler.add_job(
            run_round, "interval", args=[challenger], seconds=interval, max_instances=1,
            coalesce=True,
        )  # fmt: skip
        scheduler.start()
        try:
            yield
        finally:
            scheduler.shutdown(wait=True)
            reads.close()
            api.close()
            chain.close()

    return hook
