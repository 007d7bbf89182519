"""Why the devnet rejects things. Each rule has its own subclass; `reason` is precise."""

from __future__ import annotations


class DevnetError(Exception):
    """Base of the devnet's exceptions."""


class LedgerError(DevnetError):
    """A transaction was rejected. `rule` is a stable identifier, `reason` says what was wrong."""

    rule = "ledger"

    def __init__(self, reason: str) -> None:
        super().__init__(f"{self.rule}: {reason}")
        self.reason = reason


class MalformedTransaction(LedgerError):
    rule = "MalformedTransaction"


class BadInputs(LedgerError):
    rule = "BadInputsUTxO"


class MissingVKeyWitnesses(LedgerError):
    rule = "MissingVKeyWitnessesUTXOW"


class InvalidWitnesses(LedgerError):
    rule = "InvalidWitnessesUTXOW"


class MissingRequiredSigner(LedgerError):
    rule = "MissingRequiredSigners"


class ValueNotConserved(LedgerError):
    rule = "ValueNotConservedUTxO"


class FeeTooSmall(LedgerError):
    rule = "FeeTooSmallUTxO"


class OutputTooSmall(LedgerError):
    rule = "BabbageOutputTooSmallUTxO"


class MaxTxSizeExceeded(LedgerError):
    rule = "MaxTxSizeUTxO"


class OutputValueTooBig(LedgerError):
    rule = "OutputTooBigUTxO"


class OutsideValidityInterval(LedgerError):
    rule = "OutsideValidityIntervalUTxO"


class CollateralError(LedgerError):
    rule = "InsufficientCollateral"


class ScriptIntegrityHashMismatch(LedgerError):
    rule = "PPViewHashesDontMatch"


class MissingScriptWitnesses(LedgerError):
    rule = "MissingScriptWitnessesUTXOW"


class ExtraneousScriptWitnesses(LedgerError):
    rule = "ExtraneousScriptWitnessesUTXOW"


class MissingRedeemers(LedgerError):
    rule = "MissingRedeemers"


class ExtraRedeemers(LedgerError):
    rule = "ExtraRedeemers"


class MissingDatum(LedgerError):
    rule = "MissingRequiredDatums"


class WrongNetwork(LedgerError):
    rule = "WrongNetwork"


class ExUnitsTooBig(LedgerError):
    rule = "ExUnitsTooBigUTxO"


class StakeRegistrationError(LedgerError):
    rule = "DelegsFailure"


class WithdrawalError(LedgerError):
    rule = "WithdrawalsNotInRewardsDELEGS"


class ScriptFailure(LedgerError):
    """Phase 2: a script failed or ran out of its declared budget."""

    rule = "ScriptFailure"

    def __init__(self, reason: str, logs: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.logs = logs


class UnknownEntity(DevnetError):
    """A query named something the devnet has never seen (rendered as 404)."""
