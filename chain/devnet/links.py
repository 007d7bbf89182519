"""Where the devnet's explorer pages are, for anyone linking to them (no server imports).

The definitions live with the public explorers in `chain.offchain.explorers`."""

from chain.offchain.explorers import EXPLORER_PREFIX, explorer_tx_url

__all__ = ["EXPLORER_PREFIX", "explorer_tx_url"]
