"""Everything that touches Cardano: on-chain contracts, off-chain builders and the devnet."""
