"""A local Cardano devnet: a Conway-era ledger with Plutus V3, served over Blockfrost's REST shapes."""
