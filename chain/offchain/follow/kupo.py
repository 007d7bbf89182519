"""Kupo's HTTP API, for what a chain-sync client cannot know by itself: the outputs a
transaction spent (address, value, datum), and where a transaction sits on chain.

Kupo must index every output (`--match "*"`) and keep spent ones (no `--prune-utxo`):
spent outputs are exactly what a follower asks about. Its shapes (Kupo v2):

    GET /matches/{index}@{tx id}   [{transaction_id, transaction_index, output_index,
                                     address, value: {coins, assets: {"policy.name": n}},
                                     datum_hash, datum_type: "inline"|"hash"|null,
                                     script_hash, created_at: {slot_no, header_hash},
                                     spent_at: {slot_no, header_hash}|null}]
    GET /matches/*@{tx id}         the same, one per output of the transaction
    GET /datums/{hash}             {"datum": cbor hex} | null
    GET /checkpoints/{slot}        {slot_no, header_hash} of the block at or before `slot`

I/O happens here only; httpx's errors become `BackendUnavailableError` naming
PROOFNET_KUPO_URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from pycardano import Address

from chain.offchain.errors import BackendUnavailableError
from chain.offchain.escrow_terms import kupo_assets
from chain.offchain.follow.model import ChainDataError, Output
from chain.offchain.follow.ogmios_rpc import Point

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class TxLocation:
    """Where Kupo saw a transaction: its block and its index in that block."""

    block: Point
    index: int


class Kupo:
    """A Kupo server's HTTP API."""

    def __init__(self, url: str, *, timeout_s: float = TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout_s, trust_env=False)
        self._datums: dict[str, bytes | None] = {}

    def close(self) -> None:
        self._http.close()

    def _get(self, path: str) -> Any:
        try:
            answer = self._http.get(path)
        except httpx.HTTPError as exc:
            raise BackendUnavailableError(
                f"Kupo at {self.url} is unreachable ({exc}); start it or set PROOFNET_KUPO_URL"
            ) from exc
        if answer.status_code == 404:
            return None
        if answer.status_code != 200:
            raise BackendUnavailableError(
                f"Kupo at {self.url} answered {answer.status_code} to {path}: {answer.text[:200]}"
            )
        try:
            return answer.json()
        except ValueError as exc:
            raise ChainDataError(f"Kupo answered {path} with no JSON") from exc

    def matches(self, pattern: str) -> list[dict[str, Any]]:
        found = self._get(f"/matches/{pattern}")
        if not isinstance(found, list):
            raise ChainDataError(f"Kupo's matches of {pattern} are not a list")
        return found

    def datum(self, datum_hash: str) -> bytes | None:
        if datum_hash not in self._datums:
            found = self._get(f"/datums/{datum_hash}")
            datum = found.get("datum") if isinstance(found, dict) else None
            self._datums[datum_hash] = bytes.fromhex(datum) if datum else None
        return self._datums[datum_hash]

    def output(self, tx_id: str, index: int) -> Output | None:
        """The output `tx_id#index`, spent or not; None when Kupo never saw it."""
        for match in self.matches(f"{index}@{tx_id}"):
            if match.get("transaction_id") == tx_id and int(match["output_index"]) == index:
                return self.to_output(match)
        return None

    def locate(self, tx_id: str) -> TxLocation | None:
        """The block holding `tx_id`, from any of its outputs; None when Kupo has none."""
        for match in self.matches(f"*@{tx_id}"):
            if match.get("transaction_id") != tx_id:
                continue
            at = match.get("created_at") or {}
            try:
                return TxLocation(
                    Point(int(at["slot_no"]), str(at["header_hash"])),
                    int(match["transaction_index"]),
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ChainDataError(f"Kupo's match of {tx_id} has no block: {exc}") from exc
        return None

    def checkpoint_at_or_before(self, slot: int) -> Point | None:
        found = self._get(f"/checkpoints/{max(slot, 0)}")
        if not isinstance(found, dict):
            return None
        try:
            return Point(int(found["slot_no"]), str(found["header_hash"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ChainDataError(f"Kupo's checkpoint does not read: {found!r}") from exc

    def to_output(self, match: Mapping[str, Any]) -> Output:
        try:
            value = match["value"]
            datum_hash = match.get("datum_hash") or None
            inline = None
            if datum_hash and match.get("datum_type") == "inline":
                inline = self.datum(datum_hash)
                if inline is None:
                    raise ChainDataError(f"Kupo has no inline datum {datum_hash}")
            return Output(
                tx_hash=str(match["transaction_id"]),
                index=int(match["output_index"]),
                address=Address.from_primitive(str(match["address"])),
                lovelace=int(value["coins"]),
                assets=kupo_assets(value.get("assets") or {}),
                datum=inline,
                datum_hash=datum_hash,
            )
        except ChainDataError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise ChainDataError(f"not a Kupo match: {exc}") from exc
        except Exception as exc:  # pycardano's address parser raises assorted types
            raise ChainDataError(f"Kupo match with an unreadable address: {exc}") from exc
