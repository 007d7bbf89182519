"""The one place that turns settings into a pycardano `ChainContext`.

Every component (API, oracle, demo, auditor, CLI) asks here, so switching between the local
devnet, hosted Blockfrost and a self-hosted node (Ogmios + Kupo) is one setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from blockfrost import BlockFrostApi
from pycardano import BlockFrostChainContext, ChainContext, Network

from chain.offchain.errors import BackendConfigError
from proofnet.settings import Settings

BLOCKFROST_URLS = {
    "mainnet": "https://cardano-mainnet.blockfrost.io/api",
    "preprod": "https://cardano-preprod.blockfrost.io/api",
    "preview": "https://cardano-preview.blockfrost.io/api",
}

# The devnet accepts any project id; Blockfrost's client insists on sending one.
DEVNET_PROJECT_ID = "devnet"


class LazyBlockFrostChainContext(BlockFrostChainContext):
    """pycardano's Blockfrost context, minus the request its constructor makes.

    Services (oracle, API) must start while the chain backend is unreachable and retry
    later, so the first epoch lookup waits until something needs it.
    """

    def __init__(self, project_id: str, base_url: str) -> None:
        self._network = Network.MAINNET if "mainnet" in base_url else Network.TESTNET
        self._project_id = project_id
        self._base_url = base_url
        self.api = BlockFrostApi(project_id=project_id, base_url=base_url)
        self._lazy_epoch_info: Any = None
        self._epoch = None
        self._genesis_param = None
        self._protocol_param = None

    @property  # type: ignore[override]
    def _epoch_info(self) -> Any:
        if self._lazy_epoch_info is None:
            self._lazy_epoch_info = self.api.epoch_latest()
        return self._lazy_epoch_info

    @_epoch_info.setter
    def _epoch_info(self, value: Any) -> None:
        self._lazy_epoch_info = value


@dataclass(frozen=True)
class BackendDescription:
    """What a backend is, for logs and `proofnet` output (never includes secrets)."""

    kind: str
    network: str
    url: str


def pycardano_network(settings: Settings) -> Network:
    return Network.MAINNET if settings.network == "mainnet" else Network.TESTNET


def describe_backend(settings: Settings) -> BackendDescription:
    if settings.chain_backend == "devnet":
        return BackendDescription("devnet", "devnet", settings.devnet_url)
    if settings.chain_backend == "blockfrost":
        return BackendDescription(
            "blockfrost", settings.network, BLOCKFROST_URLS.get(settings.network, "?")
        )
    return BackendDescription("ogmios", settings.network, settings.ogmios_url)


def blockfrost_at(url: str, project_id: str | None = None) -> LazyBlockFrostChainContext:
    """A Blockfrost-shaped backend at an explicit REST root (`.../api/v0` or `.../api`): the
    devnet, hosted Blockfrost or anything answering its shapes (a local blockfrost-ryo)."""
    base = url.rstrip("/")
    # pycardano appends the API version itself when given the server root.
    root = base[: -len("/v0")] if base.endswith("/v0") else base
    return LazyBlockFrostChainContext(project_id=project_id or DEVNET_PROJECT_ID, base_url=root)


def history_api(context: ChainContext) -> Any:
    """The REST client of a Blockfrost-shaped context, for reading past transactions, their
    metadata and redeemers, and label or address listings (what auditors and followers
    read). An Ogmios node keeps no such index: BackendConfigError says what to use."""
    api = getattr(context, "api", None)
    if api is None or not hasattr(api, "transaction_cbor"):
        raise BackendConfigError(
            "reading past transactions needs a Blockfrost-shaped backend "
            "(PROOFNET_CHAIN_BACKEND=devnet or blockfrost); Ogmios serves the current "
            "ledger only"
        )
    return api


def chain_context(settings: Settings) -> ChainContext:
    """Build the pycardano `ChainContext` that `settings` selects."""
    backend = settings.chain_backend
    if backend == "devnet":
        return blockfrost_at(settings.devnet_url)
    if backend == "blockfrost":
        if settings.network == "devnet":
            raise BackendConfigError("blockfrost needs network preprod, preview or mainnet")
        if not settings.blockfrost_project_id:
            raise BackendConfigError("blockfrost needs PROOFNET_BLOCKFROST_PROJECT_ID")
        # pycardano infers mainnet from the URL; testnets are its default.
        return LazyBlockFrostChainContext(
            project_id=settings.blockfrost_project_id, base_url=BLOCKFROST_URLS[settings.network]
        )
    if backend == "ogmios":
        from urllib.parse import urlparse

        from pycardano.backend.kupo import KupoChainContextExtension
        from pycardano.backend.ogmios_v6 import OgmiosV6ChainContext

        url = urlparse(settings.ogmios_url)
        ogmios = OgmiosV6ChainContext(
            host=url.hostname or "127.0.0.1",
            port=url.port or 1337,
            secure=url.scheme == "wss",
            network=pycardano_network(settings),
        )
        if settings.kupo_url:
            return KupoChainContextExtension(ogmios, kupo_url=settings.kupo_url)
        return ogmios
    raise BackendConfigError(f"unknown chain backend {backend!r}")
