"""Why a builder refuses. One base (`BuilderError`) under the off-chain `ChainError`."""

from __future__ import annotations

from chain.offchain.errors import ChainError


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
