"""The follower over a Blockfrost-shaped REST backend (hosted Blockfrost, the devnet).

Discovery is by script: `/scripts/{hash}/redeemers`, newest first, lists every spend of a
watched script's UTxOs (whatever the address's staking part), page by page until the
entries fall at or below the common point. Each new transaction is then read whole:
`/txs/{hash}` (block, validity), `/txs/{hash}/utxos` (what the inputs spent) and
`/txs/{hash}/cbor` (body and redeemers, checked against the id).

Consistency: the block at the new cursor is read before the transactions and again after;
a block's hash commits to every block below it, so when both reads agree the whole chain
up to the cursor held still while the transactions were read. Otherwise the step fails
(`ChainMovedError`) and the caller tries again.

Cost per step on a quiet chain: the tip, the block at the newest known point, the first
page of each watched script's spends (its entries' headers are cached) and the cursor block
twice. Requests go through the `api` object pycardano's Blockfrost context holds (the SDK
is imported only by `chain.offchain.backends`); its errors are translated here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from chain.offchain.errors import BackendUnavailableError, ChainError
from chain.offchain.follow.decode import block_point, decode_tx, tx_point
from chain.offchain.follow.model import BlockPoint, ChainTx, FollowStep

PAGE = 100
# Transactions read per step at most; a longer backlog is worked off over several steps.
MAX_TXS = 200
HEADER_CACHE = 10_000


class ChainMovedError(ChainError):
    """The chain changed under a step (a rollback while reading); try again."""


def _status(exc: Exception) -> int | None:
    code = getattr(exc, "status_code", None)
    return code if isinstance(code, int) else None


class BlockfrostFollower:
    """`DeploymentFollower` over a blockfrost-python `BlockFrostApi`."""

    def __init__(self, api: Any, *, page_size: int = PAGE, max_txs: int = MAX_TXS) -> None:
        if page_size < 1 or max_txs < 1:
            raise ValueError("page_size and max_txs must be positive")
        self.api = api
        self.page_size = page_size
        self.max_txs = max_txs
        # tx hash -> (block point, index in block): a confirmed transaction's block only
        # changes by a rollback, after which the cache is dropped.
        self._headers: OrderedDict[str, tuple[BlockPoint, int]] = OrderedDict()
        self._lock = threading.Lock()

    # --- plumbing ----------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One request; None on 404; anything else the backend raises is ours."""
        try:
            return fn(*args, return_type="json", **kwargs)
        except Exception as exc:  # the SDK raises its ApiError, requests' errors, ...
            if _status(exc) == 404:
                return None
            raise BackendUnavailableError(f"chain backend ({what}): {exc}") from exc

    def tip(self) -> BlockPoint:
        latest = self._call("latest block", self.api.block_latest)
        if latest is None:
            raise BackendUnavailableError("chain backend has no latest block")
        return block_point(latest)

    def block_at(self, height: int) -> BlockPoint | None:
        if height < 0:
            return None
        found = self._call(f"block {height}", self.api.block, str(height))
        return None if found is None else block_point(found)

    def _header(self, tx_hash: str) -> tuple[BlockPoint, int] | None:
        with self._lock:
            hit = self._headers.get(tx_hash)
        if hit is not None:
            return hit
        found = self._call(f"tx {tx_hash}", self.api.transaction, tx_hash)
        if found is None:
            return None
        header = tx_point(found)
        with self._lock:
            self._headers[tx_hash] = header
            while len(self._headers) > HEADER_CACHE:
                self._headers.popitem(last=False)
        return header

    def tx_block(self, tx_hash: str) -> BlockPoint | None:
        header = self._header(tx_hash)
        return None if header is None else header[0]

    def point_before(self, tx_hash: str) -> BlockPoint | None:
        block = self.tx_block(tx_hash)
        if block is None:
            return None
        before = self.block_at(block.height - 1) if block.height else None
        return before or block

    def forget(self) -> None:
        with self._lock:
            self._headers.clear()

    def transaction(self, tx_hash: str) -> ChainTx:
        header = self._call(f"tx {tx_hash}", self.api.transaction, tx_hash)
        utxos = self._call(f"tx {tx_hash} utxos", self.api.transaction_utxos, tx_hash)
        cbor = self._call(f"tx {tx_hash} cbor", self.api.transaction_cbor, tx_hash)
        if header is None or utxos is None or cbor is None:
            raise ChainMovedError(f"transaction {tx_hash} is no longer on chain")
        return decode_tx(header, utxos, str(cbor.get("cbor", "")))

    # --- following ---------------------------------------------------------------------

    def _common(self, known: Sequence[BlockPoint]) -> BlockPoint | None:
        for point in sorted(known, reverse=True):
            now = self.block_at(point.height)
            if now is not None and now.hash == point.hash:
                return point
        return None

    def _spends_after(self, script: str, after: int) -> list[tuple[BlockPoint, int, str]]:
        """(block, index, tx hash) of every spend of `script` above height `after`."""
        found: dict[str, tuple[BlockPoint, int, str]] = {}
        page = 1
        while True:
            entries = self._call(
                f"spends of {script}",
                self.api.script_redeemers,
                script,
                count=self.page_size,
                page=page,
                order="desc",
            )
            entries = entries or []
            older = False
            for entry in entries:
                if entry.get("purpose") != "spend":
                    continue
                tx_hash = str(entry.get("tx_hash", ""))
                if tx_hash in found:
                    continue
                header = self._header(tx_hash)
                if header is None:  # listed but gone: the chain is moving; next step
                    raise ChainMovedError(f"listed spend {tx_hash} is not on chain")
                if header[0].height <= after:
                    older = True
                    break
                found[tx_hash] = (header[0], header[1], tx_hash)
            if older or len(entries) < self.page_size:
                return list(found.values())
            page += 1

    def follow(
        self, known: Sequence[BlockPoint], scripts: Sequence[str], start: BlockPoint
    ) -> FollowStep:
        tip = self.tip()
        common = self._common(known)
        base = common if common is not None else start
        if common is None or (known and common != max(known)):
            self.forget()  # a rollback: cached blocks of transactions may be stale
        if tip.height <= base.height:
            return FollowStep(common, (), base, tip)
        cursor = tip
        spends: dict[str, tuple[BlockPoint, int, str]] = {}
        for script in scripts:
            for block, index, tx_hash in self._spends_after(script, base.height):
                if block.height <= cursor.height:
                    spends[tx_hash] = (block, index, tx_hash)
        ordered = sorted(spends.values(), key=lambda s: (s[0].height, s[1]))
        if len(ordered) > self.max_txs:
            # Stop below the first block that does not fit whole; a block larger than the
            # bound is taken whole.
            cut = ordered[self.max_txs][0].height
            kept = [s for s in ordered if s[0].height < cut]
            if not kept:
                kept = [s for s in ordered if s[0].height == cut]
                cut += 1
            ordered = kept
            cursor = self.block_at(cut - 1) or cursor
        txs = tuple(self.transaction(tx_hash) for _block, _index, tx_hash in ordered)
        for tx, (block, _index, _hash) in zip(txs, ordered, strict=True):
            if tx.block != block:
                raise ChainMovedError(f"transaction {tx.hash} moved to another block")
        again = self.block_at(cursor.height)
        if again is None or again.hash != cursor.hash:
            self.forget()
            raise ChainMovedError(f"block {cursor.height} changed while reading")
        return FollowStep(common, txs, cursor, tip)
