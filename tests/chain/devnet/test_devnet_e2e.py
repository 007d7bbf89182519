"""End to end through pycardano's `BlockFrostChainContext` against a running devnet.

Everything here goes over HTTP exactly as it would against hosted Blockfrost: UTxO queries,
protocol parameters, `/utils/txs/evaluate` for execution units, `/tx/submit`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pycardano import (
    Address,
    ExecutionUnits,
    Network,
    PaymentSigningKey,
    PlutusV3Script,
    RawPlutusData,
    Redeemer,
    TransactionBuilder,
    TransactionFailedException,
    TransactionOutput,
    plutus_script_hash,
)
from pycardano.cbor import cbor2
from uplc.tools import flatten, parse

from chain.devnet.testing import RunningDevnet, running_devnet

ALWAYS_TRUE = PlutusV3Script(flatten(parse("(program 1.1.0 (lam ctx (con unit ())))")))

LOCK_VALIDATOR = textwrap.dedent(
    """
    from opshin.prelude import *


    @dataclass()
    class Lock(PlutusData):
        CONSTR_ID = 0
        owner: bytes
        secret: int


    def validator(context: ScriptContext) -> None:
        purpose = context.purpose
        assert isinstance(purpose, Spending), "only spending"
        datum: Lock = own_datum_unsafe(context)
        secret: int = context.redeemer
        assert secret == datum.secret, "wrong secret"
        assert datum.owner in context.transaction.signatories, "owner did not sign"
    """
)


class Wallet:
    def __init__(self, seed: int) -> None:
        self.key = PaymentSigningKey.from_primitive(bytes([seed]) * 32)
        self.pkh = self.key.to_verification_key().hash()
        self.address = Address(self.pkh, network=Network.TESTNET)


def lock_datum(owner: bytes, secret: int) -> RawPlutusData:
    return RawPlutusData(cbor2.CBORTag(121, [owner, secret]))


@pytest.fixture(scope="module")
def lock_script(tmp_path_factory: pytest.TempPathFactory) -> PlutusV3Script:
    from opshin.builder import build

    path = tmp_path_factory.mktemp("opshin") / "lock_validator.py"
    path.write_text(LOCK_VALIDATOR)
    return build(str(path))


@pytest.fixture
def funded(devnet: RunningDevnet) -> Iterator[tuple[RunningDevnet, Wallet]]:
    wallet = Wallet(11)
    devnet.wait_for_tx(devnet.fund(str(wallet.address), lovelace=200_000_000))
    yield devnet, wallet


def _pay(devnet: RunningDevnet, wallet: Wallet, to: Address, lovelace: int, **out: object) -> str:
    ctx = devnet.chain_context()
    builder = TransactionBuilder(ctx)
    builder.add_input_address(wallet.address)
    builder.add_output(TransactionOutput(to, lovelace, **out))  # type: ignore[arg-type]
    tx = builder.build_and_sign([wallet.key], change_address=wallet.address)
    return str(ctx.submit_tx(tx))


def test_payment_moves_utxos(funded: tuple[RunningDevnet, Wallet]) -> None:
    devnet, wallet = funded
    ctx = devnet.chain_context()
    (source,) = ctx.utxos(wallet.address)
    dest = Wallet(12).address
    tx_hash = _pay(devnet, wallet, dest, 5_000_000)
    tx = devnet.wait_for_tx(tx_hash)
    assert int(tx["fees"]) > 155_381

    (received,) = ctx.utxos(dest)
    assert received.output.amount.coin == 5_000_000
    assert str(received.input.transaction_id) == tx_hash
    change = ctx.utxos(wallet.address)
    assert source.input not in [u.input for u in change]
    assert sum(u.output.amount.coin for u in change) == 200_000_000 - 5_000_000 - int(tx["fees"])
    spent = httpx.get(f"{devnet.url}/txs/{source.input.transaction_id}/utxos").json()
    assert spent["outputs"][source.input.index]["consumed_by_tx"] == tx_hash


def _lock(
    devnet: RunningDevnet, wallet: Wallet, script: PlutusV3Script, datum: RawPlutusData
) -> Address:
    script_address = Address(plutus_script_hash(script), network=Network.TESTNET)
    devnet.wait_for_tx(_pay(devnet, wallet, script_address, 10_000_000, datum=datum))
    return script_address


def _spend(
    devnet: RunningDevnet,
    wallet: Wallet,
    script: PlutusV3Script,
    script_address: Address,
    redeemer: Redeemer,
    *,
    signers: list[PaymentSigningKey] | None = None,
) -> str:
    ctx = devnet.chain_context()
    (locked,) = ctx.utxos(script_address)
    builder = TransactionBuilder(ctx)
    builder.add_script_input(locked, script=script, redeemer=redeemer)
    builder.add_input_address(wallet.address)
    builder.add_output(TransactionOutput(wallet.address, 9_000_000))
    if signers:
        builder.required_signers = [k.to_verification_key().hash() for k in signers]
    tx = builder.build_and_sign([wallet.key, *(signers or [])], change_address=wallet.address)
    return str(ctx.submit_tx(tx))


def test_evaluated_units_make_a_plutus_spend_acceptable(
    funded: tuple[RunningDevnet, Wallet],
) -> None:
    devnet, wallet = funded
    script_address = _lock(devnet, wallet, ALWAYS_TRUE, lock_datum(b"x", 1))
    tx_hash = _spend(devnet, wallet, ALWAYS_TRUE, script_address, Redeemer(0))
    tx = devnet.wait_for_tx(tx_hash)
    assert tx["valid_contract"] is True and tx["redeemer_count"] == 1
    (redeemer,) = httpx.get(f"{devnet.url}/txs/{tx_hash}/redeemers").json()
    assert redeemer["purpose"] == "spend"
    assert redeemer["script_hash"] == plutus_script_hash(ALWAYS_TRUE).payload.hex()
    assert int(redeemer["unit_mem"]) > 0 and int(redeemer["unit_steps"]) > 0
    assert devnet.chain_context().utxos(script_address) == []


def test_opshin_validator_checks_datum_and_signature(
    funded: tuple[RunningDevnet, Wallet], lock_script: PlutusV3Script
) -> None:
    devnet, wallet = funded
    owner = Wallet(13)
    devnet.wait_for_tx(devnet.fund(str(owner.address), lovelace=5_000_000))
    script_address = _lock(devnet, wallet, lock_script, lock_datum(owner.pkh.payload, 42))

    # Evaluation (through /utils/txs/evaluate) refuses a wrong secret and a missing signer,
    # with the validator's own trace message.
    with pytest.raises(TransactionFailedException) as wrong:
        _spend(devnet, wallet, lock_script, script_address, Redeemer(41), signers=[owner.key])
    assert "wrong secret" in str(wrong.value)
    with pytest.raises(TransactionFailedException) as unsigned:
        _spend(devnet, wallet, lock_script, script_address, Redeemer(42))
    assert "owner did not sign" in str(unsigned.value)

    # Declaring units by hand skips evaluation: the ledger's phase 2 must refuse at submit.
    forced = Redeemer(41, ExecutionUnits(2_000_000, 1_000_000_000))
    with pytest.raises(TransactionFailedException) as rejected:
        _spend(devnet, wallet, lock_script, script_address, forced, signers=[owner.key])
    assert "400" in str(rejected.value) and "wrong secret" in str(rejected.value)
    assert len(devnet.chain_context().utxos(script_address)) == 1

    tx_hash = _spend(devnet, wallet, lock_script, script_address, Redeemer(42), signers=[owner.key])
    assert devnet.wait_for_tx(tx_hash)["valid_contract"] is True
    assert devnet.chain_context().utxos(script_address) == []


def test_restart_keeps_chain_and_mempool(tmp_path: Path) -> None:
    wallet = Wallet(14)
    with running_devnet(tmp_path, block_time=0.1) as devnet:
        confirmed = devnet.fund(str(wallet.address), lovelace=7_000_000)
        devnet.wait_for_tx(confirmed)
        devnet.admin("pause")
        pending = devnet.fund(str(wallet.address), lovelace=3_000_000)
        tip = httpx.get(f"{devnet.url}/blocks/latest").json()
        utxos = httpx.get(f"{devnet.url}/addresses/{wallet.address}/utxos").json()
        assert [m["tx_hash"] for m in httpx.get(f"{devnet.url}/mempool").json()] == [pending]

    with running_devnet(tmp_path, block_time=0.1) as devnet:
        assert httpx.get(f"{devnet.url}/blocks/{tip['hash']}").json()["height"] == tip["height"]
        assert httpx.get(f"{devnet.url}/txs/{confirmed}").status_code == 200
        devnet.wait_for_tx(pending)  # the mempool came back and was sealed
        after = httpx.get(f"{devnet.url}/addresses/{wallet.address}/utxos").json()
        assert utxos[0] in after and len(after) == 2
