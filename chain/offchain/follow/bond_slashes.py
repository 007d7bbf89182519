"""Slashed provider bonds in followed transactions: the `SLASH` movements and their evidence.

`BondClassifier` is one more entry beside `classify.EscrowClassifier`: it names the bond
script of a deployment and its terms (`chain.offchain.builders.bond.bond_script`), and for
every input of that script spent with a `Slash` redeemer returns a `Movement(kind=SLASH)`:
`escrow_ref` the bond UTxO, `job_id` the cited job, `address` the enterprise address of the
provider key that lost it, `ntx` the amount taken (the payout output the script checked).

`slash_evidence` reads the same spend as an auditor needs it: the cited job id and
proof-of-training root, the provider's key, signature and signed bytes, re-checked here
(Ed25519 signature, key hash = the bond's provider, fields at the cited offsets), and who
received the share. Only what the ledger validated counts; the CIP-20 memo is not read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey
from pycardano import Address, Network, ScriptHash, VerificationKeyHash

from chain.contracts import bond_types as bt
from chain.offchain import scripts as S
from chain.offchain.builders.bond import BondTerms, bond_script, burn_address
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.onchain import address_from_data
from chain.offchain.follow.classify import SLASH, SLASH_ACTION, Movement
from chain.offchain.follow.model import SPEND, ChainDataError, ChainTx, Output


@dataclass(frozen=True)
class SlashEvidence:
    """One slash as the chain holds it, with the citation re-checked."""

    tx_hash: str
    bond_ref: str
    provider: str  # key hash hex (the bond datum's)
    job_id: str
    pot_root: str
    provider_key: str
    signature: str
    signed_hex: str
    submitter: str  # bech32 of the payout the script checked
    ntx: int
    remaining: int
    signature_valid: bool  # Ed25519 over the signed bytes, by the bond's key
    fields_cited: bool  # tag, job id and root found at the cited offsets
    # The share went to the unspendable burn address: a fraud the referee of a disputed
    # segment found (oracle.verification.referee), whose submitter is never paid.
    burnt: bool = False

    @property
    def sound(self) -> bool:
        return self.signature_valid and self.fields_cited


class BondClassifier:
    """Slash movements of one deployment's bonds under `terms`."""

    def __init__(self, terms: BondTerms) -> None:
        self.terms = terms
        self._hashes: dict[str, str] = {}

    def bond_hash(self, deployment: Deployment) -> str:
        key = deployment.to_json()
        if key not in self._hashes:
            script = bond_script(deployment, self.terms)
            self._hashes[key] = S.script_hash(script).payload.hex()
        return self._hashes[key]

    def scripts(self, deployment: Deployment) -> tuple[str, ...]:
        return (self.bond_hash(deployment),)

    def __call__(self, tx: ChainTx, deployment: Deployment) -> tuple[Movement, ...]:
        found = []
        for ev in slash_evidence(tx, deployment, self.bond_hash(deployment)):
            found.append(
                Movement(
                    kind=SLASH,
                    action=SLASH_ACTION,
                    escrow_ref=ev.bond_ref,
                    job_id=ev.job_id,
                    tx_hash=tx.hash,
                    output_index=_payout_index(tx, ev),
                    address=provider_address(ev.provider, deployment.pycardano_network),
                    lovelace=0,
                    ntx=ev.ntx,
                )
            )
        return tuple(found)


def provider_address(pkh_hex: str, network: Network) -> str:
    return str(Address(VerificationKeyHash(bytes.fromhex(pkh_hex)), network=network).encode())


def _payout_index(tx: ChainTx, ev: SlashEvidence) -> int:
    for position, spent in enumerate(tx.inputs):
        if spent.ref == ev.bond_ref:
            r = tx.redeemer(SPEND, position)
            assert r is not None
            return int(bt.Slash.from_cbor(r.data).payout_index)
    raise ChainDataError(f"{tx.hash}: bond {ev.bond_ref} not among the inputs")


def slash_evidence(tx: ChainTx, deployment: Deployment, bond_hash: str) -> list[SlashEvidence]:
    """Every bond of script `bond_hash` that `tx` slashed, with its citation."""
    if not tx.valid:
        return []
    script = bytes.fromhex(bond_hash)
    found = []
    for position, spent in enumerate(tx.inputs):
        part = spent.address.payment_part
        if not isinstance(part, ScriptHash) or part.payload != script:
            continue
        redeemer = tx.redeemer(SPEND, position)
        if redeemer is None:
            raise ChainDataError(f"{tx.hash}: bond {spent.ref} spent without a redeemer")
        try:
            slash = bt.Slash.from_cbor(redeemer.data)
        except Exception:  # Unbond or Withdraw: not a slash
            continue
        found.append(_evidence(tx, deployment, spent, slash))
    return found


def _evidence(tx: ChainTx, deployment: Deployment, spent: Output, slash: bt.Slash) -> SlashEvidence:
    if spent.datum is None:
        raise ChainDataError(f"{tx.hash}: slashed bond {spent.ref} has no inline datum")
    try:
        datum = bt.BondDatum.from_cbor(spent.datum)
    except Exception as exc:
        raise ChainDataError(f"{tx.hash}: slashed bond {spent.ref}: {exc}") from exc
    n = len(tx.outputs)
    if not (0 <= slash.payout_index < n and 0 <= slash.bond_index < n):
        raise ChainDataError(f"{tx.hash}: slash of {spent.ref} names missing outputs")
    payout, rest = tx.outputs[slash.payout_index], tx.outputs[slash.bond_index]
    signed = b"".join(bytes(c) for c in slash.signed)
    key, sig = bytes(slash.provider_key), bytes(slash.signature)
    try:
        VerifyKey(key).verify(signed, sig)
        valid = hashlib.blake2b(key, digest_size=28).digest() == datum.provider
    except (BadSignatureError, ValueError):
        valid = False
    cited = (
        _at(signed, slash.tag_at, b'"tag":"' + b"proofnet/attestation/v1" + b'"')
        and _at(signed, slash.job_id_at, b'"job_id":"' + slash.job_id.hex().encode() + b'"')
        and _at(signed, slash.root_at, b'"pot_root":"' + slash.merkle_root.hex().encode() + b'"')
    )
    paid_to = address_from_data(slash.submitter, deployment.pycardano_network)
    return SlashEvidence(
        tx_hash=tx.hash,
        bond_ref=spent.ref,
        provider=datum.provider.hex(),
        job_id=slash.job_id.hex(),
        pot_root=slash.merkle_root.hex(),
        provider_key=key.hex(),
        signature=sig.hex(),
        signed_hex=signed.hex(),
        submitter=str(paid_to.encode()),
        ntx=payout.quantity(deployment.ntx_unit),
        remaining=rest.quantity(deployment.ntx_unit),
        signature_valid=valid,
        fields_cited=cited,
        burnt=paid_to == burn_address(deployment),
    )


def _at(signed: bytes, at: int, text: bytes) -> bool:
    return at >= 0 and signed[at : at + len(text)] == text
