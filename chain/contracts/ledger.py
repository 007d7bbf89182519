"""Plutus V3 ScriptContext as the Haskell ledger builds it (not as OpShin's prelude has it).

Every class carries the constructor index the ledger uses; the conformance vectors in
/work/shared/fixtures/ledger decide. Where the OpShin 0.28 prelude differs:
- `TxInfo.withdrawals` is keyed by a `Credential` (prelude: a `StakingCredential`),
- the third field of `ScriptContext` is a `ScriptInfo` (prelude: a `ScriptPurpose`):
  `SpendingScript` carries the datum (Maybe) next to the TxOutRef and `RewardingScript`
  carries a bare `Credential`,
- certificates are the Conway `TxCert` constructors (prelude: Shelley `DCert`).
Fields the validators never read are typed `Anything`, so no code depends on their shape.

This module doubles as off-chain Python: tests build contexts from these classes.
"""

# OpShin accepts exactly one pycardano import line for the whole program, in this form;
# every other contract module gets these names through `from chain.contracts.ledger import *`.
# isort: off
from dataclasses import dataclass
from typing import Dict, List, Union
from pycardano import Datum as Anything, PlutusData

# isort: on


@dataclass(unsafe_hash=True)
class TxOutRef(PlutusData):
    CONSTR_ID = 0
    id: bytes
    idx: int


@dataclass(unsafe_hash=True)
class PubKeyCredential(PlutusData):
    CONSTR_ID = 0
    credential_hash: bytes


@dataclass(unsafe_hash=True)
class ScriptCredential(PlutusData):
    CONSTR_ID = 1
    credential_hash: bytes


Credential = Union[PubKeyCredential, ScriptCredential]


@dataclass(unsafe_hash=True)
class StakingHash(PlutusData):
    CONSTR_ID = 0
    value: Credential


@dataclass(unsafe_hash=True)
class StakingPtr(PlutusData):
    CONSTR_ID = 1
    slot_no: int
    tx_index: int
    cert_index: int


StakingCredential = Union[StakingHash, StakingPtr]


@dataclass(unsafe_hash=True)
class SomeStakingCredential(PlutusData):
    CONSTR_ID = 0
    staking_credential: StakingCredential


@dataclass(unsafe_hash=True)
class NoStakingCredential(PlutusData):
    CONSTR_ID = 1


@dataclass(unsafe_hash=True)
class Address(PlutusData):
    CONSTR_ID = 0
    payment_credential: Credential
    staking_credential: Union[SomeStakingCredential, NoStakingCredential]


@dataclass(unsafe_hash=True)
class NoOutputDatum(PlutusData):
    CONSTR_ID = 0


@dataclass(unsafe_hash=True)
class SomeOutputDatumHash(PlutusData):
    CONSTR_ID = 1
    datum_hash: bytes


@dataclass(unsafe_hash=True)
class SomeOutputDatum(PlutusData):
    CONSTR_ID = 2
    datum: Anything


OutputDatum = Union[NoOutputDatum, SomeOutputDatumHash, SomeOutputDatum]


@dataclass(unsafe_hash=True)
class SomeScriptHash(PlutusData):
    CONSTR_ID = 0
    script_hash: bytes


@dataclass(unsafe_hash=True)
class NoScriptHash(PlutusData):
    CONSTR_ID = 1


@dataclass(unsafe_hash=True)
class TxOut(PlutusData):
    CONSTR_ID = 0
    address: Address
    value: Dict[bytes, Dict[bytes, int]]
    datum: OutputDatum
    reference_script: Union[SomeScriptHash, NoScriptHash]


@dataclass(unsafe_hash=True)
class TxInInfo(PlutusData):
    CONSTR_ID = 0
    out_ref: TxOutRef
    resolved: TxOut


@dataclass(unsafe_hash=True)
class NegInf(PlutusData):
    CONSTR_ID = 0


@dataclass(unsafe_hash=True)
class Finite(PlutusData):
    CONSTR_ID = 1
    time: int


@dataclass(unsafe_hash=True)
class PosInf(PlutusData):
    CONSTR_ID = 2


ExtendedTime = Union[NegInf, Finite, PosInf]


@dataclass(unsafe_hash=True)
class LowerBound(PlutusData):
    CONSTR_ID = 0
    limit: ExtendedTime
    closed: Anything


@dataclass(unsafe_hash=True)
class UpperBound(PlutusData):
    CONSTR_ID = 0
    limit: ExtendedTime
    closed: Anything


@dataclass(unsafe_hash=True)
class TimeRange(PlutusData):
    CONSTR_ID = 0
    lower_bound: LowerBound
    upper_bound: UpperBound


