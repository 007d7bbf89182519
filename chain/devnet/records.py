"""Values the devnet ledger hands to its readers (the REST server, the explorer, the CLI).

The ledger (`chain.devnet.ledger`) owns state and validation; the server only reads these
records and renders them in Blockfrost's shapes. CBOR is kept as bytes so the server can
decode exactly what the ledger stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BlockRecord:
    height: int
    hash: str
    slot: int
    time: int  # POSIX seconds
    epoch: int
    epoch_slot: int
    previous_hash: str | None
    tx_hashes: tuple[str, ...]
    size: int
    fees: int
    output: int  # sum of lovelace in all outputs of the block's transactions


@dataclass(frozen=True)
class RedeemerRecord:
    tag: str  # "spend" | "mint" | "cert" | "reward" | "vote" | "propose" (Blockfrost purposes)
    index: int
    mem: int
    steps: int
    fee: int  # lovelace charged for these units at the tx's prices
    script_hash: str
    redeemer_data_hash: str
    redeemer_data_cbor: bytes
    datum_hash: str | None


@dataclass(frozen=True)
class TxRecord:
    hash: str
    cbor: bytes
    block_height: int
    block_hash: str
    block_time: int
    slot: int
    index: int  # position within its block
    fee: int
    size: int
    deposit: int  # net deposit taken (negative when refunded)
    valid_contract: bool  # False: phase-2 failed and collateral was consumed
    redeemers: tuple[RedeemerRecord, ...] = field(default=())


@dataclass(frozen=True)
class OutputRecord:
    """One transaction output and whether it has been spent."""

    tx_hash: str
    index: int
    address: str  # bech32
    output_cbor: bytes  # the TransactionOutput as it appeared in the body
    block_height: int | None  # None while in the mempool
    block_hash: str | None
    block_time: int | None
    spent_by: str | None = None
    collateral: bool = False  # the collateral return output of an invalid tx
    reference: bool = False  # used as a reference input (only in tx input listings)


@dataclass(frozen=True)
class AssetRecord:
    policy_id: str
    asset_name: str  # hex
    quantity: int
    initial_mint_tx_hash: str
    mint_or_burn_count: int


@dataclass(frozen=True)
class ScriptRecord:
    hash: str
    type: str  # "timelock" | "plutusV1" | "plutusV2" | "plutusV3"
    cbor: bytes  # the flat-encoded script wrapped as CBOR bytes (as in the witness set)
    serialised_size: int | None


@dataclass(frozen=True)
class RedeemerEvaluation:
    """Result of evaluating one redeemer (for `/utils/txs/evaluate`)."""

    tag: str  # ledger tag: "spend" | "mint" | "cert" | "reward" | "vote" | "propose"
    index: int
    mem: int
    steps: int
    ok: bool
    error: str | None = None
    logs: tuple[str, ...] = ()


@dataclass(frozen=True)
class AccountRecord:
    """A stake credential as Blockfrost's `/accounts/{stake_address}` reports it."""

    registered: bool
    controlled_lovelace: int  # unspent outputs staked to the credential, plus rewards
    withdrawable: int
    active_epoch: int | None  # epoch of the latest registration or deregistration
    drep_id: str | None  # CIP-129 bech32 DRep id, or drep_always_abstain / _no_confidence
