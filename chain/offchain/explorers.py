"""Where a transaction can be looked at, per network: the public explorers for preprod,
preview and mainnet, the devnet's own explorer locally. Pure string building, no I/O."""

from __future__ import annotations

EXPLORER_PREFIX = "/explorer"  # the devnet serves its explorer here, beside /api/v0

EXPLORERS: dict[str, tuple[tuple[str, str], ...]] = {
    "preprod": (
        ("cardanoscan", "https://preprod.cardanoscan.io/transaction/{}"),
        ("cexplorer", "https://preprod.cexplorer.io/tx/{}"),
    ),
    "preview": (
        ("cardanoscan", "https://preview.cardanoscan.io/transaction/{}"),
        ("cexplorer", "https://preview.cexplorer.io/tx/{}"),
    ),
    "mainnet": (
        ("cardanoscan", "https://cardanoscan.io/transaction/{}"),
        ("cexplorer", "https://cexplorer.io/tx/{}"),
    ),
}


def explorer_tx_url(devnet_url: str, tx_hash: str) -> str:
    """The devnet explorer's page of `tx_hash` for a devnet whose Blockfrost root is
    `devnet_url` (with or without the trailing /api/v0)."""
    root = devnet_url.rstrip("/").removesuffix("/api/v0")
    return f"{root}{EXPLORER_PREFIX}/tx/{tx_hash}"


def explorer_links(network: str, devnet_url: str, tx_hash: str) -> dict[str, str]:
    """Explorer name -> the page of `tx_hash` on `network` ("devnet": the local explorer)."""
    if network == "devnet":
        return {"devnet": explorer_tx_url(devnet_url, tx_hash)}
    return {name: url.format(tx_hash) for name, url in EXPLORERS.get(network, ())}
