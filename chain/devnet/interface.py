"""The contract between the devnet ledger and its front ends (REST server, explorer, CLI).

`chain.devnet.ledger.Ledger` implements `DevnetLedger`; the server depends only on this
protocol, so each side can be tested on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from chain.devnet.errors import LedgerError  # noqa: F401  (re-exported for front ends)
from chain.devnet.params import GenesisConfig, ProtocolParams
from chain.devnet.records import (
    AccountRecord,
    AssetRecord,
    BlockRecord,
    OutputRecord,
    RedeemerEvaluation,
    RedeemerRecord,
    ScriptRecord,
    TxRecord,
)


class DevnetLedger(Protocol):
    # --- static configuration -------------------------------------------------------
    def genesis(self) -> GenesisConfig: ...
    def protocol_params(self) -> ProtocolParams: ...

    # --- chain queries (confirmed state unless stated) --------------------------
    def tip(self) -> BlockRecord: ...
    def block(self, hash_or_height: str | int) -> BlockRecord | None: ...
    def block_txs(self, hash_or_height: str | int) -> list[str]: ...
    def current_slot(self) -> int: ...
    def transaction(self, tx_hash: str) -> TxRecord | None: ...
    def tx_inputs(self, tx_hash: str) -> list[OutputRecord]:
        """Resolved inputs, collateral (collateral=True) and reference inputs (reference=True)."""
        ...

    def tx_outputs(self, tx_hash: str) -> list[OutputRecord]: ...
    def tx_metadata(self, tx_hash: str) -> dict[int, Any]:
        """Auxiliary data metadata as decoded CBOR values, by label."""
        ...

    def utxos_at(self, address: str, unit: str | None = None) -> list[OutputRecord]:
        """Unspent confirmed outputs at a bech32 address, oldest first; optionally holding `unit`."""
        ...

    def address_known(self, address: str) -> bool: ...
    def address_txs(self, address: str) -> list[TxRecord]:
        """Confirmed transactions that spend from or pay to the address, oldest first."""
        ...

    def metadata_label_txs(self, label: int) -> list[tuple[str, Any]]:
        """(tx_hash, metadata value under `label`) for confirmed txs, oldest first."""
        ...

    def metadata_labels(self) -> list[tuple[int, int]]:
        """(label, count of transactions) for every label seen."""
        ...

    def asset(self, unit: str) -> AssetRecord | None: ...
    def script(self, script_hash: str) -> ScriptRecord | None: ...
    def script_redeemers(self, script_hash: str) -> list[tuple[str, RedeemerRecord]]:
        """(tx hash, redeemer) of every confirmed run of the script, oldest first."""
        ...

    def datum(self, datum_hash: str) -> bytes | None:
        """CBOR of a datum seen in a witness set or inline in an output."""
        ...

    def utxos_by_payment(self, credential: bytes, unit: str | None = None) -> list[OutputRecord]:
        """Confirmed unspent outputs locked by a payment credential (0x00/0x01 + hash)."""
        ...

    def asset_holders(self, unit: str) -> list[tuple[str, int]]:
        """(address, quantity) of every confirmed holding of `unit`."""
        ...

    def account(self, stake_address: str) -> AccountRecord | None:
        """A reward account's state, None when the chain has never seen its credential."""
        ...

    def reward_balance(self, stake_address: str) -> int | None:
        """None when the stake credential is not registered."""
        ...

    # --- transactions -------------------------------------------------------------
    def submit(self, tx_cbor: bytes) -> str:
        """Validate phases 1 and 2 against the ledger + mempool; queue it; return its hash.

        Raises `LedgerError` (a subclass naming the rule) when the transaction is rejected.
        """
        ...

    def evaluate(
        self, tx_cbor: bytes, additional_utxos: Sequence[tuple[bytes, bytes]] = ()
    ) -> list[RedeemerEvaluation]:
        """Execution units per redeemer; `additional_utxos` are (input CBOR, output CBOR)."""
        ...

    def mempool(self) -> list[str]: ...

    # --- administration (devnet only) ---------------------------------------------
    def fund(self, address: str, lovelace: int, assets: dict[str, int] | None = None) -> str:
        """Pay from the faucet; `assets` (asset name hex -> quantity) are minted under the
        faucet's own native-script policy (`faucet_policy_id()`). Returns the tx hash."""
        ...

    def faucet_policy_id(self) -> str: ...
    def faucet_address(self) -> str: ...

    def produce_block(self) -> BlockRecord | None:
        """Seal the mempool into a block now (None when paused)."""
        ...

    def rollback(self, depth: int, drop_txs: bool = False) -> list[str]:
        """Undo the last `depth` blocks; their txs go back to the mempool unless dropped."""
        ...

    def rollback_from(self, height: int, drop_txs: bool = False) -> list[str]:
        """Undo every block at or above `height`, read against the tip atomically."""
        ...

    def drop_mempool(self) -> list[str]: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def paused(self) -> bool: ...
