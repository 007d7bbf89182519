"""proofnet worker."""
