"""Frozen values the follower hands out: where a block is, and one transaction as the ledger
applied it (spent inputs resolved, redeemers decoded to their CBOR, withdrawals in ledger
order). Pure; built by `chain.offchain.follow.decode`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pycardano import Address

from chain.offchain.errors import ChainError

# Blockfrost's names for redeemer purposes (and so ours).
SPEND, MINT, CERT, REWARD = "spend", "mint", "cert", "reward"


class ChainDataError(ChainError):
    """The backend's answer is inconsistent (a body that does not hash to its id, inputs that
    differ from the body's, a valid spend without the redeemer it needs). Never skipped: the
    follower stops there until the backend answers consistently."""


@dataclass(frozen=True, order=True)
class BlockPoint:
    """A block by height and hash (with its slot and POSIX time in seconds)."""

    height: int
    hash: str
    slot: int = field(default=0, compare=False)
    time: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if self.height < 0 or len(self.hash) != 64:
            raise ValueError(f"not a block point: {self.height} {self.hash!r}")


@dataclass(frozen=True)
class Output:
    """A transaction output: its address and value (units are policy id hex + name hex);
    `datum` is the inline datum's CBOR, `datum_hash` the hash of a datum kept elsewhere."""

    tx_hash: str
    index: int
    address: Address
    lovelace: int
    assets: Mapping[str, int]
    datum: bytes | None = None
    datum_hash: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.tx_hash}#{self.index}"

    def quantity(self, unit: str) -> int:
        return int(self.assets.get(unit, 0))


@dataclass(frozen=True)
class Redeemer:
    purpose: str  # SPEND, MINT, CERT, REWARD, ...
    index: int  # the ledger's pointer: position among sorted inputs, withdrawals, ...
    data: bytes  # the redeemer's Plutus data, CBOR


@dataclass(frozen=True)
class ChainTx:
    """One transaction in a block, as the ledger applied it.

    `inputs` are the spent outputs in the ledger's order (by tx id, then index: the order
    spend redeemers point into); `withdrawals` are (reward account bytes, lovelace) in the
    ledger's order (reward redeemers point into it). `valid` is False for a transaction
    whose scripts failed (phase 2): it moved only its collateral, none of its outputs exist.
    """

    hash: str
    block: BlockPoint
    index: int  # position within its block
    valid: bool
    inputs: tuple[Output, ...]
    outputs: tuple[Output, ...]
    redeemers: tuple[Redeemer, ...]
    withdrawals: tuple[tuple[bytes, int], ...]
    signers: tuple[str, ...] = ()  # required signer key hashes, hex

    def redeemer(self, purpose: str, index: int) -> Redeemer | None:
        for r in self.redeemers:
            if r.purpose == purpose and r.index == index:
                return r
        return None

    def withdrawal_index(self, reward_account: bytes) -> int | None:
        for i, (account, _amount) in enumerate(self.withdrawals):
            if account == reward_account:
                return i
        return None


@dataclass(frozen=True)
class FollowStep:
    """What happened on chain after a known point.

    `common` is the newest known point still on the chain (None: none of them is, and the
    scan restarted at the given start); everything recorded above it was rolled back.
    `txs` are the transactions spending the watched scripts' UTxOs in blocks
    (common, cursor], in chain order; `cursor` is the last block covered, `tip` the chain's
    tip when asked."""

    common: BlockPoint | None
    txs: tuple[ChainTx, ...]
    cursor: BlockPoint
    tip: BlockPoint
