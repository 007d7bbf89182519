"""proofnet api."""
