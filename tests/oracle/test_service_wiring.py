"""The served oracle's verification context is pinned to its deployment: every escrow check
(batch script, oracle config, NTX unit) compares against it, and without one the oracle
verifies nothing (every verification waits, saying why) rather than verify escrows of any
deployment."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from escrow_chain import deployment
from oracle_fixtures import make_world

from oracle.keys import write_key
from oracle.metrics import OracleMetrics
from oracle.service import (
    OracleConfigError,
    context_from_settings,
    data_policy_of,
    deployment_of,
    repo_rewrites_of,
)
from oracle.verification.verify import verify
from proofnet.settings import Settings


def _settings(tmp_path: Path, **values: object) -> Settings:
    key_file = tmp_path / "oracle.skey"
    if not key_file.exists():
        write_key(key_file)
    return Settings(oracle_key_file=key_file, data_dir=tmp_path, **values)  # type: ignore[arg-type]


def test_the_served_context_pins_the_deployment(tmp_path: Path) -> None:
    deployed = deployment(batch_hash="44" * 28, config_policy="55" * 28)
    path = tmp_path / "deployment.json"
    deployed.save(path)
    ctx = context_from_settings(
        _settings(tmp_path, deployment_file=path),
        store=None,
        metrics=OracleMetrics(),  # type: ignore[arg-type]
    )
    assert ctx.escrow_script_hash == deployed.escrow_hash
    assert ctx.batch_credential == "44" * 28
    assert (ctx.config_policy, ctx.config_name) == ("55" * 28, deployed.config_name)
    assert (ctx.ntx_policy, ctx.ntx_name) == (deployed.ntx_policy, deployed.ntx_name)
    # The settlement engine's deployment serves as well.
    settlement = _settings(tmp_path, settlement_deployment_file=path)
    assert deployment_of(settlement) == deployed


def test_without_a_deployment_the_oracle_does_not_verify(tmp_path: Path) -> None:
    """The attack it stops: an oracle wired without its deployment verified escrows that
    trust any batch script; now it verifies nothing at all until configured. Honest twin:
    the same world verifies under a context pinned to the right deployment."""
    ctx = context_from_settings(_settings(tmp_path), store=None, metrics=OracleMetrics())  # type: ignore[arg-type]
    assert "PROOFNET_DEPLOYMENT_FILE" in ctx.unconfigured
    world = make_world()
    waiting = verify(
        world.sign(), dataclasses.replace(world.context(), unconfigured=ctx.unconfigured)
    )
    assert waiting.outcome == "retry" and "PROOFNET_DEPLOYMENT_FILE" in waiting.message
    assert verify(world.sign(), world.context(batch_credential="11" * 28)).ok
    path = tmp_path / "deployment.json"
    deployment().save(path)
    other_unit = _settings(tmp_path, deployment_file=path, ntx_policy_id="cd" * 28)
    with pytest.raises(OracleConfigError, match="another unit"):
        deployment_of(other_unit)


def test_a_served_oracle_runs_no_job_code_outside_the_demo(tmp_path: Path) -> None:
    """The attack it stops: an oracle replaying job code on its own host (beside its key).
    Served, it draws verifiers; the demo's local replay is refused on any network but the
    devnet, and taken there (the demo's twin)."""
    from oracle.verification.spotcheck import LocalSpotChecker
    from oracle.verification.verifiers import VerifierSpotChecker

    metrics = OracleMetrics()
    served = context_from_settings(_settings(tmp_path, network="preprod"), None, metrics)  # type: ignore[arg-type]
    assert isinstance(served.spot_checker, VerifierSpotChecker)
    with pytest.raises(OracleConfigError, match="devnet only"):
        context_from_settings(
            _settings(tmp_path, network="preprod", oracle_demo_local_replay=True),
            None,  # type: ignore[arg-type]
            metrics,
        )
    demo = context_from_settings(
        _settings(tmp_path, network="devnet", oracle_demo_local_replay=True),
        None,  # type: ignore[arg-type]
        metrics,
    )
    assert isinstance(demo.spot_checker, LocalSpotChecker)


def test_the_oracles_data_and_repository_settings(tmp_path: Path) -> None:
    """Spot checks fetch by the operator's rules: nothing local and https to public
    addresses by default; mirrors and local dirs only where the settings name them."""
    default = data_policy_of(Settings())
    assert not default.allow_http and default.local_dirs == () and default.egress.allow == ()
    assert repo_rewrites_of(Settings()) == {}
    settings = Settings(
        oracle_repo_rewrites="https://git.example.test/=file:///srv/mirrors/",
        oracle_local_data_dirs=str(tmp_path),
        oracle_data_allow_networks="10.0.0.0/8",
    )
    assert repo_rewrites_of(settings) == {"https://git.example.test/": "file:///srv/mirrors/"}
    assert data_policy_of(settings).local_dirs == (tmp_path,)
    assert data_policy_of(settings).egress.refusal("10.9.9.9") is None
    with pytest.raises(OracleConfigError, match="PREFIX=REPLACEMENT"):
        repo_rewrites_of(Settings(oracle_repo_rewrites="no-equals-sign"))
    with pytest.raises(OracleConfigError, match="ALLOW_NETWORKS"):
        data_policy_of(Settings(oracle_data_allow_networks="nope"))
