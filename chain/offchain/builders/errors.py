"""Why a builder refuses. One base (`BuilderError`) under the off-chain `ChainError`."""

from __future__ import annotations

from chain.offchain.errors import ChainError
from proofnet.when import when_text


class BuilderError(ChainError):
    """Bad input to a builder, or a transaction that cannot be built from it."""


class InsufficientFundsError(BuilderError):
    """The paying wallet does not hold what the transaction needs."""


class ScriptEvaluationError(BuilderError):
    """The backend's evaluator refused a script of the transaction (it would fail on chain).

    `failures` is the evaluator's own report (which redeemer, the error and its trace)."""

    def __init__(self, message: str, failures: str) -> None:
        super().__init__(f"{message}: {failures}")
        self.failures = failures


class TransactionTooLarge(BuilderError):
    """The transaction is larger than the protocol's maximum before its scripts are even
    evaluated: no ledger takes it, so it is not sent to the backend's evaluator (whose
    request limit it may also exceed)."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"transaction of {size} bytes exceeds the maximum of {max_size}")
        self.size = size
        self.max_size = max_size


class DeadlineNotPassed(BuilderError):
    """A refund asked for before the escrow's deadline; `refund_from_ms` is the first chain
    time (POSIX ms) a refund can start at, `chain_now_ms` the chain's time when asked."""

    def __init__(self, refund_from_ms: int, chain_now_ms: int) -> None:
        super().__init__(
            "deadline not passed: refund possible after "
            f"{when_text(refund_from_ms, chain_now_ms)} (chain time)"
        )
        self.refund_from_ms = refund_from_ms
        self.chain_now_ms = chain_now_ms
