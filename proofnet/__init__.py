"""proofnet: shared settings, message formats and the `proofnet` console command."""

__version__ = "0.1.0"
