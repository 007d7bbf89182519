"""Backend selection: one place turns settings into a pycardano ChainContext."""

from __future__ import annotations

import pytest
from pycardano import BlockFrostChainContext
from pycardano.backend.kupo import KupoChainContextExtension
from pycardano.backend.ogmios_v6 import OgmiosV6ChainContext

from chain.devnet.testing import RunningDevnet
from chain.offchain.backends import chain_context, describe_backend
from chain.offchain.errors import BackendConfigError
from proofnet.settings import build_settings


def test_devnet_backend_talks_to_a_running_devnet(devnet: RunningDevnet) -> None:
    settings = build_settings(chain_backend="devnet", devnet_url=devnet.url)
    context = chain_context(settings)
    assert isinstance(context, BlockFrostChainContext)
    assert context.protocol_param.max_tx_size == devnet.ledger.protocol_params().max_tx_size
    assert context.last_block_slot >= 0
    assert list(context.protocol_param.cost_models["PlutusV3"].values()) == list(
        devnet.ledger.protocol_params().cost_models["PlutusV3"]
    )


def test_blockfrost_needs_a_real_network_and_a_project_id() -> None:
    with pytest.raises(BackendConfigError, match="preprod, preview or mainnet"):
        chain_context(build_settings(chain_backend="blockfrost", network="devnet"))
    with pytest.raises(BackendConfigError, match="PROJECT_ID"):
        chain_context(
            build_settings(chain_backend="blockfrost", network="preprod", blockfrost_project_id="")
        )


def test_ogmios_with_kupo_is_built_without_touching_the_network() -> None:
    settings = build_settings(
        chain_backend="ogmios",
        network="preprod",
        ogmios_url="wss://node.example:443",
        kupo_url="http://kupo.example:1442",
    )
    context = chain_context(settings)
    assert isinstance(context, KupoChainContextExtension)
    inner = context._wrapped_backend
    assert isinstance(inner, OgmiosV6ChainContext)
    assert (inner.host, inner.port, inner.secure) == ("node.example", 443, True)


def test_ogmios_without_kupo_is_plain_ogmios() -> None:
    settings = build_settings(chain_backend="ogmios", network="preview", kupo_url="")
    assert isinstance(chain_context(settings), OgmiosV6ChainContext)


def test_description_never_carries_the_project_id() -> None:
    settings = build_settings(
        chain_backend="blockfrost", network="preprod", blockfrost_project_id="preprodSECRET"
    )
    description = describe_backend(settings)
    assert description.kind == "blockfrost" and description.network == "preprod"
    assert "SECRET" not in repr(description)


def test_environment_selects_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROOFNET_CHAIN_BACKEND", "ogmios")
    monkeypatch.setenv("PROOFNET_NETWORK", "mainnet")
    settings = build_settings()
    assert (settings.chain_backend, settings.network) == ("ogmios", "mainnet")


def test_building_a_context_needs_no_reachable_chain() -> None:
    # Services start while the chain is down and retry later; the first query reports it.
    settings = build_settings(chain_backend="devnet", devnet_url="http://127.0.0.1:9/api/v0")
    context = chain_context(settings)
    with pytest.raises(Exception, match="Connection refused|Max retries"):
        _ = context.epoch
