"""An auditor reads a slash from the chain with its evidence re-checked
(chain.offchain.follow.bond_slashes), and the slash memo cites the attestation.

The transactions are `ChainTx` values written here (the follower's output shape); the
devnet path that produces them is tests/chain/contracts/test_bond_attacks.py. A slash
whose citation does not check cannot pass the bond script, so the unsound cases below are
what an auditor would see if a deployment ran some other script under the bond's name."""

from __future__ import annotations

import dataclasses
import hashlib

from attestation_support import signed_attestation
from escrow_chain import NTX_NAME, NTX_POLICY, deployment
from nacl.signing import SigningKey
from pycardano import Address, Network, VerificationKeyHash

from chain.contracts import bond_types as bt
from chain.offchain.builders.bond import (
    BondTerms,
    Citation,
    bond_address,
    bond_script,
    citation_of,
    slash_memo,
)
from chain.offchain.builders.onchain import address_data
from chain.offchain.follow.bond_slashes import BondClassifier, slash_evidence
from chain.offchain.follow.classify import SLASH, classify
from chain.offchain.follow.model import SPEND, BlockPoint, ChainTx, Output, Redeemer

DEPLOYED = deployment()
TERMS = BondTerms(unbonding_delay_ms=1_000, slash_permille=250)
KEY = SigningKey(b"\x0c" * 32)
PKH = hashlib.blake2b(bytes(KEY.verify_key), digest_size=28).digest()
JOB = hashlib.sha256(b"job").digest()
ROOT = hashlib.sha256(b"root").digest()
UNIT = NTX_POLICY + NTX_NAME
SUBMITTER = Address(VerificationKeyHash(b"\x01" * 28), network=Network.TESTNET)
BLOCK = BlockPoint(10, "ab" * 32)


def citation() -> Citation:
    return citation_of(signed_attestation(KEY, JOB, ROOT), JOB, ROOT)


def slash_tx(c: Citation, **changes: object) -> ChainTx:
    address = bond_address(bond_script(DEPLOYED, TERMS), DEPLOYED)
    datum = bt.BondDatum(PKH, 1_000, bt.Bonded(), [])
    bond = Output("cd" * 32, 0, address, 2_000_000, {UNIT: 1_000}, datum.to_cbor())
    rest_datum = bt.BondDatum(PKH, 750, bt.Bonded(), [JOB])
    redeemer = bt.Slash(
        config_ref_index=0,
        payout_index=0,
        bond_index=1,
        submitter=address_data(SUBMITTER),
        job_id=c.job_id,
        merkle_root=c.merkle_root,
        provider_key=c.provider_key,
        signature=c.signature,
        signed=c.chunks,
        tag_at=c.tag_at,
        job_id_at=c.job_id_at,
        root_at=c.root_at,
    )
    redeemer = dataclasses.replace(redeemer, **changes)
    return ChainTx(
        hash="ee" * 32,
        block=BLOCK,
        index=0,
        valid=True,
        inputs=(bond,),
        outputs=(
            Output("ee" * 32, 0, SUBMITTER, 2_000_000, {UNIT: 250}),
            Output("ee" * 32, 1, address, 2_000_000, {UNIT: 750}, rest_datum.to_cbor()),
        ),
        redeemers=(Redeemer(SPEND, 0, redeemer.to_cbor()),),
        withdrawals=(),
    )


def test_a_slash_is_a_movement_and_its_evidence_checks() -> None:
    classifier = BondClassifier(TERMS)
    tx = slash_tx(citation())
    (movement,) = classify(tx, DEPLOYED, (classifier,))
    assert movement.kind == SLASH and movement.ntx == 250 and movement.job_id == JOB.hex()
    assert movement.escrow_ref == f"{'cd' * 32}#0"
    (evidence,) = slash_evidence(tx, DEPLOYED, classifier.bond_hash(DEPLOYED))
    assert evidence.sound and evidence.provider == PKH.hex()
    assert evidence.submitter == str(SUBMITTER) and evidence.remaining == 750


def test_a_forged_signature_is_shown_as_unsound_evidence() -> None:
    c = citation()
    forged = bytes([c.signature[0] ^ 1]) + c.signature[1:]
    classifier = BondClassifier(TERMS)
    (evidence,) = slash_evidence(
        slash_tx(c, signature=forged), DEPLOYED, classifier.bond_hash(DEPLOYED)
    )
    assert not evidence.signature_valid and not evidence.sound


def test_a_job_the_attestation_does_not_name_is_shown_as_unsound_evidence() -> None:
    classifier = BondClassifier(TERMS)
    tx = slash_tx(citation(), job_id=hashlib.sha256(b"other").digest())
    (evidence,) = slash_evidence(tx, DEPLOYED, classifier.bond_hash(DEPLOYED))
    assert evidence.signature_valid and not evidence.fields_cited and not evidence.sound


def test_a_failed_transaction_moved_nothing() -> None:
    classifier = BondClassifier(TERMS)
    tx = dataclasses.replace(slash_tx(citation()), valid=False)
    assert classify(tx, DEPLOYED, (classifier,)) == ()


def test_the_memo_cites_job_root_and_signature_in_64_byte_values() -> None:
    from pycardano import TransactionId, TransactionInput, TransactionOutput, UTxO, Value

    c = citation()
    bond = UTxO(
        TransactionInput(TransactionId(b"\xcd" * 32), 3),
        TransactionOutput(SUBMITTER, Value(2_000_000)),
    )
    msg = slash_memo(c, bond, 250)[674]["msg"]
    assert JOB.hex() in msg and ROOT.hex() in msg
    assert "".join(msg[msg.index("provider_signature") + 1 : msg.index("bond")]) == (
        c.signature.hex()
    )
    assert "".join(msg[msg.index("bond") + 1 :]) == f"{'cd' * 32}#3"
    assert all(len(m.encode()) <= 64 for m in msg)
