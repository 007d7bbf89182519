"""On-chain validators (OpShin, Plutus V3), their ledger types and compiled artifacts."""
