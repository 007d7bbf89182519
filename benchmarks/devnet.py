"""`proofnet bench devnet`: how fast the devnet validates, and what its UTxO index costs.

Three numbers: simple payments validated per second (phase 1, signatures included, and
the mempool insert), Plutus V3 spends validated per second (phase 1 + phase 2 of an
always-succeeds script), and the memory the in-memory UTxO index takes per 100,000 UTxOs.
Transactions are built before the clock starts; only `Ledger.submit` is timed.
"""

from __future__ import annotations

import gc
import json
import os
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import cbor2
from pycardano import (
    Address,
    ExecutionUnits,
    Network,
    PaymentSigningKey,
    PlutusV3Script,
    Redeemer,
    RedeemerTag,
    Transaction,
    TransactionBody,
    TransactionInput,
    TransactionOutput,
    TransactionWitnessSet,
    VerificationKeyWitness,
    plutus_script_hash,
    script_data_hash,
)
from pycardano.plutus import CostModels

from chain.devnet.fees import min_fee
from chain.devnet.ledger import Ledger
from chain.devnet.txdecode import decode_output, input_key

# (program 1.1.0 (lam ctx (con unit ()))), CBOR-wrapped flat.
_ALWAYS_SUCCEEDS = bytes.fromhex("450101002499")
_UNITS = ExecutionUnits(50_000, 20_000_000)


def run_devnet_bench(*, payments: int, plutus: int, utxos: int, json_out: bool) -> dict[str, Any]:
    if payments < 1 or plutus < 0 or utxos < 1:
        raise ValueError("payments and utxos must be positive, plutus non-negative")
    with tempfile.TemporaryDirectory(prefix="proofnet-devnet-bench-") as tmp:
        ledger = Ledger.open(Path(tmp) / "devnet")
        try:
            payment_tps = _bench_payments(ledger, payments)
            plutus_tps = _bench_plutus(ledger, plutus) if plutus else None
        finally:
            ledger.close()
    bytes_per_100k = _utxo_index_bytes(utxos) * 100_000 // utxos
    result: dict[str, Any] = {
        "payments": payments,
        "payment_tx_per_s": round(payment_tps, 1),
        "plutus_spends": plutus,
        "plutus_tx_per_s": None if plutus_tps is None else round(plutus_tps, 1),
        "utxos_measured": utxos,
        "utxo_index_bytes_per_100k": bytes_per_100k,
        "cpu_count": os.cpu_count(),
    }
    _print(result, json_out)
    return result


def _settle(ledger: Ledger) -> None:
    while ledger.mempool():
        ledger.produce_block()


def _funded_inputs(ledger: Ledger, key: PaymentSigningKey, count: int, lovelace: int) -> list[Any]:
    address = Address(key.to_verification_key().hash(), network=Network.TESTNET)
    for _ in range(count):
        ledger.fund(str(address), lovelace)
    _settle(ledger)
    return ledger.utxos_at(str(address))


def _sign(body: TransactionBody, key: PaymentSigningKey, **witness: Any) -> bytes:
    vkw = VerificationKeyWitness(key.to_verification_key(), key.sign(body.hash()))
    return bytes(
        Transaction(body, TransactionWitnessSet(vkey_witnesses=[vkw], **witness)).to_cbor()
    )


def _balanced(ledger: Ledger, make: Any, units: list[tuple[int, int]]) -> bytes:
    params = ledger.protocol_params()
    fee = min_fee(params, len(make(0xFFFF_FFFF)), units, 0)
    return bytes(make(fee))


def _bench_payments(ledger: Ledger, count: int) -> float:
    key = PaymentSigningKey.generate()
    sources = _funded_inputs(ledger, key, count, 5_000_000)
    to = Address(PaymentSigningKey.generate().to_verification_key().hash(), network=Network.TESTNET)
    txs = []
    for record in sources:
        tx_in = TransactionInput.from_primitive([bytes.fromhex(record.tx_hash), record.index])
        coin = decode_output(record.output_cbor).coin

        def make(fee: int, tx_in: TransactionInput = tx_in, coin: int = coin) -> bytes:
            body = TransactionBody(
                inputs=[tx_in], outputs=[TransactionOutput(to, coin - fee)], fee=fee
            )
            return _sign(body, key)

        txs.append(_balanced(ledger, make, []))
    return _timed_submits(ledger, txs)


