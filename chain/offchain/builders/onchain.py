"""Off-chain values in their on-chain (Plutus data) shape: addresses and output references."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import cbor2
from pycardano import (
    Address,
    Network,
    PlutusData,
    RawCBOR,
    ScriptHash,
    TransactionInput,
    UTxO,
    VerificationKeyHash,
)

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


def _credential_part(cred: object) -> VerificationKeyHash | ScriptHash:
    if isinstance(cred, t.PubKeyCredential):
        return VerificationKeyHash(cred.credential_hash)
    if isinstance(cred, t.ScriptCredential):
        return ScriptHash(cred.credential_hash)
    raise BuilderError(f"not a credential: {cred!r}")


def address_from_data(address: t.Address, network: Network) -> Address:
    """The Shelley address a Plutus `Address` denotes (pointers are refused)."""
    staking = address.staking_credential
    stake_part: VerificationKeyHash | ScriptHash | None = None
    if isinstance(staking, t.SomeStakingCredential):
        inner = staking.staking_credential
        if not isinstance(inner, t.StakingHash):
            raise BuilderError("pointer staking credentials are not supported")
        stake_part = _credential_part(inner.value)
    return Address(_credential_part(address.payment_credential), stake_part, network=network)


@dataclass
class EscrowDatumV1(PlutusData):
    """The escrow datum of protocol 1.0.0 (frozen): today's `EscrowDatum` without its last
    field, `oracle_set`. Escrows locked under 1.0.0 hold it; builders read it to settle or
    refund them under their own scripts and write it when locking under a 1.0.0
    deployment (docs/protocol.md, Upgrades)."""

    CONSTR_ID = 0
    batch_credential: bytes
    job_id: bytes
    submitter: t.Address
    submitter_pkh: bytes
    budget: int
    ntx_policy: bytes
    ntx_name: bytes
    deadline: int
    config_policy: bytes
    config_name: bytes
    cancel_allowed_until: Union[t.SomePosixTime, t.NoPosixTime]  # noqa: UP007 (pycardano)
    nonce: int

    @classmethod
    def of(cls, datum: t.EscrowDatum) -> EscrowDatumV1:
        return cls(
            datum.batch_credential,
            datum.job_id,
            datum.submitter,
            datum.submitter_pkh,
            datum.budget,
            datum.ntx_policy,
            datum.ntx_name,
            datum.deadline,
            datum.config_policy,
            datum.config_name,
            datum.cancel_allowed_until,
            datum.nonce,
        )

    def current(self) -> t.EscrowDatum:
        """As today's datum, pinning no oracle set (b""): 1.0.0 escrows trust whatever
        set their configuration holds."""
        return t.EscrowDatum(
            self.batch_credential,
            self.job_id,
            self.submitter,
            self.submitter_pkh,
            self.budget,
            self.ntx_policy,
            self.ntx_name,
            self.deadline,
            self.config_policy,
            self.config_name,
            self.cancel_allowed_until,
            self.nonce,
            b"",
        )


def escrow_datum_from_cbor(raw: bytes) -> t.EscrowDatum:
    """An escrow datum of any released protocol version, as today's (`EscrowDatumV1` reads
    with an empty `oracle_set`). Raises what pycardano raises on anything else."""
    try:
        return t.EscrowDatum.from_cbor(raw)
    except Exception:  # pycardano raises assorted errors on foreign data
        try:
            return EscrowDatumV1.from_cbor(raw).current()
        except Exception:
            pass
        raise


def escrow_datum_of(utxo: UTxO) -> t.EscrowDatum:
    """The inline `EscrowDatum` of an escrow UTxO; BuilderError when it has none. A 1.0.0
    escrow's datum reads as today's with an empty `oracle_set`."""
    datum = utxo.output.datum
    if datum is None:
        raise BuilderError(f"{out_ref_text(utxo.input)} has no inline datum")
    try:
        return escrow_datum_from_cbor(datum_cbor(datum))
    except Exception as exc:  # pycardano raises assorted errors on foreign data
        raise BuilderError(
            f"{out_ref_text(utxo.input)} does not hold an EscrowDatum: {exc}"
        ) from exc


def datum_cbor(datum: object) -> bytes:
    """The CBOR of an inline datum as a backend returned it (RawCBOR, PlutusData, ...)."""
    if isinstance(datum, RawCBOR):
        return bytes(datum.cbor)
    to_cbor = getattr(datum, "to_cbor", None)
    if callable(to_cbor):
        raw = to_cbor()
        return bytes.fromhex(raw) if isinstance(raw, str) else bytes(raw)
    return bytes(cbor2.dumps(datum))
