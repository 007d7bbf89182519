"""Which items of a transaction are locked by scripts, and where those scripts come from.

Indices follow the ledger's redeemer pointers: spent inputs sorted by (tx id, index),
policies sorted bytewise, withdrawals sorted by reward account (the ledger's `Credential`
order puts script credentials before key hashes), certificates and proposals in body
order, voters in the ledger's `Voter` order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chain.devnet.addresses import SCRIPT, payment_credential
from chain.devnet.plutus_tx import (
    Body,
    Credential,
    Output,
    Script,
    TxDecodeError,
    TxIn,
    Witnesses,
    body_from,
    decode_credential,
    decode_witnesses,
    resolve_utxos,
)

TAGS: tuple[str, ...] = ("spend", "mint", "cert", "reward", "vote", "propose")
TAG_NUMBERS: dict[str, int] = {tag: n for n, tag in enumerate(TAGS)}


class PurposeError(ValueError):
    """The transaction cannot be mapped to script purposes (unknown input, bad certificate)."""


@dataclass(frozen=True)
class NeededScript:
    """One item locked by a script credential, with the redeemer pointer that unlocks it.

    `item` is what the purpose is about: a `TxIn` (spend), the policy id bytes (mint),
    the raw CBOR certificate (cert), a `RewardAccount` (reward), a `Voter` (vote) or the
    raw CBOR proposal procedure (propose).
    """

    tag: str
    index: int
    script_hash: str
    item: Any = field(compare=False, hash=False, repr=False)

    @property
    def tag_number(self) -> int:
        return TAG_NUMBERS[self.tag]


def needed_scripts(tx_body: Any, resolved: Mapping[Any, Any]) -> list[NeededScript]:
    """Every script-locked item of `tx_body`, ordered by (tag number, index).

    `tx_body` is a pycardano `TransactionBody`, the body's CBOR bytes or a decoded `Body`;
    `resolved` maps at least the spent inputs to their outputs (pycardano or decoded).
    """
    body = body_from(tx_body)
    utxos = resolve_utxos(resolved)
    return needed_scripts_of(body, utxos)


def needed_scripts_of(body: Body, utxos: Mapping[TxIn, Output]) -> list[NeededScript]:
    needed: list[NeededScript] = []
    for index, txin in enumerate(body.sorted_inputs):
        if txin not in utxos:
            raise PurposeError(f"input {txin.tx_id.hex()}#{txin.index} is not resolved")
        # Read from the address bytes as phase 1 does: the ledger decides whether an
        # input is script-locked by the header alone.
        payment = payment_credential(utxos[txin].address_bytes)
        if payment is not None and payment[0] == SCRIPT:
            needed.append(NeededScript("spend", index, payment[1:].hex(), txin))
    for index, policy in enumerate(body.sorted_policies):
        needed.append(NeededScript("mint", index, policy.hex(), policy))
    for index, cert in enumerate(body.certificates):
        cred = cert_witness_credential(cert)
        if cred is not None and cred.is_script:
            needed.append(NeededScript("cert", index, cred.hash.hex(), cert))
    for index, (account, _amount) in enumerate(body.sorted_withdrawals):
        if account.credential.is_script:
            needed.append(NeededScript("reward", index, account.credential.hash.hex(), account))
    for index, voter in enumerate(body.sorted_voters):
        if voter.kind in (1, 3):
            needed.append(NeededScript("vote", index, voter.hash.hex(), voter))
    for index, proposal in enumerate(body.proposals):
        guardrail = proposal_guardrail(proposal)
        if guardrail is not None:
            needed.append(NeededScript("propose", index, guardrail.hex(), proposal))
    return needed


def cert_witness_credential(cert: Any) -> Credential | None:
    """The credential that must witness a Conway certificate (None: no witness needed)."""
    if not (isinstance(cert, list) and cert and isinstance(cert[0], int)):
        raise PurposeError(f"malformed certificate {cert!r}")
    kind = cert[0]
    try:
        if kind == 0:
            # Legacy registration without a deposit needs no witness (Conway rule).
            decode_credential(cert[1])
            return None
        if kind in (1, 2, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18):
            return decode_credential(cert[1])
    except (IndexError, TxDecodeError) as err:
        raise PurposeError(f"malformed certificate {cert!r}: {err}") from err
    if kind in (3, 4):
        return None  # pool certificates are witnessed by the pool's key
    raise PurposeError(f"certificate type {kind} is not allowed in Conway")


def proposal_guardrail(proposal: Any) -> bytes | None:
    """The guardrail (constitution) script hash a proposal runs, if any."""
    if not (isinstance(proposal, list) and len(proposal) == 4 and isinstance(proposal[2], list)):
        raise PurposeError(f"malformed proposal procedure {proposal!r}")
    action = proposal[2]
    policy = None
    if action and action[0] == 0 and len(action) == 4:
        policy = action[3]
    elif action and action[0] == 2 and len(action) == 3:
        policy = action[2]
    if policy is None:
        return None
    if not isinstance(policy, bytes) or len(policy) != 28:
        raise PurposeError("malformed guardrail script hash")
    return policy


def find_script(
    script_hash: str | bytes, witnesses: Any, resolved: Mapping[Any, Any]
) -> Script | None:
    """The script with `script_hash` among the witness set's scripts and the reference
    scripts of `resolved` (pass the transaction's spent and reference inputs)."""
    wanted = bytes.fromhex(script_hash) if isinstance(script_hash, str) else bytes(script_hash)
    wits = _witnesses_from(witnesses)
    for script in wits.scripts:
        if script.hash == wanted:
            return script
    for output in resolve_utxos(resolved).values():
        if output.script_ref is not None and output.script_ref.hash == wanted:
            return output.script_ref
    return None


def _witnesses_from(witnesses: Any) -> Witnesses:
    if isinstance(witnesses, Witnesses):
        return witnesses
    if isinstance(witnesses, bytes | bytearray):
        return decode_witnesses(bytes(witnesses))
    to_cbor = getattr(witnesses, "to_cbor", None)
    if to_cbor is None:
        raise PurposeError(f"not a witness set: {type(witnesses).__name__}")
    return decode_witnesses(to_cbor())
