"""Where the devnet's explorer pages are, for anyone linking to them (no server imports)."""

EXPLORER_PREFIX = "/explorer"


def explorer_tx_url(devnet_url: str, tx_hash: str) -> str:
    """The explorer page of `tx_hash` for a devnet whose Blockfrost root is `devnet_url`."""
    return f"{devnet_url.rstrip('/').removesuffix('/api/v0')}{EXPLORER_PREFIX}/tx/{tx_hash}"
