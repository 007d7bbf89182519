"""The off-chain package's exceptions: one base, a few kinds callers act on differently."""


class ChainError(Exception):
    """Base class for chain backend and builder failures."""


class BackendConfigError(ChainError):
    """The selected backend cannot be built from the given settings."""


class BackendUnavailableError(ChainError):
    """The backend did not answer (network, server down)."""


class TransactionRejectedError(ChainError):
    """The backend refused a transaction; `reason` is the backend's explanation."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
