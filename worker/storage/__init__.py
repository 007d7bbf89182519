"""The storage provider role: `proofnet storage serve|onboard|status`.

A provider offers storage instead of, or beside, compute, with the same key
(`worker.identity`): it runs (or points at) an S3-compatible endpoint, signs an offer of
capacity and price per GB-month for it (`proofnet.messages.storage`), and holds the objects
jobs place there, each beside its proof sidecar, answering the oracle's ranged reads.
"""
