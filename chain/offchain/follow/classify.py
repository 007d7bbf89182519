"""What a transaction did with one deployment's money: `ChainTx` -> `Movement`s (pure).

A movement is one output the ledger created because a script of the deployment let a UTxO
go: a provider's payout, a submitter's refund (after the deadline, or what a settlement left
over), a cancel's return, a slashed bond. Classifiers are a tuple applied in turn, each
answering for the scripts it names (`Classifier.scripts`, what the follower watches):

- `EscrowClassifier` (the escrow script): an input is this deployment's escrow when it sits
  at the escrow script and its inline `EscrowDatum` trusts this deployment (batch script,
  oracle configuration and NTX unit, `Deployment.trusts`). The escrow script is shared by
  every deployment, so that datum check is what keeps another deployment's settlements out.
  Its spend redeemer says what happened: `Settle` (the batch stake validator ran on the
  deployment's withdrawal, and its `BatchSettle` entry for this input names the payout
  outputs and the remainder output), `Refund` or `Cancel` (the output the redeemer names).
- Slashes: the provider bond validator is not written yet. Its classifier will be one more
  entry of `DEFAULT_CLASSIFIERS`: `scripts` returns the bond script's hash, and `__call__`
  returns `Movement(kind=SLASH, ...)` with `escrow_ref` the bond UTxO, `address` the
  provider's address that lost the bond and `ntx` the amount taken. Nothing else changes:
  the follower, the record and every reader handle the kind already.

Only what the ledger validated counts: spent inputs, their datums, the redeemers the scripts
ran with and the outputs. Metadata (a CIP-20 "proofnet settlement" memo, label 674) is
ignored: anyone can attach it to any transaction. A transaction whose scripts failed
(`valid` False) moved nothing and yields nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import cbor2
from pycardano import Address, ScriptHash

from chain.contracts import types as t
from chain.offchain.builders.deployment import Deployment
from chain.offchain.follow.model import REWARD, SPEND, ChainDataError, ChainTx, Output

PAYOUT, REFUND, CANCEL, SLASH = "payout", "refund", "cancel", "slash"
KINDS = (PAYOUT, REFUND, CANCEL, SLASH)
# What spent the UTxO (a movement's `action`): the escrow redeemers, or a bond's slash.
SETTLE_ACTION, REFUND_ACTION, CANCEL_ACTION, SLASH_ACTION = "settle", "refund", "cancel", "slash"


@dataclass(frozen=True)
class Movement:
    """One output created by the deployment's scripts letting a UTxO go."""

    kind: str  # PAYOUT | REFUND | CANCEL | SLASH
    action: str  # what spent `escrow_ref`: settle | refund | cancel | slash
    escrow_ref: str  # "txid#index" of the UTxO spent (an escrow; a bond for slashes)
    job_id: str  # hex, from the escrow's datum ("" where there is none)
    tx_hash: str
    output_index: int
    address: str  # bech32: who received (who lost, for a slash)
    lovelace: int
    ntx: int

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown movement kind {self.kind!r}")
        if self.ntx < 0 or self.lovelace < 0:
            raise ValueError("movement amounts are never negative")


class Classifier(Protocol):
    """Recognises the movements of the scripts it names."""

    def scripts(self, deployment: Deployment) -> tuple[str, ...]:
        """Script hashes (hex) whose spends the follower must bring to this classifier."""
        ...

    def __call__(self, tx: ChainTx, deployment: Deployment) -> tuple[Movement, ...]: ...


def _constructor(data: bytes) -> int | None:
    """The constructor index of Plutus data (tags 121..127 and 1280..1400, or 102)."""
    try:
        value = cbor2.loads(data)
    except cbor2.CBORDecodeError:
        return None
    if not isinstance(value, cbor2.CBORTag):
        return None
    if 121 <= value.tag <= 127:
        return value.tag - 121
    if 1280 <= value.tag <= 1400:
        return value.tag - 1280 + 7
    if value.tag == 102 and isinstance(value.value, list) and value.value:
        return int(value.value[0])
    return None


def _escrow_datum(spent: Output, escrow_hash: bytes) -> t.EscrowDatum | None:
    part = spent.address.payment_part
    if not isinstance(part, ScriptHash) or part.payload != escrow_hash or spent.datum is None:
        return None
    try:
        return t.EscrowDatum.from_cbor(spent.datum)
    except Exception:  # some other datum at the shared escrow script: not an escrow of ours
        return None


def _batch_reward_account(deployment: Deployment) -> bytes:
    return bytes(deployment.batch_stake_address.to_primitive())


