"""Attestations in: authenticated, checked against the API's feed, verified in a worker pool
and recorded (`accept`); the signed feed client (`feed_client`) and the public escrow read
(`escrow_info`) that workers ask before sealing."""
