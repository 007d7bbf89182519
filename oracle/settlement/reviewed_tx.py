"""A transaction another party asks this oracle to co-sign, decoded and resolved on the
oracle's own chain view, and the checks every such review starts with.

A VKey witness signs the whole body: whatever else the body does that needs the key is
authorised too. So every review (an escrow cancel, a bond slash) first checks the shape
(this oracle is a required signer, the signature expires, nothing is minted, certified,
withdrawn, voted, proposed or donated) and that no input or collateral is this oracle's
own, before the checks of what the transaction is for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pycardano import (
    RedeemerMap,
    RedeemerTag,
    Transaction,
    TransactionInput,
    TransactionOutput,
    VerificationKeyHash,
)

from .ports import ChainView, OutRef
from .quorum import QuorumRefusal


@dataclass(frozen=True)
class ReviewedTx:
    """The decoded transaction, its inputs resolved on this oracle's chain."""

    tx: Transaction
    inputs: tuple[tuple[OutRef, TransactionOutput], ...]  # in ledger (redeemer index) order
    collateral: tuple[tuple[OutRef, TransactionOutput], ...]
    spend_redeemers: dict[int, Any]  # sorted-input index -> redeemer data


def out_ref(i: TransactionInput) -> OutRef:
    return OutRef(i.transaction_id.payload.hex(), i.index)


def decode_reviewed(tx_cbor: bytes, chain: ChainView) -> ReviewedTx:
    """The transaction with every input and collateral input an unspent output of this
    oracle's chain, or `QuorumRefusal`."""
    try:
        tx = Transaction.from_cbor(tx_cbor)
    except Exception as exc:  # pycardano raises assorted types on bad CBOR
        raise QuorumRefusal(f"not a transaction: {exc}") from exc
    body = tx.transaction_body
    ordered = sorted(body.inputs, key=lambda i: (i.transaction_id.payload, i.index))
    inputs = tuple((out_ref(i), _resolve(chain, out_ref(i))) for i in ordered)
    collateral = tuple((out_ref(i), _resolve(chain, out_ref(i))) for i in body.collateral or [])
    spend: dict[int, Any] = {}
    redeemers = tx.transaction_witness_set.redeemer
    if isinstance(redeemers, RedeemerMap):
        for key, value in redeemers.items():
            if key.tag == RedeemerTag.SPEND:
                spend[key.index] = value.data
    elif redeemers:
        for r in redeemers:
            if r.tag == RedeemerTag.SPEND:
                spend[r.index] = r.data
    return ReviewedTx(tx, inputs, collateral, spend)


def _resolve(chain: ChainView, ref: OutRef) -> TransactionOutput:
    spend = chain.spend_status(ref)
    if not spend.exists or spend.spent_by is not None:
        raise QuorumRefusal(f"input {ref} is not an unspent output on this oracle's chain")
    raw = chain.output_cbor(ref)
    if raw is None:
        raise QuorumRefusal(f"input {ref} is unknown to this oracle's chain")
    return TransactionOutput.from_cbor(raw)


def refuse_beyond_scope(tx: ReviewedTx, key_hash: VerificationKeyHash, what: str) -> None:
    """The shape every co-signed spend has: this oracle named a required signer, a TTL
    (a signature valid forever is never given), and nothing but spends."""
    body = tx.tx.transaction_body
    if key_hash not in (body.required_signers or []):
        raise QuorumRefusal(f"this oracle is not a required signer of the {what}")
    if body.ttl is None:
        raise QuorumRefusal(f"a {what} has a TTL (a signature valid forever is never given)")
    extras = {
        "mints": body.mint,
        "certifies": body.certificates,
        "withdraws": body.withdraws,
        "votes": body.voting_procedures,
        "proposes": body.proposal_procedures,
        "donates": body.donation,
    }
    for verb, value in extras.items():
        if value:
            raise QuorumRefusal(f"a {what} {verb} nothing; this transaction does")


def refuse_own_funds(tx: ReviewedTx, key_hash: VerificationKeyHash) -> None:
    """No input or collateral at this oracle's key: its witness would spend it."""
    for ref, out in (*tx.inputs, *tx.collateral):
        if out.address.payment_part == key_hash:
            raise QuorumRefusal(f"input {ref} belongs to this oracle; its witness would spend it")
