"""A small chain with one of everything the server renders, on top of `FakeLedger`.

Blocks: faucet funding (ADA + a minted token); a payment with an inline-datum output, a
datum-hash output, a reference-script output and CIP-20 metadata (submitted over HTTP by the
caller or directly); a Plutus V3 spend with a redeemer, a reference input and collateral.
One more payment is left in the mempool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cbor2
from fake_ledger import REDEEMER_SCRIPT_HASH, FakeLedger
from pycardano import (
    Address,
    AlonzoMetadata,
    AuxiliaryData,
    ExecutionUnits,
    Metadata,
    Network,
    PaymentSigningKey,
    PaymentVerificationKey,
    PlutusV3Script,
    Redeemer,
    RedeemerTag,
    StakeSigningKey,
    StakeVerificationKey,
    Transaction,
    TransactionBody,
    TransactionInput,
    TransactionOutput,
    TransactionWitnessSet,
    Value,
    plutus_script_hash,
)
from pycardano.hash import DatumHash
from pycardano.serialization import RawCBOR
from uplc.tools import flatten, parse

from chain.devnet.testing import RunningDevnet

TOKEN_NAME = "4e5458"
ALWAYS_TRUE_V3 = PlutusV3Script(flatten(parse("(program 1.1.0 (lam ctx (con unit ())))")))
INLINE_DATUM = cbor2.dumps(cbor2.CBORTag(121, [42, b"proofnet"]))
HASHED_DATUM = cbor2.dumps(cbor2.CBORTag(122, [7]))


@dataclass
class Scenario:
    ledger: FakeLedger
    addr_a: str
    addr_b: str
    script_addr: str
    stake_a: str
    fund_tx: str
    pay_tx: str
    pay_block: int
    spend_tx: str
    mempool_tx: str
    script_hash: str
    native_policy: str
    unit: str
    inline_datum_hash: str
    hashed_datum_hash: str
    # The script whose runs `/scripts/{hash}/redeemers` lists in this scenario.
    redeemer_script: str


def _key(seed: int) -> PaymentSigningKey:
    return PaymentSigningKey.from_primitive(bytes([seed]) * 32)


def build(ledger: FakeLedger, submit: Callable[[bytes], str] | None = None) -> Scenario:
    """Build the chain on a fresh `ledger`; `submit` (default: the ledger's) sends payments."""
    send = submit or ledger.submit
    sk_a = _key(1)
    vk_a = PaymentVerificationKey.from_signing_key(sk_a)
    stake_vk = StakeVerificationKey.from_signing_key(
        StakeSigningKey.from_primitive(bytes([2]) * 32)
    )
    addr_a = Address(vk_a.hash(), stake_vk.hash(), network=Network.TESTNET)
    addr_b = Address(
        PaymentVerificationKey.from_signing_key(_key(3)).hash(), network=Network.TESTNET
    )
    script_hash = plutus_script_hash(ALWAYS_TRUE_V3)
    script_addr = Address(script_hash, network=Network.TESTNET)
    stake_a = str(Address(staking_part=stake_vk.hash(), network=Network.TESTNET))

    fund_tx = ledger.fund(str(addr_a), 100_000_000, {TOKEN_NAME: 1000})
    ledger.produce_block()
    unit = ledger.faucet_policy_id() + TOKEN_NAME

    funded = TransactionInput.from_primitive([fund_tx, 0])
    token_value = TransactionOutput.from_cbor(ledger.tx_outputs(fund_tx)[0].output_cbor).amount
    hashed = DatumHash(bytes.fromhex(_blake(HASHED_DATUM)))
    pay_body = TransactionBody(
        inputs=[funded],
        outputs=[
            TransactionOutput(addr_b, 5_000_000),
            TransactionOutput(script_addr, 3_000_000, datum=RawCBOR(INLINE_DATUM)),
            TransactionOutput(script_addr, 2_000_000, datum_hash=hashed),
            TransactionOutput(addr_a, 10_000_000, script=ALWAYS_TRUE_V3),
            TransactionOutput(
                addr_a, Value(token_value.coin - 20_300_000, token_value.multi_asset)
            ),
        ],
        fee=300_000,
    )
    aux = AuxiliaryData(
        AlonzoMetadata(metadata=Metadata({674: {"msg": ["hello devnet"]}, 1234: b"\x01\x02"}))
    )
    pay_body.auxiliary_data_hash = aux.hash()
    pay = Transaction(
        pay_body,
        TransactionWitnessSet(
            vkey_witnesses=[],
            plutus_data=[RawCBOR(HASHED_DATUM)],
        ),
        auxiliary_data=aux,
    )
    pay_tx = send(pay.to_cbor())
    ledger.produce_block()

    redeemer = Redeemer(7, ExecutionUnits(5_000, 1_000_000))
    redeemer.tag = RedeemerTag.SPEND
    redeemer.index = 0
    spend = Transaction(
        TransactionBody(
            inputs=[TransactionInput.from_primitive([pay_tx, 1])],
            outputs=[TransactionOutput(addr_b, 2_800_000)],
            fee=200_000,
            collateral=[TransactionInput.from_primitive([pay_tx, 0])],
            reference_inputs=[TransactionInput.from_primitive([pay_tx, 3])],
        ),
        TransactionWitnessSet(plutus_v3_script=[ALWAYS_TRUE_V3], redeemer=[redeemer]),
    )
    spend_tx = ledger.submit(spend.to_cbor())
    ledger.produce_block()

    pending = Transaction(
        TransactionBody(
            inputs=[TransactionInput.from_primitive([pay_tx, 4])],
            outputs=[TransactionOutput(addr_b, Value(1_500_000))],
            fee=180_000,
        ),
        TransactionWitnessSet(),
    )
    mempool_tx = send(pending.to_cbor())
    ledger.rewards[stake_a] = 0
    return Scenario(
        ledger=ledger,
        addr_a=str(addr_a),
        addr_b=str(addr_b),
        script_addr=str(script_addr),
        stake_a=stake_a,
        fund_tx=fund_tx,
        pay_tx=pay_tx,
        pay_block=_height(ledger, pay_tx),
        spend_tx=spend_tx,
        mempool_tx=mempool_tx,
        script_hash=script_hash.payload.hex(),
        native_policy=ledger.faucet_policy_id(),
        unit=unit,
        inline_datum_hash=_blake(INLINE_DATUM),
        hashed_datum_hash=_blake(HASHED_DATUM),
        redeemer_script=REDEEMER_SCRIPT_HASH,
    )


def _height(ledger: Any, tx_hash: str) -> int:
    record = ledger.transaction(tx_hash)
    assert record is not None, f"{tx_hash} is not confirmed"
    return int(record.block_height)


def _blake(data: bytes) -> str:
    import hashlib

    return hashlib.blake2b(data, digest_size=32).hexdigest()


def build_real(devnet: RunningDevnet) -> Scenario:
    """The same kinds of records on a real `Ledger`, built with pycardano over HTTP."""
    from pycardano import (
        StakeCredential,
        StakeRegistration,
        TransactionBuilder,
    )

    ctx = devnet.chain_context()
    sk_a = _key(21)
    stake_sk = StakeSigningKey.from_primitive(bytes([22]) * 32)
    stake_vk = StakeVerificationKey.from_signing_key(stake_sk)
    addr_a = Address(sk_a.to_verification_key().hash(), stake_vk.hash(), network=Network.TESTNET)
    addr_b = Address(
        PaymentVerificationKey.from_signing_key(_key(23)).hash(), network=Network.TESTNET
    )
    script_hash = plutus_script_hash(ALWAYS_TRUE_V3)
    script_addr = Address(script_hash, network=Network.TESTNET)
    stake_a = str(Address(staking_part=stake_vk.hash(), network=Network.TESTNET))

    fund_tx = devnet.fund(str(addr_a), 300_000_000, {TOKEN_NAME: 1000})
    devnet.wait_for_tx(fund_tx)
    policy = devnet.admin_status()["faucet_policy_id"]

    builder = TransactionBuilder(ctx)
    builder.add_input_address(addr_a)
    builder.add_output(TransactionOutput(addr_b, 5_000_000))
    builder.add_output(TransactionOutput(script_addr, 3_000_000, datum=RawCBOR(INLINE_DATUM)))
    hashed = DatumHash(bytes.fromhex(_blake(HASHED_DATUM)))
    builder.add_output(TransactionOutput(script_addr, 2_000_000, datum_hash=hashed))
    builder.add_output(TransactionOutput(addr_a, 20_000_000, script=ALWAYS_TRUE_V3))
    builder.auxiliary_data = AuxiliaryData(
        AlonzoMetadata(metadata=Metadata({674: {"msg": ["hello devnet"]}, 1234: b"\x01\x02"}))
    )
    builder.certificates = [StakeRegistration(StakeCredential(stake_vk.hash()))]
    pay = builder.build_and_sign([sk_a, stake_sk], change_address=addr_a)
    pay_tx = str(ctx.submit_tx(pay))
    devnet.wait_for_tx(pay_tx)

    ctx = devnet.chain_context()
    locked = next(u for u in ctx.utxos(script_addr) if u.output.datum is not None)
    ref = next(u for u in ctx.utxos(addr_a) if u.output.script is not None)
    builder = TransactionBuilder(ctx)
    builder.add_script_input(locked, script=ref, redeemer=Redeemer(7))
    builder.add_input_address(addr_a)
    builder.add_output(TransactionOutput(addr_b, 2_800_000))
    spend = builder.build_and_sign([sk_a], change_address=addr_a)
    spend_tx = str(ctx.submit_tx(spend))
    devnet.wait_for_tx(spend_tx)

    devnet.admin("pause")
    ctx = devnet.chain_context()
    builder = TransactionBuilder(ctx)
    builder.add_input_address(addr_a)
    builder.add_output(TransactionOutput(addr_b, 1_500_000))
    mempool_tx = str(ctx.submit_tx(builder.build_and_sign([sk_a], change_address=addr_a)))
    return Scenario(
        ledger=devnet.ledger,  # type: ignore[arg-type]
        addr_a=str(addr_a),
        addr_b=str(addr_b),
        script_addr=str(script_addr),
        stake_a=stake_a,
        fund_tx=fund_tx,
        pay_tx=pay_tx,
        pay_block=_height(devnet.ledger, pay_tx),
        spend_tx=spend_tx,
        mempool_tx=mempool_tx,
        script_hash=script_hash.payload.hex(),
        native_policy=policy,
        unit=policy + TOKEN_NAME,
        inline_datum_hash=_blake(INLINE_DATUM),
        # The ledger learns datums from witness sets and inline outputs; this scenario's
        # hashed datum never appeared in a witness set, so look the inline one up instead.
        hashed_datum_hash=_blake(INLINE_DATUM),
        redeemer_script=script_hash.payload.hex(),
    )
