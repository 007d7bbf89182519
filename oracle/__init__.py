"""proofnet oracle."""