def _bench_plutus(ledger: Ledger, count: int) -> float:
    script = PlutusV3Script(_ALWAYS_SUCCEEDS)
    script_address = Address(plutus_script_hash(script), network=Network.TESTNET)
    for _ in range(count):
        ledger.fund(str(script_address), 3_000_000)
    _settle(ledger)
    locked = ledger.utxos_at(str(script_address))[:count]
    key = PaymentSigningKey.generate()
    fee_inputs = _funded_inputs(ledger, key, count, 10_000_000)
    owner = Address(key.to_verification_key().hash(), network=Network.TESTNET)
    params = ledger.protocol_params()
    cost_models = CostModels({2: dict(enumerate(params.cost_models["PlutusV3"]))})
    txs = []
    for lock, payer in zip(locked, fee_inputs, strict=True):
        lock_in = TransactionInput.from_primitive([bytes.fromhex(lock.tx_hash), lock.index])
        pay_in = TransactionInput.from_primitive([bytes.fromhex(payer.tx_hash), payer.index])
        total = decode_output(lock.output_cbor).coin + decode_output(payer.output_cbor).coin
        spend_index = sorted([input_key(bytes.fromhex(lock.tx_hash), lock.index),
                              input_key(bytes.fromhex(payer.tx_hash), payer.index)]).index(
            input_key(bytes.fromhex(lock.tx_hash), lock.index))  # fmt: skip
        redeemer = Redeemer(0, _UNITS)
        redeemer.tag = RedeemerTag.SPEND
        redeemer.index = spend_index

        def make(
            fee: int,
            lock_in: TransactionInput = lock_in,
            pay_in: TransactionInput = pay_in,
            total: int = total,
            redeemer: Redeemer = redeemer,
        ) -> bytes:
            body = TransactionBody(
                inputs=[lock_in, pay_in],
                outputs=[TransactionOutput(owner, total - fee)],
                fee=fee,
                collateral=[pay_in],
                script_data_hash=script_data_hash([redeemer], None, cost_models),
            )
            return _sign(body, key, plutus_v3_script=[script], redeemer=[redeemer])

        txs.append(_balanced(ledger, make, [(_UNITS.mem, _UNITS.steps)]))
    return _timed_submits(ledger, txs)


def _timed_submits(ledger: Ledger, txs: list[bytes]) -> float:
    gc.collect()
    start = time.perf_counter()
    for tx in txs:
        ledger.submit(tx)
    elapsed = time.perf_counter() - start
    _settle(ledger)
    return len(txs) / elapsed if elapsed > 0 else float("inf")


def _utxo_index_bytes(count: int) -> int:
    """Bytes held by an index shaped like `Ledger._utxo` (34-byte input key -> output CBOR)
    for `count` typical outputs: an enterprise address and lovelace, each its own object."""
    template = cbor2.dumps([b"\x60" + b"\x11" * 28, 12_345_678])
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index: dict[bytes, bytes] = {}
    for i in range(count):
        tx_id = i.to_bytes(32, "big")
        index[input_key(tx_id, i % 4)] = template[:-4] + i.to_bytes(4, "big")
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(index) == count
    return after - before


def _print(result: dict[str, Any], json_out: bool) -> None:
    if json_out:
        print(json.dumps(result))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="devnet ledger benchmark")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row(f"simple payments validated ({result['payments']})",
                  f"{result['payment_tx_per_s']} tx/s")  # fmt: skip
    if result["plutus_tx_per_s"] is not None:
        table.add_row(f"Plutus V3 spends validated ({result['plutus_spends']})",
                      f"{result['plutus_tx_per_s']} tx/s")  # fmt: skip
    table.add_row("UTxO index memory per 100k UTxOs",
                  f"{result['utxo_index_bytes_per_100k'] / 1e6:.1f} MB")  # fmt: skip
    Console().print(table)