class EscrowClassifier:
    """Payouts, refunds and cancels of the deployment's escrows."""

    def scripts(self, deployment: Deployment) -> tuple[str, ...]:
        return (deployment.escrow_hash,)

    def __call__(self, tx: ChainTx, deployment: Deployment) -> tuple[Movement, ...]:
        if not tx.valid:
            return ()
        escrow_hash = bytes.fromhex(deployment.escrow_hash)
        found: list[Movement] = []
        batch: t.BatchSettle | None = None
        for position, spent in enumerate(tx.inputs):
            datum = _escrow_datum(spent, escrow_hash)
            if datum is None or not deployment.trusts(datum):
                continue
            redeemer = tx.redeemer(SPEND, position)
            if redeemer is None:
                raise ChainDataError(f"{tx.hash}: escrow {spent.ref} spent without a redeemer")
            action = _constructor(redeemer.data)
            if action == t.Settle.CONSTR_ID:
                batch = batch or self._batch(tx, deployment)
                found += self._settled(tx, deployment, batch, position, spent, datum)
            elif action in (t.Refund.CONSTR_ID, t.Cancel.CONSTR_ID):
                found.append(self._returned(tx, deployment, redeemer.data, action, spent, datum))
            else:
                raise ChainDataError(f"{tx.hash}: escrow {spent.ref} spent with redeemer {action}")
        return tuple(found)

    @staticmethod
    def _batch(tx: ChainTx, deployment: Deployment) -> t.BatchSettle:
        # The escrow's Settle only checks that the batch credential in its datum is
        # withdrawn from; that credential is this deployment's (the datum trusts it), and
        # the batch validator it ran checked the entry below against the outputs.
        index = tx.withdrawal_index(_batch_reward_account(deployment))
        redeemer = None if index is None else tx.redeemer(REWARD, index)
        if redeemer is None:
            raise ChainDataError(f"{tx.hash}: a Settle without the deployment's batch withdrawal")
        try:
            return t.BatchSettle.from_cbor(redeemer.data)
        except Exception as exc:
            raise ChainDataError(f"{tx.hash}: batch redeemer does not decode: {exc}") from exc

    @staticmethod
    def _settled(
        tx: ChainTx,
        deployment: Deployment,
        batch: t.BatchSettle,
        position: int,
        spent: Output,
        datum: t.EscrowDatum,
    ) -> list[Movement]:
        entries = [e for e in batch.entries if e.input_index == position]
        if len(entries) != 1:
            raise ChainDataError(f"{tx.hash}: no single batch entry for escrow {spent.ref}")
        entry = entries[0]
        roles = [(PAYOUT, i) for i in entry.payouts] + [(REFUND, entry.refund_index)]
        return [
            _movement(tx, deployment, kind, SETTLE_ACTION, index, spent, datum)
            for kind, index in roles
        ]

    @staticmethod
    def _returned(
        tx: ChainTx,
        deployment: Deployment,
        data: bytes,
        action: int,
        spent: Output,
        datum: t.EscrowDatum,
    ) -> Movement:
        try:
            index = (
                t.Refund.from_cbor(data).output_index
                if action == t.Refund.CONSTR_ID
                else t.Cancel.from_cbor(data).output_index
            )
        except Exception as exc:
            raise ChainDataError(f"{tx.hash}: escrow redeemer does not decode: {exc}") from exc
        if action == t.Refund.CONSTR_ID:
            return _movement(tx, deployment, REFUND, REFUND_ACTION, index, spent, datum)
        return _movement(tx, deployment, CANCEL, CANCEL_ACTION, index, spent, datum)


def _movement(
    tx: ChainTx,
    deployment: Deployment,
    kind: str,
    action: str,
    index: int,
    spent: Output,
    datum: t.EscrowDatum,
) -> Movement:
    if not 0 <= index < len(tx.outputs):
        raise ChainDataError(f"{tx.hash}: output {index} named for {spent.ref} does not exist")
    out = tx.outputs[index]
    return Movement(
        kind=kind,
        action=action,
        escrow_ref=spent.ref,
        job_id=bytes(datum.job_id).hex(),
        tx_hash=tx.hash,
        output_index=index,
        address=_bech32(out.address),
        lovelace=out.lovelace,
        ntx=out.quantity(deployment.ntx_unit),
    )


def _bech32(address: Address) -> str:
    return str(address.encode())


DEFAULT_CLASSIFIERS: tuple[Classifier, ...] = (EscrowClassifier(),)


def watched_scripts(deployment: Deployment, classifiers: Sequence[Classifier]) -> tuple[str, ...]:
    """Every script hash the classifiers need followed, once each."""
    return tuple(dict.fromkeys(h for c in classifiers for h in c.scripts(deployment)))


def classify(
    tx: ChainTx, deployment: Deployment, classifiers: Sequence[Classifier] = DEFAULT_CLASSIFIERS
) -> tuple[Movement, ...]:
    """Every movement of `tx`, classifier after classifier; an output is claimed once."""
    seen: set[int] = set()
    found: list[Movement] = []
    for classifier in classifiers:
        for movement in classifier(tx, deployment):
            if movement.output_index in seen:
                raise ChainDataError(
                    f"{tx.hash}: output {movement.output_index} claimed by two movements"
                )
            seen.add(movement.output_index)
            found.append(movement)
    return tuple(found)
