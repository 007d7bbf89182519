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


# The Babbage collateral rule has several named failures; each refines CollateralError.
class NoCollateralInputs(CollateralError):
    rule = "NoCollateralInputs"


class TooManyCollateralInputs(CollateralError):
    rule = "TooManyCollateralInputs"


class CollateralNotKeyLocked(CollateralError):
    rule = "ScriptsNotPaidUTxO"


class CollateralContainsNonADA(CollateralError):
    rule = "CollateralContainsNonADA"


class IncorrectTotalCollateral(CollateralError):
    rule = "IncorrectTotalCollateralField"


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


class WrongNetworkInTxBody(WrongNetwork):
    rule = "WrongNetworkInTxBody"


class WrongNetworkWithdrawal(WrongNetwork):
    rule = "WrongNetworkWithdrawal"


class ExUnitsTooBig(LedgerError):
    rule = "ExUnitsTooBigUTxO"


class StakeRegistrationError(LedgerError):
    rule = "DelegsFailure"


class WithdrawalError(LedgerError):
    rule = "WithdrawalsNotInRewardsDELEGS"


class WithdrawalNotDelegatedToDRep(WithdrawalError):
    rule = "ConwayWdrlNotDelegatedToDRep"


class DelegateeNotRegistered(StakeRegistrationError):
    rule = "DelegateeNotRegisteredDELEG"


class InputSetEmpty(LedgerError):
    rule = "InputSetEmptyUTxO"


class NativeScriptFailure(LedgerError):
    rule = "ScriptWitnessNotValidatingUTXOW"


class AuxiliaryDataMismatch(LedgerError):
    """Metadata hash absent, extraneous or different from the auxiliary data's hash."""

    rule = "ConflictingMetadataHash"


class InvalidMetadata(LedgerError):
    rule = "InvalidMetadata"


class UnspendableUTxONoDatumHash(LedgerError):
    rule = "UnspendableUTxONoDatumHash"


class NotAllowedSupplementalDatums(LedgerError):
    rule = "NotAllowedSupplementalDatums"


class RefScriptsSizeTooBig(LedgerError):
    rule = "ConwayTxRefScriptsSizeTooBig"


class TreasuryValueMismatch(LedgerError):
    rule = "ConwayTreasuryValueMismatch"


class UnsupportedOnDevnet(LedgerError):
    """Valid on a real network but outside what the devnet models (pools, DReps, Byron)."""

    rule = "UnsupportedOnDevnet"


class ValidationTagMismatch(LedgerError):
    """is_valid disagrees with what the scripts actually do."""

    rule = "ValidationTagMismatch"


class ScriptFailure(LedgerError):
    """Phase 2: a script failed or ran out of its declared budget."""

    rule = "ScriptFailure"

    def __init__(self, reason: str, logs: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.logs = logs


class UnknownEntity(DevnetError):
    """A query named something the devnet has never seen (rendered as 404)."""
