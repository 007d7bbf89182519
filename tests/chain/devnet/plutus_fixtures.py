"""Builders for real Plutus V3 transactions used by the phase-2 and differential tests.

Transactions are assembled with pycardano types (no chain context needed); scripts are
either tiny hand-written UPLC programs or an OpShin validator compiled at test time.
"""

from __future__ import annotations

import functools
import hashlib
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pycardano import (
    Address,
    Asset,
    AssetName,
    ExecutionUnits,
    MultiAsset,
    Network,
    PaymentSigningKey,
    PaymentVerificationKey,
    PlutusV2Script,
    PlutusV3Script,
    RawPlutusData,
    Redeemer,
    RedeemerTag,
    ScriptHash,
    Transaction,
    TransactionBody,
    TransactionId,
    TransactionInput,
    TransactionOutput,
    TransactionWitnessSet,
    Value,
    VerificationKeyHash,
    VerificationKeyWitness,
    Withdrawals,
    plutus_script_hash,
)
from pycardano.plutus import datum_hash as pycardano_datum_hash
from uplc.tools import flatten, parse

from chain.devnet.plutus_data import data_from_json, data_to_cbor
from chain.devnet.script_context import SlotConfig

SLOT_CONFIG = SlotConfig(zero_time_ms=1_700_000_000_000, zero_slot=0, slot_length_ms=1000)

ALWAYS_SUCCEEDS_UPLC = "(program 1.1.0 (lam ctx (con unit ())))"
ALWAYS_FAILS_UPLC = "(program 1.1.0 (lam ctx (error)))"
# Returns the context itself: evaluation succeeds but the result is not unit.
RETURNS_NON_UNIT_UPLC = "(program 1.1.0 (lam ctx ctx))"
# Burns a little budget: a chain of additions, used to check budget exhaustion.
BUSY_UPLC = (
    "(program 1.1.0 (lam ctx [(lam x (con unit ()))"
    " [(builtin addInteger) [(builtin addInteger) (con integer 1) (con integer 2)]"
    " (con integer 3)]]))"
)

OPSHIN_VALIDATOR = textwrap.dedent(
    """
    from opshin.prelude import *


    @dataclass()
    class Lock(PlutusData):
        CONSTR_ID = 0
        owner: bytes
        secret: int


    def validator(context: ScriptContext) -> None:
        purpose = context.purpose
        if isinstance(purpose, Spending):
            datum: Lock = own_datum_unsafe(context)
            secret: int = context.redeemer
            assert secret == datum.secret, "wrong secret"
            assert datum.owner in context.transaction.signatories, "owner did not sign"
        elif isinstance(purpose, Minting):
            minted: int = context.redeemer
            tokens = context.transaction.mint[purpose.policy_id]
            assert tokens[b"NTX"] == minted, "minted amount differs from the redeemer"
        else:
            # withdraw-zero style: the stake script only checks it was asked to run
            flag: int = context.redeemer
            assert flag == 0, "unexpected redeemer"
    """
)


def uplc_script(source: str) -> PlutusV3Script:
    return PlutusV3Script(flatten(parse(source)))


@functools.lru_cache(maxsize=2)
def opshin_script(workdir: str) -> PlutusV3Script:
    """Compile OPSHIN_VALIDATOR once per test session (a few seconds)."""
    from opshin.builder import build

    path = Path(workdir) / "devnet_phase2_validator.py"
    path.write_text(OPSHIN_VALIDATOR)
    return build(str(path))


def signing_key(seed: int) -> PaymentSigningKey:
    return PaymentSigningKey(hashlib.blake2b(seed.to_bytes(4, "big"), digest_size=32).digest())


def key_hash(sk: PaymentSigningKey) -> VerificationKeyHash:
    return PaymentVerificationKey.from_signing_key(sk).hash()


def lock_datum(owner: bytes, secret: int) -> RawPlutusData:
    data = data_from_json({"constructor": 0, "fields": [{"bytes": owner.hex()}, {"int": secret}]})
    return RawPlutusData.from_cbor(data_to_cbor(data))


def tx_input(n: int, index: int = 0) -> TransactionInput:
    return TransactionInput(
        TransactionId(hashlib.blake2b(bytes([n]), digest_size=32).digest()), index
    )


