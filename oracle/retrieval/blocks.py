"""Reading the chain's blocks by hash: how a co-signer checks that a storage receipt's
beacons are real blocks of the chain at about their challenges' times
(`proofnet.messages.storage_receipt.beacon_refusal`). I/O only; the rule is there."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from chain.offchain.backends import BLOCKFROST_URLS
from proofnet.settings import Settings


class BlockReadError(Exception):
    """The chain could not be read (it did not answer, or answered nonsense)."""


# The Unix time of the block with this hash (None: the chain has no such block).
BlockTime = Callable[[str], "int | None"]


def chain_block_time(http: httpx.Client, blockfrost_url: str) -> BlockTime:
    """Looks a beacon up as a block of the chain (`/blocks/{hash}` of a Blockfrost-shaped
    API, the devnet's too): what a co-signer checks a receipt's beacons with
    (`storage_receipt.beacon_refusal`). BlockReadError when the chain cannot be read (the
    batch is refused for now: "could not check" is never "checked")."""

    def block_time(beacon: str) -> int | None:
        if len(beacon) != 64 or any(c not in "0123456789abcdef" for c in beacon):
            return None
        try:
            response = http.get(blockfrost_url.rstrip("/") + f"/blocks/{beacon}")
            if response.status_code in (400, 404):
                return None
            response.raise_for_status()
            body = response.json()
            found, when = str(body["hash"]).lower(), body["time"]
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
            raise BlockReadError(f"cannot read block {beacon[:16]}...: {exc}") from exc
        if found != beacon or type(when) is not int:
            raise BlockReadError(f"the chain answered block {beacon[:16]}... with another block")
        return when

    return block_time


def block_reader(settings: Settings) -> BlockTime | None:
    """The chain's blocks where the oracle reads a Blockfrost-shaped API (the devnet's, or
    Blockfrost's), as its beacons come from (`oracle.retrieval.service.beacon_of`); None
    otherwise: that oracle's beacons are random and cannot be checked (docs/storage.md)."""
    if settings.chain_backend == "devnet":
        return chain_block_time(httpx.Client(timeout=30.0), settings.devnet_url)
    if settings.chain_backend == "blockfrost" and settings.network in BLOCKFROST_URLS:
        http = httpx.Client(timeout=30.0, headers={"project_id": settings.blockfrost_project_id})
        return chain_block_time(http, BLOCKFROST_URLS[settings.network])
    return None
