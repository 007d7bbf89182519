"""Where a transaction can be looked at, per network: the public explorers for preprod,
preview and mainnet, the devnet's own explorer locally. Pure string building, no I/O."""

from __future__ import annotations

from chain.devnet.links import EXPLORER_PREFIX, explorer_tx_url
from proofnet.redaction import redact_credentials

__all__ = ["EXPLORERS", "EXPLORER_PREFIX", "explorer_links", "explorer_tx_url"]

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


def explorer_links(network: str, devnet_url: str, tx_hash: str) -> dict[str, str]:
    """Explorer name -> the page of `tx_hash` on `network` ("devnet": the local explorer)."""
    if network == "devnet":
        # Shown to users: a devnet URL's credentials never are.
        return {"devnet": redact_credentials(explorer_tx_url(devnet_url, tx_hash))}
    return {name: url.format(tx_hash) for name, url in EXPLORERS.get(network, ())}
