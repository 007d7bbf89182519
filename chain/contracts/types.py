"""Datums and redeemers of the proofnet protocol: the one definition, on-chain and off-chain.

Validators import this module (OpShin resolves `from ... import *` at compile time) and the
off-chain builders import it as plain Python, so each schema exists exactly once. Every
class pins its constructor index; changing one is a protocol change (new script hashes).
"""

from chain.contracts.ledger import *

# Asset name of the oracle configuration NFT (hex 70726f6f666e65742d636f6e666967).
CONFIG_NFT_NAME = b"proofnet-config"


@dataclass(unsafe_hash=True)
class SomePosixTime(PlutusData):
    CONSTR_ID = 0
    time: int


@dataclass(unsafe_hash=True)
class NoPosixTime(PlutusData):
    CONSTR_ID = 1


@dataclass(unsafe_hash=True)
class EscrowDatum(PlutusData):
    """One job's escrow. Refund reads only `batch_credential`, `submitter` and `deadline`
    (fields by position), so a datum that is right in those fields stays refundable."""

    CONSTR_ID = 0
    # Script hash of the batch-settlement stake validator that must run on Settle (first:
    # the per-spend forwarding check reads only this field, and the first is cheapest).
    batch_credential: bytes
    # blake2b-256 of the canonical job spec.
    job_id: bytes
    # Refunds and remainders go to this exact address (payment AND staking credential).
    submitter: Address
    # Signs a Cancel.
    submitter_pkh: bytes
    # NTX quantity the job may pay out in total.
    budget: int
    ntx_policy: bytes
    ntx_name: bytes
    # POSIX milliseconds: settle strictly before (upper bound <= deadline), refund after.
    deadline: int
    # The oracle configuration (NFT) whose quorum this escrow trusts.
    config_policy: bytes
    config_name: bytes
    # Cancel must happen by this time (upper bound <= it) when set.
    cancel_allowed_until: Union[SomePosixTime, NoPosixTime]
    # Distinguishes otherwise identical escrows of one submitter.
    nonce: int
    # The oracle set this escrow was locked under: blake2b-256 of the threshold (8 bytes,
    # big-endian) and the config's oracle key hashes in order (`rules.oracle_set_hash`).
    # Settle and Cancel need the config to hold exactly this set, so no admin action
    # moves escrows locked before it (last: fields are read by position, 1.0.0 had 12).
    oracle_set: bytes


# --- escrow redeemers ---------------------------------------------------------------


@dataclass(unsafe_hash=True)
class Settle(PlutusData):
    """Forward to the batch stake validator (withdraw-zero)."""

    CONSTR_ID = 0


@dataclass(unsafe_hash=True)
class Refund(PlutusData):
    """After the deadline: the whole escrow value to `submitter`, in output `output_index`,
    tagged with the escrow's TxOutRef as inline datum. Anyone may submit it."""

    CONSTR_ID = 1
    output_index: int


@dataclass(unsafe_hash=True)
class Cancel(PlutusData):
    """Before work starts: submitter and oracle quorum agree; value back as in Refund."""

    CONSTR_ID = 2
    config_ref_index: int
    output_index: int


EscrowRedeemer = Union[Settle, Refund, Cancel]


# --- batch settlement (stake validator) redeemers -----------------------------------


@dataclass(unsafe_hash=True)
class SettleEntry(PlutusData):
    """How escrow input `input_index` is settled. Each payout is just an output index: the
    output pays its NTX quantity (the first token, read by position). Neither amount nor
    address is repeated here: the oracle quorum that signs the transaction chooses the
    outputs and this redeemer alike, so a copy could only be compared with values set by
    the same signers; auditors check payout outputs against the attestations (bound by the
    batch's Merkle root)."""

    CONSTR_ID = 0
    input_index: int
    # Output indices of the payouts, each paying a positive NTX quantity.
    payouts: List[int]
    refund_index: int


@dataclass(unsafe_hash=True)
class BatchSettle(PlutusData):
    """Settle every escrow input of the transaction. Entries are in strictly increasing
    input order and every output index used (payouts, then refund, entry after entry) is
    strictly increasing, so no output can satisfy two obligations."""

    CONSTR_ID = 0
    config_ref_index: int
    entries: List[SettleEntry]
    # Merkle root over the oracle attestations this batch pays (auditors recompute it).
    merkle_root: bytes
    batch_id: bytes


@dataclass(unsafe_hash=True)
class BatchAdmin(PlutusData):
    """Any certificate but registration (deregistration, delegation) needs the admin quorum."""

    CONSTR_ID = 1
    config_ref_index: int


BatchRedeemer = Union[BatchSettle, BatchAdmin]


# --- oracle configuration -----------------------------------------------------------


@dataclass(unsafe_hash=True)
class OracleConfigDatum(PlutusData):
    """Who may approve settlements and who may change this configuration. Key lists are
    strictly increasing (no key counts twice) and thresholds are within 1..len(keys)."""

    CONSTR_ID = 0
    oracles: List[bytes]
    threshold: int
    admins: List[bytes]
    admin_threshold: int
    batch_credential: bytes


@dataclass(unsafe_hash=True)
class UpdateConfig(PlutusData):
    """Admin quorum replaces the datum; the NFT stays at the script in `output_index`."""

    CONSTR_ID = 0
    output_index: int


@dataclass(unsafe_hash=True)
class MintConfigNft(PlutusData):
    """The one-shot mint: output `output_index` receives the NFT with a valid config."""

    CONSTR_ID = 0
    output_index: int


@dataclass(unsafe_hash=True)
class MintTestNtx(PlutusData):
    CONSTR_ID = 0
