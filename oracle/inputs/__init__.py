"""What the oracle reads: the API's oracle feed (jobs, units, workers) and escrows on chain."""
