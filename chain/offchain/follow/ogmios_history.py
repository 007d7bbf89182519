"""Past transactions from a self-hosted node, answered in Blockfrost's shapes, so the
auditor reads Ogmios + Kupo through the same code as Blockfrost and the devnet.

A node has no transaction index. Kupo knows where a transaction's outputs were created
(slot and header hash of its block, index in it); chain-sync then starts at Kupo's
checkpoint just before that block and reads forward to it, and the transaction comes with
its CBOR (Ogmios `--include-transaction-cbor`). Everything else (metadata, redeemers) is
read from that CBOR, never from Ogmios' JSON. Listings across transactions (by metadata
label, by address) have no such path: they raise BackendConfigError saying so.

Methods take Blockfrost-python's `return_type` and answer JSON; an unknown transaction is
`NotOnChain` (status 404), as the SDK's error would be.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cbor2

from chain.offchain.errors import BackendConfigError, ChainError
from chain.offchain.follow.blockfrost import ChainMovedError
from chain.offchain.follow.decode import redeemers_of, split_tx
from chain.offchain.follow.kupo import Kupo
from chain.offchain.follow.ogmios import NO_CBOR
from chain.offchain.follow.ogmios_rpc import OgmiosSession, SlotClock

# Blocks read forward from Kupo's checkpoint at most, looking for the transaction's block.
MAX_BLOCKS = 10_000


class NotOnChain(ChainError):
    """The transaction is not on this chain (what Blockfrost answers with 404)."""

    status_code = 404


@dataclass(frozen=True)
class FoundTx:
    tx_id: str
    block_id: str
    height: int
    slot: int
    time: int
    index: int
    valid: bool
    cbor: bytes


def _metadatum(value: Any) -> Any:
    """Transaction metadata as Blockfrost's `json_metadata` renders it (bytes as 0x hex)."""
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, Mapping):
        return {str(_metadatum(k)): _metadatum(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_metadatum(v) for v in value]
    return value


class OgmiosHistory:
    """The Blockfrost reads of `auditor.audit.ChainReader`, over Ogmios and Kupo."""

    def __init__(self, ogmios_url: str, kupo: Kupo, *, timeout_s: float = 30.0) -> None:
        self.ogmios_url = ogmios_url
        self.kupo = kupo
        self.timeout_s = timeout_s
        self._found: dict[str, FoundTx] = {}
        self._clock: SlotClock | None = None

    def find(self, tx_id: str) -> FoundTx:
        if tx_id in self._found:
            return self._found[tx_id]
        located = self.kupo.locate(tx_id)
        if located is None:
            raise NotOnChain(f"Kupo knows no output of {tx_id}")
        before = self.kupo.checkpoint_at_or_before(located.block.slot - 1)
        with OgmiosSession(self.ogmios_url, timeout_s=self.timeout_s) as s:
            if self._clock is None:
                self._clock = s.slot_clock()
            if s.find_intersection([before]) is None:
                raise ChainMovedError(f"Kupo's checkpoint before {tx_id} is not on chain")
            s.next_block()  # rolls backward to the checkpoint
            for _ in range(MAX_BLOCKS):
                step = s.next_block()
                if step["direction"] != "forward":
                    raise ChainMovedError(f"the chain rolled back while looking for {tx_id}")
                block = step["block"]
                if int(block.get("slot", 0)) > located.block.slot:
                    raise NotOnChain(f"{tx_id}'s block {located.block.id} is not on chain")
                if block.get("id") == located.block.id:
                    break
            else:
                raise NotOnChain(f"{tx_id}'s block is more than {MAX_BLOCKS} blocks on")
        for index, tx in enumerate(block.get("transactions") or ()):
            if tx.get("id") != tx_id:
                continue
            if not isinstance(tx.get("cbor"), str):
                raise BackendConfigError(NO_CBOR)
            found = FoundTx(
                tx_id,
                str(block["id"]),
                int(block["height"]),
                int(block["slot"]),
                self._clock.time(int(block["slot"])),
                index,
                tx.get("spends") != "collaterals",
                bytes.fromhex(tx["cbor"]),
            )
            self._found[tx_id] = found
            return found
        raise NotOnChain(f"{tx_id} is not in block {located.block.id}")

    # --- Blockfrost's reads by transaction ---------------------------------------------------

    def transaction(self, tx_id: str, return_type: str | None = None) -> dict[str, Any]:
        tx = self.find(tx_id)
        return {
            "hash": tx.tx_id,
            "block": tx.block_id,
            "block_height": tx.height,
            "slot": tx.slot,
            "block_time": tx.time,
            "index": tx.index,
            "valid_contract": tx.valid,
        }

    def transaction_cbor(self, tx_id: str, return_type: str | None = None) -> dict[str, Any]:
        return {"cbor": self.find(tx_id).cbor.hex()}

    def transaction_metadata(self, tx_id: str, return_type: str | None = None) -> list[Any]:
        raw = self.find(tx_id).cbor
        try:
            aux = cbor2.loads(raw)[3]
        except Exception:  # no auxiliary data (a 3-element pre-Alonzo tx) or garbage
            return []
        if isinstance(aux, cbor2.CBORTag):  # Alonzo+ auxiliary data: tag 259 {0: metadata}
            aux = aux.value.get(0) if isinstance(aux.value, Mapping) else None
        elif isinstance(aux, list):  # Allegra/Mary: [metadata, scripts]
            aux = aux[0] if aux else None
        if not isinstance(aux, Mapping):
            return []
        return [{"label": str(k), "json_metadata": _metadatum(v)} for k, v in aux.items()]

    def transaction_redeemers(self, tx_id: str, return_type: str | None = None) -> list[Any]:
        split_tx(self.find(tx_id).cbor)  # decodes, or ChainDataError
        return [
            {"tx_index": r.index, "purpose": r.purpose, "redeemer_data_hash": None}
            for r in redeemers_of(self.find(tx_id).cbor)
        ]

    # --- listings a node cannot answer -------------------------------------------------------

    def _no_listing(self, what: str) -> Any:
        raise BackendConfigError(
            f"listing {what} needs a chain index (PROOFNET_CHAIN_BACKEND=blockfrost or "
            "devnet); through Ogmios, audit a settlement by its transaction id"
        )

    def metadata_label_json(self, *args: Any, **kwargs: Any) -> Any:
        return self._no_listing("transactions by metadata label")

    def address_transactions(self, *args: Any, **kwargs: Any) -> Any:
        return self._no_listing("an address's transactions")
