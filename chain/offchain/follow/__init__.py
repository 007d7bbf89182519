"""Following one deployment on chain: which transactions spent its script UTxOs, and what
they paid to whom.

    reader.py     the `DeploymentFollower` port: transactions since a cursor, with rollbacks
    blockfrost.py the follower over a Blockfrost-shaped backend (hosted Blockfrost, the devnet)
    ogmios.py     the follower over a self-hosted node: Ogmios chain-sync, Kupo spent outputs
    ogmios_rpc.py Ogmios v6 JSON-RPC over a websocket (chain-sync, network queries)
    kupo.py       Kupo's HTTP API (outputs spent or not, datums, checkpoints)
    ogmios_history.py  past transactions from the node, in Blockfrost's shapes (the auditor)
    model.py      frozen values: block points, decoded transactions with resolved inputs
    decode.py     Blockfrost JSON + transaction CBOR -> `ChainTx` (pure; checks the tx hash)
    classify.py   `ChainTx` -> `Movement`s (payouts, refunds, cancels; slashes by plug-in)

Everything here reads; nothing writes. Money is recognised only from what the ledger
validated (spent script inputs, their datums, the redeemers the scripts ran with, the
outputs), never from metadata, which anyone may attach to any transaction.
May import: chain.contracts, chain.offchain (errors, builders' value helpers).
Imported by: the API (earnings record), chain.offchain.backends (history for the auditor).
"""