# --- Conway certificates (TxCert); fields a validator never reads stay `Anything` -----


@dataclass(unsafe_hash=True)
class TxCertRegStaking(PlutusData):
    CONSTR_ID = 0
    credential: Credential
    deposit: Anything


@dataclass(unsafe_hash=True)
class TxCertUnRegStaking(PlutusData):
    CONSTR_ID = 1
    credential: Credential
    refund: Anything


@dataclass(unsafe_hash=True)
class TxCertDelegStaking(PlutusData):
    CONSTR_ID = 2
    credential: Credential
    delegatee: Anything


@dataclass(unsafe_hash=True)
class TxCertRegDeleg(PlutusData):
    CONSTR_ID = 3
    credential: Credential
    delegatee: Anything
    deposit: int


@dataclass(unsafe_hash=True)
class TxCertRegDRep(PlutusData):
    CONSTR_ID = 4
    credential: Credential
    deposit: int


@dataclass(unsafe_hash=True)
class TxCertUpdateDRep(PlutusData):
    CONSTR_ID = 5
    credential: Credential


@dataclass(unsafe_hash=True)
class TxCertUnRegDRep(PlutusData):
    CONSTR_ID = 6
    credential: Credential
    refund: int


@dataclass(unsafe_hash=True)
class TxCertPoolRegister(PlutusData):
    CONSTR_ID = 7
    pool_id: bytes
    vrf: bytes


@dataclass(unsafe_hash=True)
class TxCertPoolRetire(PlutusData):
    CONSTR_ID = 8
    pool_id: bytes
    epoch: int


@dataclass(unsafe_hash=True)
class TxCertAuthHotCommittee(PlutusData):
    CONSTR_ID = 9
    cold: Credential
    hot: Credential


@dataclass(unsafe_hash=True)
class TxCertResignColdCommittee(PlutusData):
    CONSTR_ID = 10
    cold: Credential


TxCert = Union[
    TxCertRegStaking,
    TxCertUnRegStaking,
    TxCertDelegStaking,
    TxCertRegDeleg,
    TxCertRegDRep,
    TxCertUpdateDRep,
    TxCertUnRegDRep,
    TxCertPoolRegister,
    TxCertPoolRetire,
    TxCertAuthHotCommittee,
    TxCertResignColdCommittee,
]


@dataclass(unsafe_hash=True)
class TxInfo(PlutusData):
    CONSTR_ID = 0
    inputs: List[TxInInfo]
    reference_inputs: List[TxInInfo]
    outputs: List[TxOut]
    fee: int
    mint: Dict[bytes, Dict[bytes, int]]
    certificates: List[TxCert]
    withdrawals: Dict[Credential, int]
    validity_range: TimeRange
    signatories: List[bytes]
    redeemers: Dict[Anything, Anything]
    datums: Dict[bytes, Anything]
    id: bytes
    votes: Dict[Anything, Anything]
    proposal_procedures: List[Anything]
    current_treasury_amount: Anything
    treasury_donation: Anything


# --- ScriptInfo: why the script runs ---------------------------------------------------


@dataclass(unsafe_hash=True)
class SomeDatum(PlutusData):
    CONSTR_ID = 0
    datum: Anything


@dataclass(unsafe_hash=True)
class NoDatum(PlutusData):
    CONSTR_ID = 1


@dataclass(unsafe_hash=True)
class MintingScript(PlutusData):
    CONSTR_ID = 0
    policy_id: bytes


@dataclass(unsafe_hash=True)
class SpendingScript(PlutusData):
    CONSTR_ID = 1
    tx_out_ref: TxOutRef
    # SomeDatum or NoDatum. Typed loosely so a validator can cast it to SomeDatum directly:
    # reading `.datum` of a NoDatum fails the script, which is what a missing datum must do.
    datum: Anything


@dataclass(unsafe_hash=True)
class RewardingScript(PlutusData):
    CONSTR_ID = 2
    credential: Credential


@dataclass(unsafe_hash=True)
class CertifyingScript(PlutusData):
    CONSTR_ID = 3
    index: int
    certificate: TxCert


@dataclass(unsafe_hash=True)
class VotingScript(PlutusData):
    CONSTR_ID = 4
    voter: Anything


@dataclass(unsafe_hash=True)
class ProposingScript(PlutusData):
    CONSTR_ID = 5
    index: int
    procedure: Anything


ScriptInfo = Union[
    MintingScript, SpendingScript, RewardingScript, CertifyingScript, VotingScript, ProposingScript
]


@dataclass(unsafe_hash=True)
class ScriptContext(PlutusData):
    CONSTR_ID = 0
    transaction: TxInfo
    redeemer: Anything
    purpose: ScriptInfo