@dataclass
class PlutusTx:
    """A signed transaction and the outputs its inputs resolve to."""

    tx: Transaction
    resolved: dict[TransactionInput, TransactionOutput]

    @property
    def cbor(self) -> bytes:
        return bytes(self.tx.to_cbor())

    def resolved_cbor_pairs(self) -> list[tuple[bytes, bytes]]:
        return [(bytes(i.to_cbor()), bytes(o.to_cbor())) for i, o in self.resolved.items()]


@dataclass
class TxSpec:
    """What to put in a test transaction; `build()` assembles and signs it."""

    fee: int = 400_000
    script_inputs: list[tuple[TransactionInput, TransactionOutput]] = field(default_factory=list)
    wallet_inputs: list[tuple[TransactionInput, TransactionOutput]] = field(default_factory=list)
    reference_inputs: list[tuple[TransactionInput, TransactionOutput]] = field(default_factory=list)
    outputs: list[TransactionOutput] = field(default_factory=list)
    mint: MultiAsset | None = None
    withdrawals: dict[bytes, int] | None = None
    scripts: list[PlutusV2Script | PlutusV3Script] = field(default_factory=list)
    # (tag, target, data, (mem, steps)); target is the redeemer index, or for spends the
    # TransactionInput and for mints the policy ScriptHash (the index is then computed).
    redeemers: list[tuple[RedeemerTag, Any, Any, tuple[int, int]]] = field(default_factory=list)
    datums: list[RawPlutusData] = field(default_factory=list)
    signers: list[PaymentSigningKey] = field(default_factory=list)
    ttl: int | None = None
    validity_start: int | None = None

    def build(self) -> PlutusTx:
        inputs = [i for i, _ in self.script_inputs + self.wallet_inputs]
        body = TransactionBody(
            inputs=inputs,
            outputs=self.outputs,
            fee=self.fee,
            ttl=self.ttl,
            validity_start=self.validity_start,
            mint=self.mint,
            withdraws=Withdrawals(self.withdrawals) if self.withdrawals else None,
            collateral=[i for i, _ in self.wallet_inputs][:1] or None,
            required_signers=[key_hash(sk) for sk in self.signers] or None,
            reference_inputs=[i for i, _ in self.reference_inputs] or None,
        )
        redeemers = []
        for tag, target, data, (mem, steps) in self.redeemers:
            r = Redeemer(data, ExecutionUnits(mem, steps))
            r.tag = tag
            r.index = self._index(target, inputs)
            redeemers.append(r)
        witness = TransactionWitnessSet(
            plutus_v2_script=[s for s in self.scripts if isinstance(s, PlutusV2Script)] or None,
            plutus_v3_script=[s for s in self.scripts if isinstance(s, PlutusV3Script)] or None,
            redeemer=redeemers or None,
            plutus_data=self.datums or None,
        )
        tx_id = body.hash()
        witness.vkey_witnesses = [
            VerificationKeyWitness(PaymentVerificationKey.from_signing_key(sk), sk.sign(tx_id))
            for sk in self.signers
        ] or None
        resolved = dict(self.script_inputs + self.wallet_inputs + self.reference_inputs)
        return PlutusTx(Transaction(body, witness), resolved)

    def _index(self, target: Any, inputs: list[TransactionInput]) -> int:
        if isinstance(target, int):
            return target
        if isinstance(target, TransactionInput):
            keys = sorted((bytes(i.transaction_id.payload), i.index) for i in inputs)
            return keys.index((bytes(target.transaction_id.payload), target.index))
        if isinstance(target, ScriptHash):
            assert self.mint is not None
            return sorted(p.payload for p in self.mint).index(target.payload)
        raise TypeError(f"unknown redeemer target {target!r}")


def script_address(script: PlutusV2Script | PlutusV3Script) -> Address:
    return Address(plutus_script_hash(script), network=Network.TESTNET)


def wallet_address(sk: PaymentSigningKey) -> Address:
    return Address(key_hash(sk), network=Network.TESTNET)


def reward_account(script: PlutusV3Script) -> bytes:
    # Testnet script reward account: header 0xf0, then the script hash.
    return bytes([0xF0]) + plutus_script_hash(script).payload


def ntx_mint(policy: ScriptHash, amount: int) -> MultiAsset:
    return MultiAsset({policy: Asset({AssetName(b"NTX"): amount})})


def value_with(coin: int, assets: MultiAsset | None = None) -> Value:
    return Value(coin, assets or MultiAsset())


def pycardano_datum_hash_hex(datum: RawPlutusData) -> str:
    return pycardano_datum_hash(datum).payload.hex()
