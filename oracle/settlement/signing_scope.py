"""What a co-signer's witness may cover: a settlement batch, and nothing of the co-signer's.

A VKey witness signs the whole transaction body. Whatever else the body does that needs
that key is authorised by it too: spending an output at an address of the key (the
proposer's "fee inputs" taken from the co-signer's wallet), offering such an output as
collateral, a withdrawal or certificate of the key's stake credential, a spend of some
other script whose rules name the key. So before it checks what the batch pays, a
co-signer checks the body's scope, each check on its own, in turn, with its reason:

- nothing is minted, certified, voted, proposed, donated or updated, and the TTL is set;
- the only withdrawal is the batch script's zero withdrawal;
- no input or collateral input is at an address whose payment credential is one of this
  co-signer's keys (any staking part);
- every script input is an escrow of this deployment;
- the collateral return goes back to the address the collateral came from;
- the redeemers are exactly the batch's one withdrawal redeemer and one `Settle` per
  escrow input: no spend, mint, certificate, vote or proposal redeemer besides.

The checks read the transaction and the outputs its inputs spend (resolved on the
co-signer's own chain view by the caller); they do no I/O and never sign.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pycardano import (
    RedeemerMap,
    RedeemerTag,
    ScriptHash,
    Transaction,
    TransactionInput,
    TransactionOutput,
    VerificationKeyHash,
)

from chain.contracts import types as t
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.onchain import datum_cbor

from .ports import OutRef


@dataclass(frozen=True)
class SigningScope:
    """Who is signing: the deployment whose escrows a batch may spend, and every key hash
    this co-signer controls (its oracle key, and any other key it holds, e.g. a payer)."""

    deployment: Deployment
    own_keys: frozenset[bytes]

    @property
    def escrow_hash(self) -> bytes:
        return bytes.fromhex(self.deployment.escrow_hash)


@dataclass(frozen=True)
class ResolvedTx:
    """A transaction and the outputs its inputs and collateral inputs spend."""

    tx: Transaction
    outputs: Mapping[OutRef, TransactionOutput]

    @property
    def inputs(self) -> list[TransactionInput]:
        """The spent inputs in ledger order (the order redeemer indices count in)."""
        return sorted(
            self.tx.transaction_body.inputs, key=lambda i: (i.transaction_id.payload, i.index)
        )

    def output(self, tx_in: TransactionInput) -> TransactionOutput:
        return self.outputs[ref_of(tx_in)]


def ref_of(tx_in: TransactionInput) -> OutRef:
    return OutRef(tx_in.transaction_id.payload.hex(), tx_in.index)


Check = Callable[[ResolvedTx, SigningScope], str | None]


def _nothing_but_a_batch(rt: ResolvedTx, scope: SigningScope) -> str | None:
    body = rt.tx.transaction_body
    extras = {
        "mints": body.mint,
        "certifies": body.certificates,
        "votes": body.voting_procedures,
        "proposes": body.proposal_procedures,
        "donates to the treasury": body.donation,
        "states the treasury": body.current_treasury_value,
        "proposes a protocol update": body.update,
    }
    for what, value in extras.items():
        if value:
            return f"a batch {what} nothing; this one {what}"
    if body.ttl is None:
        return "a batch has a TTL (an upper validity bound)"
    return None


def _only_the_batch_withdrawal(rt: ResolvedTx, scope: SigningScope) -> str | None:
    withdrawals = dict(rt.tx.transaction_body.withdraws or {})
    stake = bytes(scope.deployment.batch_stake_address)
    if list(withdrawals) != [stake]:
        return "the batch withdraws from something other than the batch script alone"
    if withdrawals[stake] != 0:
        return "the batch script's withdrawal must be zero"
    return None


def _own_key(output: TransactionOutput, scope: SigningScope) -> bool:
    part = output.address.payment_part
    return isinstance(part, VerificationKeyHash) and part.payload in scope.own_keys


def _no_input_of_ours(rt: ResolvedTx, scope: SigningScope) -> str | None:
    for tx_in in rt.inputs:
        if _own_key(rt.output(tx_in), scope):
            return (
                f"input {ref_of(tx_in)} is at an address of this co-signer's key: its witness "
                "would spend the co-signer's own funds"
            )
    return None


def _only_our_escrow_scripts(rt: ResolvedTx, scope: SigningScope) -> str | None:
    for tx_in in rt.inputs:
        part = rt.output(tx_in).address.payment_part
        if isinstance(part, ScriptHash) and part.payload != scope.escrow_hash:
            return (
                f"input {ref_of(tx_in)} is a script input that is not an escrow of this deployment"
            )
    return None


def _collateral_is_not_ours(rt: ResolvedTx, scope: SigningScope) -> str | None:
    body = rt.tx.transaction_body
    sources = []
    for tx_in in body.collateral or []:
        output = rt.output(tx_in)
        if _own_key(output, scope):
            return (
                f"collateral {ref_of(tx_in)} is at an address of this co-signer's key: a failing "
                "script would take it"
            )
        sources.append(output.address)
    back = body.collateral_return
    if back is not None and back.address not in sources:
        return "the collateral return goes elsewhere than the collateral came from"
    return None


def _settle_data(data: object) -> bool:
    try:
        raw = data.to_cbor() if hasattr(data, "to_cbor") else datum_cbor(data)
        return isinstance(t.Settle.from_cbor(raw), t.Settle)
    except Exception:  # foreign data of any shape
        return False


def _only_batch_redeemers(rt: ResolvedTx, scope: SigningScope) -> str | None:
    redeemers = rt.tx.transaction_witness_set.redeemer
    if not isinstance(redeemers, RedeemerMap):
        return "the batch carries no redeemer map"
    escrow_inputs = {
        index
        for index, tx_in in enumerate(rt.inputs)
        if rt.output(tx_in).address.payment_part == ScriptHash(scope.escrow_hash)
    }
    spends: set[int] = set()
    withdrawals = 0
    for key, value in redeemers.items():
        if key.tag == RedeemerTag.WITHDRAWAL:
            withdrawals += 1
        elif key.tag == RedeemerTag.SPEND and key.index in escrow_inputs:
            if not _settle_data(value.data):
                return f"escrow input {key.index} is spent with a redeemer other than Settle"
            spends.add(key.index)
        else:
            return f"the batch carries a {key.tag.name.lower()} redeemer (index {key.index})"
    if withdrawals != 1:
        return "a batch has exactly one withdrawal redeemer"
    if spends != escrow_inputs:
        return "an escrow input has no Settle redeemer"
    return None


SCOPE_CHECKS: tuple[Check, ...] = (
    _nothing_but_a_batch,
    _only_the_batch_withdrawal,
    _no_input_of_ours,
    _only_our_escrow_scripts,
    _collateral_is_not_ours,
    _only_batch_redeemers,
)


def scope_refusal(
    rt: ResolvedTx, scope: SigningScope, checks: Sequence[Check] = SCOPE_CHECKS
) -> str | None:
    """The first check's reason to refuse, or None when the body is a batch and no more."""
    for check in checks:
        reason = check(rt, scope)
        if reason is not None:
            return reason
    return None
