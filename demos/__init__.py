"""The demos (`proofnet demo`): the whole loop on a local devnet with embedded defaults.
They drive the product from outside; nothing in the product imports them."""
