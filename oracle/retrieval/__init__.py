"""Retrieval challenges to storage providers, the GB-months they earn, and re-replication.

`challenger.Challenger` runs rounds over the placements the API records: per placement one
challenge for a chunk drawn with this oracle's secret seed, read back from the provider's
S3 endpoint, verified against the committed root (`proofnet.messages.storage`). An answered
challenge accrues the GB-months since the last one; a failed one is never paid, ends the
placement and copies the object from a replica that still answers to another provider.
"""
