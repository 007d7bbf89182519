"""Builders for ledger tests: a devnet `Ledger` in a tmp dir, funded wallets, and real
transactions assembled with pycardano that tests then break one rule at a time.

The fee arithmetic here is written out independently of `chain.devnet.fees`, so a test
that balances a transaction to the exact minimum fee also checks the ledger's formula.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeAlias

import cbor2
from pycardano import (
    Address,
    AlonzoMetadata,
    AuxiliaryData,
    AuxiliaryDataHash,
    CostModels,
    ExecutionUnits,
    Metadata,
    MultiAsset,
    NativeScript,
    Network,
    PaymentSigningKey,
    PlutusV3Script,
    Redeemer,
    RedeemerTag,
    StakeSigningKey,
    Transaction,
    TransactionBody,
    TransactionInput,
    TransactionOutput,
    TransactionWitnessSet,
    UTxO,
    Value,
    VerificationKeyWitness,
    Withdrawals,
    plutus_script_hash,
    script_data_hash,
)
from uplc.tools import flatten, parse

from chain.devnet.ledger import Ledger
from chain.devnet.params import ProtocolParams
from chain.devnet.records import OutputRecord

NET = Network.TESTNET
ALWAYS_TRUE = PlutusV3Script(flatten(parse("(program 1.1.0 (lam ctx (con unit ())))")))
ALWAYS_FALSE = PlutusV3Script(
    flatten(
        parse(
            "(program 1.1.0 (lam ctx [(lam x (error)) "
            '[(force (builtin trace)) (con string "always false") (con unit ())]]))'
        )
    )
)
ALWAYS_TRUE_ADDRESS = Address(plutus_script_hash(ALWAYS_TRUE), network=NET)
ALWAYS_FALSE_ADDRESS = Address(plutus_script_hash(ALWAYS_FALSE), network=NET)
GENEROUS_UNITS = ExecutionUnits(200_000, 100_000_000)
SigningKey: TypeAlias = PaymentSigningKey | StakeSigningKey


@dataclass
class Wallet:
    skey: PaymentSigningKey = field(default_factory=PaymentSigningKey.generate)
    stake_skey: StakeSigningKey = field(default_factory=StakeSigningKey.generate)

    @property
    def key_hash(self) -> bytes:
        return bytes(self.skey.to_verification_key().hash().payload)

    @property
    def address(self) -> Address:
        return Address(self.skey.to_verification_key().hash(), network=NET)

    @property
    def stake_hash(self) -> bytes:
        return bytes(self.stake_skey.to_verification_key().hash().payload)

    @property
    def stake_address(self) -> Address:
        return Address(staking_part=self.stake_skey.to_verification_key().hash(), network=NET)


def expected_min_fee(
    params: ProtocolParams, size: int, units: Sequence[tuple[int, int]], ref_size: int
) -> int:
    """The Conway minimum fee, spelled out from the ledger specification."""
    mem = sum(u[0] for u in units)
    steps = sum(u[1] for u in units)
    script = math.ceil(params.price_mem * mem + params.price_step * steps)
    tier_price = Fraction(params.min_fee_ref_script_cost_per_byte)
    ref_fee = Fraction(0)
    remaining = ref_size
    while remaining > 0:
        chunk = min(remaining, params.ref_script_fee_range)
        ref_fee += chunk * tier_price
        tier_price *= params.ref_script_fee_multiplier
        remaining -= chunk
    return params.min_fee_a * size + params.min_fee_b + script + math.floor(ref_fee)


def to_utxo(record: OutputRecord) -> UTxO:
    return UTxO(
        TransactionInput.from_primitive([bytes.fromhex(record.tx_hash), record.index]),
        TransactionOutput.from_cbor(record.output_cbor),
    )


def cost_models_v3(params: ProtocolParams) -> CostModels:
    return CostModels({2: dict(enumerate(params.cost_models["PlutusV3"]))})


class Harness:
    """A ledger in a tmp dir plus helpers to fund wallets and build transactions."""

    def __init__(self, tmp_path: Path, **param_overrides: Any) -> None:
        self.data_dir = tmp_path / "devnet"
        params = ProtocolParams(**param_overrides) if param_overrides else None
        self.ledger = Ledger.open(self.data_dir, params=params)
        self.params = self.ledger.protocol_params()

    def close(self) -> None:
        self.ledger.close()

    def reopen(self) -> None:
        self.ledger.close()
        self.ledger = Ledger.open(self.data_dir)

    def block(self) -> None:
        assert self.ledger.produce_block() is not None

    def wallet(self, lovelace: int = 50_000_000, assets: dict[str, int] | None = None) -> Wallet:
        w = Wallet()
        self.ledger.fund(str(w.address), lovelace, assets)
        self.block()
        return w

    def utxos(self, address: Address | str) -> list[UTxO]:
        return [to_utxo(r) for r in self.ledger.utxos_at(str(address))]

    def output_of(self, tx_hash: str, index: int) -> UTxO:
        records = [r for r in self.ledger.tx_outputs(tx_hash) if r.index == index]
        assert records, f"{tx_hash}#{index} not confirmed"
        return to_utxo(records[0])

    def pay(self, wallet: Wallet, output: TransactionOutput, **kw: Any) -> str:
        """Send `output` from the wallet (change back), confirm it, return the tx hash."""
        tx = self.build(inputs=self.utxos(wallet.address), outputs=[output], change=wallet.address,
                        signers=[wallet.skey], **kw)  # fmt: skip
        tx_hash = self.ledger.submit(tx)
        self.block()
        return tx_hash

    def lock_at_script(
        self, wallet: Wallet, address: Address, lovelace: int = 5_000_000, **out_kw: Any
    ) -> UTxO:
        tx_hash = self.pay(wallet, TransactionOutput(address, lovelace, **out_kw))
        return self.output_of(tx_hash, 0)

    def current_slot(self) -> int:
        return self.ledger.current_slot()

    def build(
        self,
        *,
        inputs: Sequence[UTxO],
        outputs: Sequence[TransactionOutput],
        change: Address | None,
        signers: Sequence[SigningKey],
        mint: MultiAsset | None = None,
        native_scripts: Sequence[NativeScript] | None = None,
        plutus_scripts: Sequence[PlutusV3Script] | None = None,
        redeemers: Sequence[Redeemer] | None = None,
        datums: Sequence[Any] | None = None,
        collateral: Sequence[UTxO] | None = None,
        collateral_return: TransactionOutput | None = None,
        total_collateral: int | None = None,
        reference_inputs: Sequence[UTxO] | None = None,
        certificates: Sequence[Any] | None = None,
        withdrawals: dict[bytes, int] | None = None,
        required_signers: Sequence[bytes] | None = None,
        ttl: int | None = None,
        validity_start: int | None = None,
        network_id: int | None = None,
        metadata: dict[int, Any] | None = None,
        deposits: int = 0,
        refunds: int = 0,
        fee_delta: int = 0,
        fee: int | None = None,
        is_valid: bool = True,
        tweak_body: Callable[[TransactionBody], None] | None = None,
        tweak_witness: Callable[[TransactionWitnessSet], None] | None = None,
        aux_data: AuxiliaryData | None = None,
        aux_raw: bytes | None = None,
    ) -> bytes:
        """A signed transaction balanced to the exact minimum fee (plus `fee_delta`), its
        change going to `change`. `tweak_body` runs after balancing and before signing."""
        in_coin = sum(u.output.amount.coin for u in inputs)
        in_assets = MultiAsset()
        for u in inputs:
            in_assets += u.output.amount.multi_asset
        out_coin = sum(o.amount.coin for o in outputs)
        out_assets = MultiAsset()
        for o in outputs:
            out_assets += o.amount.multi_asset
        change_assets = in_assets + (mint or MultiAsset()) - out_assets
        change_assets = change_assets.filter(lambda p, n, q: q != 0)
        consumed = in_coin + sum((withdrawals or {}).values()) + refunds
        produced = out_coin + deposits
        ref_size = sum(
            _script_size(u.output.script)
            for u in [*inputs, *(reference_inputs or [])]
            if u.output.script is not None
        )
        units = [(r.ex_units.mem, r.ex_units.steps) for r in redeemers or []]
        if aux_data is None and metadata is not None:
            aux_data = AuxiliaryData(AlonzoMetadata(metadata=Metadata(metadata)))

        def make(fee_value: int) -> Transaction:
            outs = list(outputs)
            if change is not None:
                left = consumed - produced - fee_value
                outs.append(
                    TransactionOutput(change, Value(left, change_assets) if change_assets else left)
                )
            body = TransactionBody(
                inputs=[u.input for u in inputs],
                outputs=outs,
                fee=fee_value,
                ttl=ttl,
                validity_start=validity_start,
                mint=mint,
                collateral=[u.input for u in collateral] if collateral else None,
                collateral_return=collateral_return,
                total_collateral=total_collateral,
                reference_inputs=[u.input for u in reference_inputs] if reference_inputs else None,
                certificates=list(certificates) if certificates else None,
                withdraws=Withdrawals(dict(withdrawals)) if withdrawals else None,
                required_signers=list(required_signers) if required_signers else None,
                network_id=network_id,
                auxiliary_data_hash=aux_data.hash() if aux_data is not None else None,
            )
            if aux_raw is not None:
                body.auxiliary_data_hash = AuxiliaryDataHash(
                    hashlib.blake2b(aux_raw, digest_size=32).digest()
                )
            if redeemers or datums:
                body.script_data_hash = script_data_hash(
                    list(redeemers) if redeemers else None,
                    list(datums) if datums else None,
                    cost_models_v3(self.params) if redeemers else None,
                )
            if tweak_body is not None:
                tweak_body(body)
            digest = body.hash()
            witness = TransactionWitnessSet(
                vkey_witnesses=[
                    VerificationKeyWitness(k.to_verification_key(), k.sign(digest)) for k in signers
                ]
                or None,
                native_scripts=list(native_scripts) if native_scripts else None,
                plutus_v3_script=list(plutus_scripts) if plutus_scripts else None,
                redeemer=list(redeemers) if redeemers else None,
                plutus_data=list(datums) if datums else None,
            )
            if tweak_witness is not None:
                tweak_witness(witness)
            return Transaction(body, witness, valid=is_valid, auxiliary_data=aux_data)

        def encode(tx: Transaction) -> bytes:
            raw = bytes(tx.to_cbor())
            if aux_raw is None:
                return raw
            # Metadata pycardano refuses to build (to test the ledger's own check) is spliced
            # in place of the absent auxiliary data, the last item of the transaction.
            assert raw.endswith(b"\xf6")
            return raw[:-1] + aux_raw

        if fee is not None:
            return encode(make(fee))
        fee_value = expected_min_fee(self.params, len(encode(make(0xFFFF_FFFF))), units, ref_size)
        for _ in range(3):
            size = len(encode(make(fee_value + fee_delta)))
            needed = expected_min_fee(self.params, size, units, ref_size)
            if needed == fee_value:
                break
            fee_value = needed
        return encode(make(fee_value + fee_delta))


def _script_size(script: Any) -> int:
    """Bytes the ledger counts for a reference script (a Plutus script's own bytes, a native
    script's CBOR)."""
    if isinstance(script, NativeScript):
        return len(script.to_cbor())
    return len(bytes(script))


def redeemer(
    tag: RedeemerTag, index: int, data: Any = 0, units: ExecutionUnits | None = None
) -> Redeemer:
    r = Redeemer(data, units or GENEROUS_UNITS)
    r.tag = tag
    r.index = index
    return r


def tx_hash_of(tx_cbor: bytes) -> str:
    return Transaction.from_cbor(tx_cbor).id.payload.hex()


def decoded(tx_cbor: bytes) -> Any:
    return cbor2.loads(tx_cbor)
