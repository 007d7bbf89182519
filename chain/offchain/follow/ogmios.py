"""The follower over a self-hosted node: Ogmios v6 chain-sync for the blocks, Kupo for the
outputs their transactions spent.

A node keeps no index by script, so every block after the cursor is read
(`findIntersection` at the known points, newest first, then `nextBlock` up to the tip). A
transaction is looked at only when it runs a spend redeemer: the inputs those redeemers
point at are resolved through Kupo, and when one sits at a watched script the whole
transaction is decoded from its CBOR (`decode.decode_ledger_tx`, which checks the body
against the id and the resolved inputs against the body's), exactly as the Blockfrost
follower does. A rollback shows as the intersection: the newest known point still on
chain is `FollowStep.common`; one during a step (`nextBlock` rolling backward) fails the
step (`ChainMovedError`) and the caller tries again.

Ogmios has no block-by-height lookup, so the start point comes from Kupo: the checkpoint
just before the block holding a transaction (`point_before`), whose height chain-sync
gives (the next block's height, minus one).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import cbor2
from pycardano import ScriptHash

from chain.offchain.errors import BackendConfigError
from chain.offchain.follow.blockfrost import MAX_TXS, ChainMovedError
from chain.offchain.follow.decode import decode_ledger_tx, redeemers_of, split_tx
from chain.offchain.follow.kupo import Kupo
from chain.offchain.follow.model import (
    SPEND,
    BlockPoint,
    ChainDataError,
    ChainTx,
    FollowStep,
    Output,
)
from chain.offchain.follow.ogmios_rpc import OgmiosSession, Point, SlotClock

log = logging.getLogger(__name__)

# Blocks read per step at most: a long way behind the tip (a first pass from an old
# deployment) is worked off over several steps, each committing its cursor.
MAX_BLOCKS = 2_000

NO_CBOR = (
    "Ogmios sends transactions without their CBOR: start it with --include-transaction-cbor "
    "(or --include-cbor)"
)
KUPO_GAP = (
    'Kupo does not know output {ref}: it must index every output (--match "*"), keep spent '
    "ones (no --prune-utxo) and start before the deployment (--since)"
)


def tx_inputs(raw: bytes) -> list[tuple[str, int]]:
    """The spent inputs of a transaction's CBOR in the ledger's order (by id, then index:
    the order spend redeemers point into)."""
    body_bytes, _witnesses, _valid = split_tx(raw)
    try:
        body = cbor2.loads(body_bytes)
        items = body[0]
    except Exception as exc:  # cbor2 raises assorted types on garbage
        raise ChainDataError(f"a transaction body does not decode: {exc}") from exc
    if isinstance(items, cbor2.CBORTag):  # Conway's tagged set (258)
        items = items.value
    refs = [(bytes(i[0]).hex(), int(i[1])) for i in items]
    return sorted(set(refs), key=lambda r: (bytes.fromhex(r[0]), r[1]))


class OgmiosFollower:
    """`DeploymentFollower` over Ogmios (chain-sync) and Kupo (spent outputs)."""

    def __init__(
        self,
        ogmios_url: str,
        kupo: Kupo,
        *,
        max_txs: int = MAX_TXS,
        max_blocks: int = MAX_BLOCKS,
        timeout_s: float = 30.0,
    ) -> None:
        if max_txs < 1 or max_blocks < 1:
            raise ValueError("max_txs and max_blocks must be positive")
        self.max_blocks = max_blocks
        self.ogmios_url = ogmios_url
        self.kupo = kupo
        self.max_txs = max_txs
        self.timeout_s = timeout_s
        self._clock: SlotClock | None = None

    # --- plumbing ----------------------------------------------------------------------

    @contextmanager
    def session(self) -> Iterator[OgmiosSession]:
        with OgmiosSession(self.ogmios_url, timeout_s=self.timeout_s) as s:
            yield s

    def _time(self, s: OgmiosSession, slot: int) -> int:
        if self._clock is None:
            self._clock = s.slot_clock()
        return self._clock.time(slot)

    def _tip(self, s: OgmiosSession, tip: Mapping[str, Any]) -> BlockPoint:
        try:
            slot = int(tip["slot"])
            return BlockPoint(int(tip["height"]), str(tip["id"]), slot, self._time(s, slot))
        except (KeyError, TypeError, ValueError) as exc:
            raise ChainDataError(f"Ogmios sent no tip: {tip!r}") from exc

    def _block(self, s: OgmiosSession, block: Mapping[str, Any]) -> BlockPoint:
        try:
            slot = int(block["slot"])
            return BlockPoint(int(block["height"]), str(block["id"]), slot, self._time(s, slot))
        except (KeyError, TypeError, ValueError) as exc:
            raise ChainDataError(f"Ogmios sent no block: {str(block)[:200]}") from exc

    def _height_of(self, s: OgmiosSession, point: Point) -> BlockPoint | None:
        """`point` with its height (chain-sync: the block after it is one higher)."""
        found = s.find_intersection([point])
        if found is None:
            return None
        _at, tip = found
        s.next_block()  # rolls backward to `point`
        if str(tip.get("id")) == point.id:
            return self._tip(s, tip)
        step = s.next_block()
        block = step.get("block") or {}
        if step["direction"] != "forward" or block.get("ancestor") != point.id:
            raise ChainMovedError(f"block {point.id} is being rolled back")
        return BlockPoint(int(block["height"]) - 1, point.id, point.slot, self._time(s, point.slot))

    # --- the port ------------------------------------------------------------------------

    def tip(self) -> BlockPoint:
        with self.session() as s:
            found = s.find_intersection([None])
            if found is None:
                raise ChainDataError("Ogmios finds no intersection at the origin")
            return self._tip(s, found[1])

    def block_at(self, height: int) -> BlockPoint | None:
        raise BackendConfigError(
            "Ogmios finds blocks by slot and hash, not by height; start from a transaction "
            "(the deployment's) instead"
        )

    def tx_block(self, tx_hash: str) -> BlockPoint | None:
        located = self.kupo.locate(tx_hash)
        if located is None:
            return None
        with self.session() as s:
            return self._height_of(s, located.block)

    def point_before(self, tx_hash: str) -> BlockPoint | None:
        located = self.kupo.locate(tx_hash)
        if located is None:
            return None
        before = self.kupo.checkpoint_at_or_before(located.block.slot - 1)
        with self.session() as s:
            if before is None:  # Kupo started at this block: follow from it, exclusive
                log.warning("Kupo knows no block before %s; following after it", tx_hash)
                return self._height_of(s, located.block)
            return self._height_of(s, before)

    def follow(
        self, known: Sequence[BlockPoint], scripts: Sequence[str], start: BlockPoint
    ) -> FollowStep:
        watched = frozenset(scripts)
        newest_first = sorted(set(known), reverse=True)
        points = [Point(p.slot, p.hash) for p in newest_first] + [Point(start.slot, start.hash)]
        with self.session() as s:
            at, tip_json = s.find_intersection(points) or (None, {})
            if at is None:
                raise ChainDataError(
                    f"none of the known blocks nor the start block {start.hash} is on this "
                    "chain (another network, or a node still syncing?)"
                )
            common = next((p for p in newest_first if p.hash == at.id), None)
            base = common if common is not None else start
            tip = self._tip(s, tip_json)
            s.next_block()  # rolls backward to the intersection
            cursor, txs, blocks = base, list[ChainTx](), 0
            while tip.hash != cursor.hash and tip.height > cursor.height:
                step = s.next_block()
                if step["direction"] == "backward":
                    raise ChainMovedError("the chain rolled back while reading; next step")
                block = step["block"]
                if block.get("ancestor") != cursor.hash:
                    raise ChainMovedError(f"block {block.get('id')} does not extend {cursor.hash}")
                point = self._block(s, block)
                txs.extend(self._spends(block.get("transactions") or (), point, watched))
                cursor, tip = point, self._tip(s, step["tip"])
                blocks += 1
                if len(txs) >= self.max_txs or blocks >= self.max_blocks:
                    break  # whole blocks only: the rest is the next step's
            return FollowStep(common, tuple(txs), cursor, tip)

    # --- one block -----------------------------------------------------------------------

    def _spends(
        self, transactions: Iterable[Mapping[str, Any]], block: BlockPoint, watched: frozenset[str]
    ) -> Iterator[ChainTx]:
        for index, tx in enumerate(transactions):
            if tx.get("spends") == "collaterals":
                continue  # phase 2 failed: only collateral moved, no script let go
            cbor_hex = tx.get("cbor")
            if not isinstance(cbor_hex, str):
                raise BackendConfigError(NO_CBOR)
            raw = bytes.fromhex(cbor_hex)
            spends = [r.index for r in redeemers_of(raw) if r.purpose == SPEND]
            if not spends:
                continue
            inputs = tx_inputs(raw)
            resolved: dict[tuple[str, int], Output] = {}
            if not any(
                self._at_watched(self._resolve(inputs[i], resolved), watched)
                for i in spends
                if i < len(inputs)
            ):
                continue
            yield decode_ledger_tx(
                str(tx["id"]),
                block,
                index,
                raw,
                partial(self._resolve_all, inputs, resolved),
            )

    def _resolve_all(
        self, refs: Sequence[tuple[str, int]], cache: dict[tuple[str, int], Output]
    ) -> list[Output]:
        return [self._resolve(ref, cache) for ref in refs]

    def _resolve(self, ref: tuple[str, int], cache: dict[tuple[str, int], Output]) -> Output:
        if ref not in cache:
            found = self.kupo.output(*ref)
            if found is None:
                raise ChainDataError(KUPO_GAP.format(ref=f"{ref[0]}#{ref[1]}"))
            cache[ref] = found
        return cache[ref]

    @staticmethod
    def _at_watched(output: Output, watched: frozenset[str]) -> bool:
        part = output.address.payment_part
        return isinstance(part, ScriptHash) and part.payload.hex() in watched
