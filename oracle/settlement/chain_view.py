"""`ChainView` over the Blockfrost REST shapes: the devnet, hosted Blockfrost or any server
that answers them (`node_chain_view.NodeChainView` is the same over Ogmios and Kupo;
`chain_view_from_settings` picks).  Only confirmed chain state and the mempool are read; nothing is cached,
so a rollback is visible on the next call."""

from __future__ import annotations

from typing import Any

import httpx

from proofnet.settings import Settings

from .node_chain_view import NodeChainView
from .ports import ChainUnavailable, OutRef, SpendStatus, SubmitRejected, TxStatus

BLOCKFROST_URLS = {
    "mainnet": "https://cardano-mainnet.blockfrost.io/api/v0",
    "preprod": "https://cardano-preprod.blockfrost.io/api/v0",
    "preview": "https://cardano-preview.blockfrost.io/api/v0",
}


class BlockfrostChainView:
    def __init__(self, base_url: str, project_id: str = "devnet", timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(
            timeout=timeout, headers={"project_id": project_id}, follow_redirects=False
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> BlockfrostChainView:
        if settings.chain_backend == "devnet":
            return cls(settings.devnet_url)
        if settings.chain_backend == "blockfrost" and settings.network in BLOCKFROST_URLS:
            return cls(BLOCKFROST_URLS[settings.network], settings.blockfrost_project_id)
        raise ChainUnavailable(
            f"the settlement watcher reads Blockfrost shapes; backend {settings.chain_backend!r}"
            f" on {settings.network!r} is not supported"
        )

    def close(self) -> None:
        self._client.close()

    def _get(self, path: str) -> Any | None:
        """JSON of a 200, None for a 404; anything else means the backend is unwell."""
        try:
            response = self._client.get(f"{self.base_url}{path}")
        except httpx.HTTPError as exc:
            raise ChainUnavailable(f"GET {path}: {exc}") from exc
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise ChainUnavailable(f"GET {path}: {response.status_code} {response.text[:200]}")
        return response.json()

    def tip_height(self) -> int:
        block = self._get("/blocks/latest")
        if block is None or block.get("height") is None:
            raise ChainUnavailable("the backend reports no tip")
        return int(block["height"])

    def tx_status(self, tx_id: str) -> TxStatus:
        tx = self._get(f"/txs/{tx_id}")
        if tx is not None:
            return TxStatus(int(tx["block_height"]), str(tx.get("block", "")) or None, False)
        return TxStatus(None, None, self._get(f"/mempool/{tx_id}") is not None)

    def spend_status(self, ref: OutRef) -> SpendStatus:
        utxos = self._get(f"/txs/{ref.tx_id}/utxos")
        if utxos is None:
            return SpendStatus(exists=False, spent_by=None)
        for output in utxos.get("outputs", []):
            if int(output.get("output_index", -1)) == ref.index and not output.get("collateral"):
                return SpendStatus(exists=True, spent_by=output.get("consumed_by_tx"))
        return SpendStatus(exists=False, spent_by=None)

    def output_cbor(self, ref: OutRef) -> bytes | None:
        from pycardano import Transaction

        body = self._get(f"/txs/{ref.tx_id}/cbor")
        if body is None:
            return None
        tx = Transaction.from_cbor(bytes.fromhex(body["cbor"]))
        outputs = tx.transaction_body.outputs
        if ref.index >= len(outputs):
            return None
        return bytes(outputs[ref.index].to_cbor())

    def submit(self, tx_cbor: bytes) -> str:
        try:
            response = self._client.post(
                f"{self.base_url}/tx/submit",
                content=tx_cbor,
                headers={"Content-Type": "application/cbor"},
            )
        except httpx.HTTPError as exc:
            raise ChainUnavailable(f"submit: {exc}") from exc
        if response.status_code == 200:
            return str(response.json())
        if response.status_code == 400:
            try:
                message = str(response.json().get("message", response.text))
            except ValueError:
                message = response.text
            raise SubmitRejected(message)
        raise ChainUnavailable(f"submit: {response.status_code} {response.text[:200]}")


def chain_view_from_settings(settings: Settings) -> BlockfrostChainView | NodeChainView:
    """The settlement engine's chain: Blockfrost shapes on the devnet and hosted Blockfrost,
    Ogmios and Kupo on a self-hosted node (which needs PROOFNET_KUPO_URL: without Kupo the
    engine cannot tell a spent escrow, nor who spent it)."""
    if settings.chain_backend == "ogmios":
        from chain.offchain.errors import BackendConfigError

        if not settings.kupo_url:
            raise BackendConfigError(
                "settling on PROOFNET_CHAIN_BACKEND=ogmios needs Kupo: set PROOFNET_KUPO_URL"
            )
        return NodeChainView(settings.ogmios_url, settings.kupo_url)
    return BlockfrostChainView.from_settings(settings)
