"""Where the devnet's explorer pages are, for anyone linking to them (no server imports).

The devnet owns its URL layout; `chain.offchain.explorers` links to it beside the public
explorers (one direction only: the devnet imports nothing of chain.offchain)."""

from __future__ import annotations

EXPLORER_PREFIX = "/explorer"  # the devnet serves its explorer here, beside /api/v0


def explorer_tx_url(devnet_url: str, tx_hash: str) -> str:
    """The devnet explorer's page of `tx_hash` for a devnet whose Blockfrost root is
    `devnet_url` (with or without the trailing /api/v0)."""
    root = devnet_url.rstrip("/").removesuffix("/api/v0")
    return f"{root}{EXPLORER_PREFIX}/tx/{tx_hash}"
