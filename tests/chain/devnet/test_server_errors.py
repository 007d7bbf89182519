"""Bad input gets a 4xx with Blockfrost's error body and never changes the ledger's state."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blockfrost_contract as contract
import cbor2
import pytest
from fastapi.testclient import TestClient
from pycardano import (
    Address,
    Network,
    PaymentSigningKey,
    Transaction,
    TransactionBody,
    TransactionInput,
    TransactionOutput,
    TransactionWitnessSet,
    VerificationKeyWitness,
)

from chain.devnet.ledger import Ledger
from chain.devnet.server import create_app

CBOR = {"Content-Type": "application/cbor"}
TOKEN = "s3cret"


@dataclass
class Env:
    ledger: Ledger
    client: TestClient
    key: PaymentSigningKey
    address: Address


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    ledger = Ledger.open(Path(tmp_path_factory.mktemp("devnet")), enable_faults=True)
    key = PaymentSigningKey.from_primitive(bytes([9]) * 32)
    address = Address(key.to_verification_key().hash(), network=Network.TESTNET)
    ledger.fund(str(address), 50_000_000)
    ledger.produce_block()
    app = create_app(ledger, enable_faults=True, admin_token=TOKEN, max_body_bytes=32768)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Env(ledger, client, key, address)
    ledger.close()


def snapshot(env: Env) -> dict[str, Any]:
    ledger = env.ledger
    return {
        "tip": ledger.tip(),
        "mempool": ledger.mempool(),
        "utxos": [(u.tx_hash, u.index, u.spent_by) for u in ledger.utxos_at(str(env.address))],
        "faucet": len(ledger.utxos_at(ledger.faucet_address())),
        "paused": ledger.paused(),
    }


def assert_blockfrost_error(
    response: Any, status: int, template: str | None = None, method: str = "get"
) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"status_code", "error", "message"}
    assert body["status_code"] == status and body["message"]
    contract.validate(template or "/", status, body, method)
    return dict(body)


def signed_payment(env: Env, to: Address, lovelace: int = 5_000_000) -> bytes:
    (utxo,) = env.ledger.utxos_at(str(env.address))
    fee = 300_000
    body = TransactionBody(
        inputs=[TransactionInput.from_primitive([utxo.tx_hash, utxo.index])],
        outputs=[
            TransactionOutput(to, lovelace),
            TransactionOutput(env.address, 50_000_000 - lovelace - fee),
        ],
        fee=fee,
    )
    witness = VerificationKeyWitness(env.key.to_verification_key(), env.key.sign(body.hash()))
    return bytes(Transaction(body, TransactionWitnessSet(vkey_witnesses=[witness])).to_cbor())


GARBAGE_TXS = [
    pytest.param(b"\xff\x00\x13garbage", id="not-cbor"),
    pytest.param(b"\x84", id="truncated"),
    pytest.param(cbor2.dumps([1, 2, 3, 4]), id="cbor-not-a-tx"),
    pytest.param(cbor2.dumps([{0: "x"}, {}, True, None]), id="body-with-wrong-types"),
    pytest.param(cbor2.dumps([{}, {}, True, None]), id="empty-body"),
    pytest.param(b"zz-not-hex", id="text-not-hex"),
]


@pytest.mark.parametrize("payload", GARBAGE_TXS)
def test_malformed_submissions_are_400_and_change_nothing(env: Env, payload: bytes) -> None:
    before = snapshot(env)
    r = env.client.post("/api/v0/tx/submit", content=payload, headers=CBOR)
    assert_blockfrost_error(r, 400, "/tx/submit", "post")
    r = env.client.post("/api/v0/utils/txs/evaluate", content=payload, headers=CBOR)
    assert_blockfrost_error(r, 400, "/utils/txs/evaluate", "post")
    assert snapshot(env) == before


def test_empty_body_is_400(env: Env) -> None:
    r = env.client.post("/api/v0/tx/submit", content=b"", headers=CBOR)
    assert_blockfrost_error(r, 400, "/tx/submit", "post")


def test_wrong_network_payment_is_rejected_with_rule(env: Env) -> None:
    before = snapshot(env)
    mainnet = Address(
        PaymentSigningKey.from_primitive(bytes([7]) * 32).to_verification_key().hash(),
        network=Network.MAINNET,
    )
    r = env.client.post("/api/v0/tx/submit", content=signed_payment(env, mainnet), headers=CBOR)
    body = assert_blockfrost_error(r, 400, "/tx/submit", "post")
    assert "WrongNetwork" in body["message"]
    assert snapshot(env) == before


def test_unsigned_payment_is_rejected_with_rule(env: Env) -> None:
    before = snapshot(env)
    tx = Transaction.from_cbor(signed_payment(env, env.address))
    tx.transaction_witness_set = TransactionWitnessSet()
    r = env.client.post("/api/v0/tx/submit", content=tx.to_cbor(), headers=CBOR)
    body = assert_blockfrost_error(r, 400, "/tx/submit", "post")
    assert "MissingVKeyWitnesses" in body["message"]
    assert snapshot(env) == before


def test_wrong_network_address_queries_are_400(env: Env) -> None:
    mainnet = Address(
        PaymentSigningKey.from_primitive(bytes([7]) * 32).to_verification_key().hash(),
        network=Network.MAINNET,
    )
    for path in ("/addresses/{a}", "/addresses/{a}/utxos", "/addresses/{a}/transactions"):
        r = env.client.get("/api/v0" + path.format(a=mainnet))
        assert_blockfrost_error(r, 400, path.replace("{a}", "{address}"))


@pytest.mark.parametrize(
    "path",
    [
        "/api/v0/nope",
        "/api/v0/txs",
        "/api/v1/blocks/latest",
        "/",
        "/api/v0/blocks/latest/next/extra",
    ],
)
def test_unknown_paths_are_blockfrost_404(env: Env, path: str) -> None:
    assert_blockfrost_error(env.client.get(path), 404)


def test_wrong_method_is_blockfrost_405(env: Env) -> None:
    r = env.client.delete("/api/v0/blocks/latest")
    assert_blockfrost_error(r, 405)
    r = env.client.get("/api/v0/tx/submit")
    assert_blockfrost_error(r, 405)


def test_oversized_bodies_are_413_and_change_nothing(env: Env) -> None:
    before = snapshot(env)
    big = b"\x84" + b"\x00" * 40_000
    assert_blockfrost_error(env.client.post("/api/v0/tx/submit", content=big, headers=CBOR), 413)

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit must still hold
        for _ in range(40):
            yield b"\x00" * 1024

    r = env.client.post("/api/v0/utils/txs/evaluate", content=chunks(), headers=CBOR)
    assert_blockfrost_error(r, 413)
    r = env.client.post(
        "/api/v0/admin/fund",
        content=b"{" + b" " * 40_000 + b"}",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert_blockfrost_error(r, 413)
    assert snapshot(env) == before


@pytest.mark.parametrize(
    "query",
    ["count=0", "count=101", "count=abc", "page=0", "page=-1", "page=1.5", "order=up", "count="],
)
def test_bad_pagination_is_400(env: Env, query: str) -> None:
    for template, path in (
        ("/blocks/latest/txs", "/blocks/latest/txs"),
        ("/mempool", "/mempool"),
        ("/addresses/{address}/utxos", f"/addresses/{env.address}/utxos"),
    ):
        assert_blockfrost_error(env.client.get(f"/api/v0{path}?{query}"), 400, template)


def test_evaluate_utxos_rejects_bad_json(env: Env) -> None:
    before = snapshot(env)
    url = "/api/v0/utils/txs/evaluate/utxos"
    tx_hex = signed_payment(env, env.address).hex()
    cases: list[Any] = [
        b"not json",
        b"[1, 2]",
        b'{"cbor": 5}',
        b'{"cbor": "zz"}',
        f'{{"cbor": "{tx_hex}", "additionalUtxoSet": [[{{"txId": "ab", "index": 0}}, {{}}]]}}'.encode(),
        f'{{"cbor": "{tx_hex}", "additionalUtxoSet": [[1]]}}'.encode(),
    ]
    for payload in cases:
        r = env.client.post(url, content=payload, headers={"Content-Type": "application/json"})
        assert_blockfrost_error(r, 400, "/utils/txs/evaluate/utxos", "post")
    assert snapshot(env) == before


def test_evaluate_of_unknown_inputs_is_an_ogmios_failure(env: Env) -> None:
    before = snapshot(env)
    tx = Transaction.from_cbor(signed_payment(env, env.address))
    tx.transaction_body.inputs = [TransactionInput.from_primitive(["ab" * 32, 0])]
    r = env.client.post("/api/v0/utils/txs/evaluate", content=tx.to_cbor().hex(), headers=CBOR)
    assert r.status_code == 200
    failure = r.json()["result"]["EvaluationFailure"]
    assert "CannotCreateEvaluationContext" in failure
    assert snapshot(env) == before


def test_admin_requires_token_and_valid_input(env: Env) -> None:
    before = snapshot(env)
    fund = {"address": str(env.address), "lovelace": 1_000_000}
    assert_blockfrost_error(env.client.post("/api/v0/admin/fund", json=fund), 403)
    wrong = {"Authorization": "Bearer nope"}
    assert_blockfrost_error(env.client.post("/api/v0/admin/fund", json=fund, headers=wrong), 403)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for bad in (
        {"address": "addr_test1xyz", "lovelace": 1},
        {"address": str(env.address), "lovelace": -1},
        {"address": str(env.address), "lovelace": "many"},
        {"address": str(env.address), "lovelace": 0},
        {"address": str(env.address), "lovelace": 1, "assets": {"zz": 1}},
        {"address": str(env.address), "lovelace": 1, "assets": {"4e5458": 0}},
    ):
        assert_blockfrost_error(env.client.post("/api/v0/admin/fund", json=bad, headers=auth), 400)
    for bad_rollback in (
        {"depth": 0},
        {"depth": "1"},
        {"depth": 10_000},
        {"depth": 1, "drop": "yes"},
        {},  # neither a depth nor a height
        {"depth": 1, "from_height": 1},  # both: which one was meant?
        {"from_height": 0},
        {"from_height": True},
        {"from_height": 10_000},  # above the tip
    ):
        r = env.client.post("/api/v0/admin/rollback", json=bad_rollback, headers=auth)
        assert_blockfrost_error(r, 400)
    assert_blockfrost_error(env.client.post("/api/v0/admin/pause", headers=wrong), 403)
    assert snapshot(env) == before


def test_faults_disabled_refuses_fault_endpoints(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "d") as ledger:
        app = create_app(ledger, enable_faults=False, admin_token=None)
        client = TestClient(app)
        for path in ("rollback", "pause", "resume", "drop-mempool", "produce-block"):
            r = client.post(f"/api/v0/admin/{path}", json={"depth": 1})
            assert_blockfrost_error(r, 403)
        assert not ledger.paused()
        # Funding is not a fault: it works without faults (and without a token when none is set).
        r = client.post(
            "/api/v0/admin/fund", json={"address": ledger.faucet_address(), "lovelace": 2_000_000}
        )
        assert r.status_code == 200, r.text
        assert r.json()["tx_hash"] in ledger.mempool()


def test_full_mempool_is_425(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "d") as ledger:
        key = PaymentSigningKey.from_primitive(bytes([9]) * 32)
        address = Address(key.to_verification_key().hash(), network=Network.TESTNET)
        ledger.fund(str(address), 50_000_000)
        ledger.produce_block()
        ledger.fund(str(address), 3_000_000)  # occupies the only mempool slot
        client = TestClient(
            create_app(ledger, enable_faults=False, admin_token=None, mempool_limit=1)
        )
        env = Env(ledger, client, key, address)
        (utxo,) = [u for u in ledger.utxos_at(str(address))]
        r = client.post("/api/v0/tx/submit", content=signed_payment(env, address), headers=CBOR)
        body = r.json()
        assert r.status_code == 425 and body["status_code"] == 425
        contract.validate("/tx/submit", 425, body, "post")
        assert len(ledger.mempool()) == 1 and utxo.spent_by is None


def test_hostile_json_is_a_blockfrost_400(env: Env) -> None:
    """The attacks: admin and evaluation bodies nested past the parser's recursion limit, or
    with integers past 64 bits. Each is a Blockfrost-shaped 400 and changes nothing."""
    before = snapshot(env)
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    deep = b'{"address":' + b"[" * 10_000 + b"]" * 10_000 + b"}"  # within the size limit
    huge = f'{{"address": "{env.address}", "lovelace": {2**70}}}'.encode()
    for body in (deep, huge):
        r = env.client.post("/api/v0/admin/fund", content=body, headers=auth)
        assert_blockfrost_error(r, 400)
    r = env.client.post("/api/v0/utils/txs/evaluate/utxos", content=deep, headers=auth)
    assert_blockfrost_error(r, 400)
    assert snapshot(env) == before
