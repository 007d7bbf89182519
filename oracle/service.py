"""Wiring: a `VerificationContext` from settings (chain backend, API feed, spot checks, and
the deployment whose escrows it verifies: escrow script, batch script, oracle config, NTX)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from chain.offchain.backends import chain_context
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.errors import BuilderError
from chain.offchain.scripts import apply_params, script_hash
from oracle.inputs.chain import chain_view_for
from oracle.intake.feed_client import HttpApiFeed
from oracle.keys import OracleKey, OracleKeyError, load_key
from oracle.metrics import OracleMetrics
from oracle.storage.store import AttestationStore
from oracle.verification.node_replay import LocalNodeSpotChecker
from oracle.verification.spotcheck import RepoCache, SpotChecker
from oracle.verification.verifiers import VerifierSpotChecker
from oracle.verification.verify import VerificationContext
from proofnet.egress import EgressPolicy
from proofnet.settings import Settings, absolute
from proofnet.shard_fetch import DataFetchPolicy


@functools.lru_cache(maxsize=1)
def escrow_script_hash() -> str:
    """The escrow validator's hash (it takes no parameters, so every deployment shares it)."""
    return script_hash(apply_params("escrow")).payload.hex()


class OracleConfigError(ValueError):
    """The oracle's settings do not say what it needs to verify anything."""


def deployment_of(settings: Settings) -> Deployment:
    """The deployment whose escrows this oracle pays: `deployment_file`, else the
    settlement engine's. Every escrow check compares against it (batch script, config)."""
    path = settings.deployment_file or settings.settlement_deployment_file
    if path is None:
        raise OracleConfigError(
            "the oracle verifies escrows against its protocol deployment: set "
            "PROOFNET_DEPLOYMENT_FILE (or PROOFNET_SETTLEMENT_DEPLOYMENT_FILE)"
        )
    try:
        deployment = Deployment.load(Path(path))
    except BuilderError as exc:
        raise OracleConfigError(f"the oracle's deployment is unusable: {exc}") from exc
    if settings.ntx_policy_id and (
        settings.ntx_policy_id.lower() != deployment.ntx_policy
        or settings.ntx_asset_name.lower() != deployment.ntx_name
    ):
        raise OracleConfigError(
            "PROOFNET_NTX_POLICY_ID / PROOFNET_NTX_ASSET_NAME name another unit than the "
            f"deployment's NTX ({deployment.ntx_unit})"
        )
    return deployment


def data_policy_of(settings: Settings) -> DataFetchPolicy:
    """How spot checks' data and repositories reach this host (the operator's settings)."""
    networks = [n for n in settings.oracle_data_allow_networks.split(",") if n.strip()]
    try:
        egress = EgressPolicy.allowing(networks)
    except ValueError as exc:
        raise OracleConfigError(f"PROOFNET_ORACLE_DATA_ALLOW_NETWORKS: {exc}") from exc
    dirs = [d for d in settings.oracle_local_data_dirs.split(os.pathsep) if d.strip()]
    return DataFetchPolicy(
        allow_http=settings.oracle_data_allow_http,
        egress=egress,
        local_dirs=tuple(absolute(Path(d)) for d in dirs),
    )


def repo_rewrites_of(settings: Settings) -> dict[str, str]:
    """`PROOFNET_ORACLE_REPO_REWRITES`: PREFIX=REPLACEMENT, comma-separated."""
    out: dict[str, str] = {}
    for item in settings.oracle_repo_rewrites.split(","):
        if not item.strip():
            continue
        prefix, sep, replacement = item.strip().partition("=")
        if not sep or not prefix or not replacement:
            raise OracleConfigError(
                f"PROOFNET_ORACLE_REPO_REWRITES wants PREFIX=REPLACEMENT, got {item!r}"
            )
        out[prefix] = replacement
    return out


def oracle_key(settings: Settings, key_file: Path | None = None) -> OracleKey:
    path = key_file or settings.oracle_key_file
    if path is None:
        raise OracleKeyError("no oracle key: pass --key-file or set PROOFNET_ORACLE_KEY_FILE")
    return load_key(path)


def context_from_settings(
    settings: Settings,
    store: AttestationStore,
    metrics: OracleMetrics,
    *,
    key: OracleKey | None = None,
    spot_check_timeout_s: float = 600.0,
    spot_checks: bool = True,
) -> VerificationContext:
    """`spot_checks=False` leaves proof-of-training checks out (for jobs without a proof
    directory); every other check still runs. Spot checks are verification units run by
    drawn verifiers (`oracle.verification.verifiers`); only the local demo on the devnet replays on the
    oracle's host (`oracle_demo_local_replay`)."""
    key = key or oracle_key(settings)
    try:
        deployment: Deployment | None = deployment_of(settings)
        unconfigured = ""
    except OracleConfigError as exc:
        # Served anyway (health, intake), but nothing is verified, and so nothing is paid,
        # until the deployment is configured: every verification is postponed with why.
        deployment, unconfigured = None, str(exc)
    feed = HttpApiFeed(
        settings.api_url, key.signing_key, settings.network, on_error=metrics.feed_error
    )
    chain = chain_view_for(
        chain_context(settings),
        on_error=metrics.chain_error,
        ttl_s=settings.oracle_chain_cache_ttl_s,
        cache_size=settings.oracle_chain_cache_size,
    )
    spot_checker: SpotChecker | None = None
    if spot_checks and settings.oracle_demo_local_replay:
        if settings.network != "devnet":
            raise OracleConfigError(
                "PROOFNET_ORACLE_DEMO_LOCAL_REPLAY runs job code on the oracle's host: it is "
                "for the local demo on the devnet only"
            )
        data_policy = data_policy_of(settings)
        repos = RepoCache(
            Path(settings.data_dir) / "oracle" / "repos",
            rewrites=repo_rewrites_of(settings),
            egress=data_policy.egress,
        )
        spot_checker = LocalNodeSpotChecker(
            feed,
            repos,
            sign=lambda message: key.signing_key.sign(message).signature,
            timeout_s=spot_check_timeout_s,
            data_cache=Path(settings.data_dir) / "oracle" / "data",
            harness_root=Path(settings.data_dir) / "oracle" / "harness",
            data_policy=data_policy,
        )
    elif spot_checks:
        # A drawn verifier replays; this oracle runs no job code. A disputed replay goes
        # to a second verifier and the provider's own answer through the same API
        # (oracle.verification.referee).
        spot_checker = VerifierSpotChecker(
            feed,
            key.signing_key,
            answer_within_s=settings.oracle_verifier_answer_within_s,
            disputes=feed,
            dispute_within_s=settings.oracle_dispute_within_s,
        )
    return VerificationContext(
        network=settings.network,
        escrow_script_hash=escrow_script_hash() if deployment is None else deployment.escrow_hash,
        chain=chain,
        feed=feed,
        store=store,
        ntx_policy=None if deployment is None else deployment.ntx_policy,
        ntx_name=settings.ntx_asset_name if deployment is None else deployment.ntx_name,
        batch_credential=None if deployment is None else deployment.batch_hash,
        config_policy=None if deployment is None else deployment.config_policy,
        config_name=None if deployment is None else deployment.config_name,
        unconfigured=unconfigured,
        metering_slack=settings.oracle_metering_slack,
        metering_allowance_ms=settings.oracle_metering_allowance_s * 1000,
        spot_checker=spot_checker,
    )
