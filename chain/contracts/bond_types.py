"""Datum and redeemers of the provider bond (`chain.contracts.bond`): the one definition.

The validator imports this module (OpShin resolves `from ... import *` at compile time) and
the off-chain builders import it as plain Python. Constructor indices are pinned; changing
one is a protocol change (a new bond script hash).
"""

from chain.contracts.rules import *

# The domain tag of a worker attestation, as it appears in its signed canonical JSON.
ATTESTATION_TAG_FIELD = b'"tag":"proofnet/attestation/v1"'


@dataclass(unsafe_hash=True)
class Bonded(PlutusData):
    """The bond backs the provider's work: only a slash can move part of it."""

    CONSTR_ID = 0


@dataclass(unsafe_hash=True)
class Unbonding(PlutusData):
    """Announced on chain: withdrawable once the validity range starts at or after
    `since` + the script's delay. Still slashable meanwhile."""

    CONSTR_ID = 1
    since: int  # POSIX ms, at or after the Unbond transaction's upper validity bound


BondState = Union[Bonded, Unbonding]


@dataclass(unsafe_hash=True)
class BondDatum(PlutusData):
    """One provider bond UTxO. Only `Bonded` bonds count as collateral for claims, and the
    NTX the UTxO holds (not `amount`, which nothing checks at lock time) is the bond."""

    CONSTR_ID = 0
    # blake2b-224 of the provider's Ed25519 key: the key that signs Unbond and Withdraw AND
    # the attestations a slash cites (the worker's identity key).
    provider: bytes
    # NTX bonded, as declared at lock; every slash writes the remainder here.
    amount: int
    state: BondState
    # Job ids this bond was already slashed for (one slash per job).
    slashed: List[bytes]


@dataclass(unsafe_hash=True)
class Unbond(PlutusData):
    """Provider signs; the whole value stays at the bond address in `output_index` with the
    same datum but `Unbonding(since)`."""

    CONSTR_ID = 0
    output_index: int


@dataclass(unsafe_hash=True)
class Withdraw(PlutusData):
    """Provider signs, the bond is unbonding and its delay has passed."""

    CONSTR_ID = 1


@dataclass(unsafe_hash=True)
class Slash(PlutusData):
    """The oracle quorum of the configuration in reference input `config_ref_index` takes
    the script's share of the bond to `submitter` (output `payout_index`, tagged with the
    bond's out-ref) for the attestation cited here; the rest stays bonded in `bond_index`.

    The citation: `signed` is the COSE Sig_structure the provider's key `provider_key`
    signed (`signature`), cut in chunks of at most 64 bytes (a Plutus bytes value longer
    than that must be chunked on the wire); at `tag_at`, `job_id_at` and `root_at` it holds
    the attestation domain tag, `"job_id":"<hex of job_id>"` and
    `"pot_root":"<hex of merkle_root>"`."""

    CONSTR_ID = 2
    config_ref_index: int
    payout_index: int
    bond_index: int
    submitter: Address
    job_id: bytes
    merkle_root: bytes
    provider_key: bytes
    signature: bytes
    signed: List[bytes]
    tag_at: int
    job_id_at: int
    root_at: int


BondRedeemer = Union[Unbond, Withdraw, Slash]
