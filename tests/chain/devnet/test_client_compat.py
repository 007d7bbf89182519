"""What real Blockfrost clients (Blaze, Lucid Evolution, Mesh, browser dapps) rely on.

Each test is one difference from Blockfrost that made a client fail against the devnet:
CORS, doubled slashes, asset holders, UTxOs by payment credential, account shapes and
Ogmios v6 evaluation.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import blockfrost_contract as contract
import httpx
import pytest
import server_scenario
from pycardano import Address, Network, Transaction, VerificationKeyHash
from pycardano.crypto import bech32

from chain.devnet.testing import RunningDevnet, running_devnet


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningDevnet, object]]:
    with running_devnet(tmp_path_factory.mktemp("compat"), block_time=0.1) as devnet:
        sc = server_scenario.build_real(devnet)
        devnet.admin("resume")
        # The scenario's transactions wait in the mempool until the producer seals them: a
        # test comparing two reads of an address must not straddle one being sealed.
        deadline = time.monotonic() + 30
        while devnet.admin_status()["mempool_size"]:
            assert time.monotonic() < deadline, "the scenario's transactions were never sealed"
            time.sleep(0.05)
        yield devnet, sc


def test_browser_preflight_and_responses_carry_cors_headers(world: tuple) -> None:  # type: ignore[type-arg]
    devnet, _ = world
    origin = {"Origin": "http://localhost:5173"}
    pre = httpx.options(
        f"{devnet.url}/tx/submit",
        headers={
            **origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "project_id, content-type",
        },
    )
    assert pre.status_code == 200, pre.text
    assert pre.headers["access-control-allow-origin"] == "*"
    assert "POST" in pre.headers["access-control-allow-methods"]
    assert "project_id" in pre.headers["access-control-allow-headers"].lower()
    got = httpx.get(f"{devnet.url}/blocks/latest", headers=origin)
    assert got.status_code == 200 and got.headers["access-control-allow-origin"] == "*"
    # Errors too, or the page sees an opaque network failure instead of the message.
    missing = httpx.get(f"{devnet.url}/txs/{'00' * 32}", headers=origin)
    assert missing.status_code == 404 and missing.headers["access-control-allow-origin"] == "*"


def test_doubled_slashes_reach_the_same_route(world: tuple) -> None:  # type: ignore[type-arg]
    devnet, sc = world
    single = httpx.get(f"{devnet.url}/addresses/{sc.addr_a}/utxos")
    doubled = httpx.get(f"{devnet.url}//addresses//{sc.addr_a}/utxos")
    assert single.status_code == doubled.status_code == 200
    assert doubled.json() == single.json()


def test_asset_holders_sum_per_address(world: tuple) -> None:  # type: ignore[type-arg]
    devnet, sc = world
    r = httpx.get(f"{devnet.url}/assets/{sc.unit}/addresses")
    assert r.status_code == 200, r.text
    contract.validate("/assets/{asset}/addresses", 200, r.json())
    assert r.json() == [{"address": sc.addr_a, "quantity": "1000"}]
    unknown = httpx.get(f"{devnet.url}/assets/{sc.unit[:56]}{'ff' * 4}/addresses")
    assert unknown.status_code == 404


def test_utxos_by_payment_credential_span_every_stake_part(world: tuple) -> None:  # type: ignore[type-arg]
    devnet, sc = world
    base = Address.from_primitive(sc.addr_a)
    enterprise = Address(base.payment_part, network=Network.TESTNET)
    tx = devnet.fund(str(enterprise), 4_000_000)
    devnet.wait_for_tx(tx)
    vkh = bech32.encode("addr_vkh", bytes(base.payment_part))
    r = httpx.get(f"{devnet.url}/addresses/{vkh}/utxos")
    assert r.status_code == 200, r.text
    contract.validate("/addresses/{address}/utxos", 200, r.json())
    addresses = {u["address"] for u in r.json()}
    assert addresses == {sc.addr_a, str(enterprise)}
    # Another key's outputs never leak in, and a credential of the wrong length is refused.
    other = bech32.encode("addr_vkh", bytes(Address.from_primitive(sc.addr_b).payment_part))
    assert {u["address"] for u in httpx.get(f"{devnet.url}/addresses/{other}/utxos").json()} == {
        sc.addr_b
    }
    assert httpx.get(f"{devnet.url}/addresses/{bech32.encode('addr_vkh', b'x' * 27)}/utxos").status_code == 400  # fmt: skip
    script = bech32.encode("script", bytes.fromhex(sc.script_hash))
    assert all(
        u["address"] == sc.script_addr
        for u in httpx.get(f"{devnet.url}/addresses/{script}/utxos").json()
    )


def test_accounts_report_registration_and_controlled_stake(world: tuple) -> None:  # type: ignore[type-arg]
    devnet, sc = world
    r = httpx.get(f"{devnet.url}/accounts/{sc.stake_a}")
    assert r.status_code == 200
    body = r.json()
    contract.validate("/accounts/{stake_address}", 200, body)
    assert body["registered"] is True and body["active"] is False  # no pools on the devnet
    assert isinstance(body["active_epoch"], int)
    staked = sum(
        int(u["amount"][0]["quantity"])
        for u in httpx.get(f"{devnet.url}/addresses/{sc.addr_a}/utxos").json()
    )
    assert body["controlled_amount"] == str(staked) and staked > 0
    fresh_stake = Address(
        staking_part=VerificationKeyHash(bytes(range(28))), network=Network.TESTNET
    )
    assert httpx.get(f"{devnet.url}/accounts/{fresh_stake}").status_code == 404


def test_unregistered_stake_key_with_funds_is_reported_unregistered(tmp_path: Path) -> None:
    from pycardano import StakeSigningKey, StakeVerificationKey

    stake = StakeVerificationKey.from_signing_key(StakeSigningKey.from_primitive(b"\x07" * 32))
    with running_devnet(tmp_path, block_time=0.1) as devnet:
        payment = Address.from_primitive(devnet.ledger.faucet_address()).payment_part
        addr = Address(payment, stake.hash(), network=Network.TESTNET)
        devnet.wait_for_tx(devnet.fund(str(addr), 7_000_000))
        stake_addr = Address(staking_part=stake.hash(), network=Network.TESTNET)
        r = httpx.get(f"{devnet.url}/accounts/{stake_addr}")
    assert r.status_code == 200, r.text
    contract.validate("/accounts/{stake_address}", 200, r.json())
    body = r.json()
    assert (body["registered"], body["active"], body["active_epoch"]) == (False, False, None)
    assert body["controlled_amount"] == "7000000" and body["withdrawable_amount"] == "0"


def test_evaluate_answers_ogmios_v6_when_asked(world: tuple) -> None:  # type: ignore[type-arg]
    devnet, sc = world
    spend = Transaction.from_cbor(sc.ledger.transaction(sc.spend_tx).cbor)
    headers = {"Content-Type": "application/cbor"}
    body = spend.to_cbor().hex()
    v6 = httpx.post(f"{devnet.url}/utils/txs/evaluate?version=6", content=body, headers=headers)
    # The spent output is gone now: v6 reports the evaluation-context error in JSON-RPC.
    assert v6.status_code == 200, v6.text
    assert v6.json()["jsonrpc"] == "2.0" and v6.json()["error"]["code"] == 3004
    bad = httpx.post(f"{devnet.url}/utils/txs/evaluate?version=7", content=body, headers=headers)
    assert bad.status_code == 400 and "5 or 6" in bad.json()["message"]


def test_ogmios_v6_shapes_of_budgets_and_failures() -> None:
    from chain.devnet import blockfrost_shapes as shapes
    from chain.devnet.records import RedeemerEvaluation

    ok = shapes.evaluation_envelope_v6(
        [
            RedeemerEvaluation("spend", 0, 1700, 476468, True, None),
            RedeemerEvaluation("reward", 1, 5, 6, True, None),
        ]  # fmt: skip
    )
    assert ok["result"] == [
        {"validator": {"index": 0, "purpose": "spend"}, "budget": {"memory": 1700, "cpu": 476468}},
        {"validator": {"index": 1, "purpose": "withdraw"}, "budget": {"memory": 5, "cpu": 6}},
    ]
    failed = shapes.evaluation_envelope_v6(
        [RedeemerEvaluation("cert", 0, 0, 0, False, "boom", ("trace",))]
    )
    assert "result" not in failed and failed["error"]["code"] == 3010
    (entry,) = failed["error"]["data"]
    assert entry["validator"] == {"index": 0, "purpose": "publish"}
    assert entry["error"]["data"] == {"validationError": "boom", "traces": ["trace"]}
