"""Off-chain values in their on-chain (Plutus data) shape: addresses and output references."""

from __future__ import annotations

from pycardano import Address, ScriptHash, TransactionInput, VerificationKeyHash

from chain.contracts import types as t
from chain.offchain.builders.errors import BuilderError


def credential_data(part: object) -> t.PubKeyCredential | t.ScriptCredential:
    if isinstance(part, VerificationKeyHash):
        return t.PubKeyCredential(part.payload)
    if isinstance(part, ScriptHash):
        return t.ScriptCredential(part.payload)
    raise BuilderError(f"unsupported credential {part!r}")


def address_data(address: Address) -> t.Address:
    """The ledger's Plutus V3 encoding of a Shelley base/enterprise address."""
    if address.payment_part is None:
        raise BuilderError(f"{address} has no payment credential")
    staking: t.SomeStakingCredential | t.NoStakingCredential
    if address.staking_part is None:
        staking = t.NoStakingCredential()
    elif isinstance(address.staking_part, VerificationKeyHash | ScriptHash):
        staking = t.SomeStakingCredential(t.StakingHash(credential_data(address.staking_part)))
    else:
        raise BuilderError(f"{address}: pointer addresses are not supported")
    return t.Address(credential_data(address.payment_part), staking)


def out_ref_data(ref: TransactionInput) -> t.TxOutRef:
    return t.TxOutRef(ref.transaction_id.payload, ref.index)


def out_ref_text(ref: TransactionInput) -> str:
    return f"{ref.transaction_id.payload.hex()}#{ref.index}"


def parse_out_ref(text: str) -> TransactionInput:
    from pycardano import TransactionId

    tx_id, sep, index = text.partition("#")
    if not sep or len(tx_id) != 64 or not index.isdigit():
        raise BuilderError(f"not an output reference 'txid#index': {text!r}")
    return TransactionInput(TransactionId(bytes.fromhex(tx_id)), int(index))
