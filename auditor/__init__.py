"""The auditor's role: check a settlement on chain against the attestations it paid
(`proofnet audit`). Imports the product's shared ground and chain code; nothing in the
product imports it."""
