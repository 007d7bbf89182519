"""The one place that turns settings into a pycardano `ChainContext`.

Every component (API, oracle, demo, auditor, CLI) asks here, so switching between the local
devnet, hosted Blockfrost and a self-hosted node (Ogmios + Kupo) is one setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from blockfrost import BlockFrostApi
from pycardano import BlockFrostChainContext, ChainContext, Network
from pycardano.backend.kupo import KupoChainContextExtension

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
    read). A self-hosted node answers the reads by transaction (found through Kupo, read by
    chain-sync: `chain.offchain.follow.ogmios_history`), not the listings."""
    api = getattr(context, "api", None)
    if api is not None and hasattr(api, "transaction_cbor"):
        return api
    if isinstance(context, NodeChainContext):
        from chain.offchain.follow.kupo import Kupo
        from chain.offchain.follow.ogmios_history import OgmiosHistory

        return OgmiosHistory(context.ogmios_url, Kupo(context.kupo_url))
    if type(context).__name__ == "OgmiosV6ChainContext":
        raise BackendConfigError(
            "reading past transactions through Ogmios needs Kupo: set PROOFNET_KUPO_URL"
        )
    raise BackendConfigError(
        "reading past transactions needs PROOFNET_CHAIN_BACKEND=devnet, blockfrost or "
        "ogmios (with PROOFNET_KUPO_URL)"
    )


def ogmios_context(ogmios_url: str, network: Network) -> Any:
    """pycardano's Ogmios v6 context (the current ledger); builds without connecting."""
    from urllib.parse import urlparse

    from pycardano.backend.ogmios_v6 import OgmiosV6ChainContext

    url = urlparse(ogmios_url)
    return OgmiosV6ChainContext(
        host=url.hostname or "127.0.0.1",
        port=url.port or 1337,
        path=url.path.lstrip("/"),
        secure=url.scheme == "wss",
        network=network,
    )


class NodeChainContext(KupoChainContextExtension):
    """pycardano's Ogmios v6 context with Kupo for UTxOs, remembering both URLs for the
    chain watcher and the auditor (chain-sync, spent outputs). Builds without connecting:
    services start while the node is down."""

    def __init__(self, ogmios_url: str, kupo_url: str, network: Network) -> None:
        super().__init__(ogmios_context(ogmios_url, network), kupo_url=kupo_url)
        self.ogmios_url = ogmios_url
        self.kupo_url = kupo_url


def node_context(settings: Settings) -> ChainContext:
    """Ogmios with Kupo (NodeChainContext), or Ogmios alone when PROOFNET_KUPO_URL is empty
    (current UTxOs from Ogmios; following and auditing then say they need Kupo)."""
    network = pycardano_network(settings)
    if not settings.kupo_url:
        return ogmios_context(settings.ogmios_url, network)  # type: ignore[no-any-return]
    return NodeChainContext(settings.ogmios_url, settings.kupo_url, network)


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
        return node_context(settings)
    raise BackendConfigError(f"unknown chain backend {backend!r}")
