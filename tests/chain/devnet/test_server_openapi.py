"""Every Blockfrost endpoint the devnet serves answers in the published OpenAPI shapes.

Each response (successes, paginated lists, errors) is validated against the strict schema
from Blockfrost's openapi.yaml, and blockfrost-python must parse the same endpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import blockfrost_contract as contract
import httpx
import pytest
import server_scenario
from blockfrost import ApiError, BlockFrostApi
from fake_ledger import FakeLedger
from fastapi.routing import APIRoute

from chain.devnet.server import API_PREFIX, create_app
from chain.devnet.testing import running_devnet, serve_app


@dataclass
class Served:
    url: str
    client: httpx.Client
    api: BlockFrostApi
    sc: server_scenario.Scenario
    routes: list[tuple[str, set[str]]]


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    ledger = FakeLedger()
    app = create_app(ledger, enable_faults=True, admin_token=None)
    routes = [
        (r.path[len(API_PREFIX) :] or "/", set(r.methods or ()))
        for r in app.routes
        if isinstance(r, APIRoute) and r.path.startswith(API_PREFIX)
    ]
    with serve_app(app) as root, httpx.Client(timeout=30) as client:
        url = f"{root}{API_PREFIX}"

        def submit(tx: bytes) -> str:
            r = client.post(
                f"{url}/tx/submit", content=tx, headers={"Content-Type": "application/cbor"}
            )
            assert r.status_code == 200, r.text
            return str(r.json())

        sc = server_scenario.build(ledger, submit=submit)
        api = BlockFrostApi(project_id="devnet", base_url=f"{root}/api")
        yield Served(url, client, api, sc, routes)


S = server_scenario.Scenario
# (spec path template, concrete path, blockfrost-python call)
GETS: list[tuple[str, Callable[[S], str], Callable[[BlockFrostApi, S], Any]]] = [
    ("/", lambda s: "/", lambda a, s: a.root()),
    ("/health", lambda s: "/health", lambda a, s: a.health()),
    ("/health/clock", lambda s: "/health/clock", lambda a, s: a.clock()),
    ("/genesis", lambda s: "/genesis", lambda a, s: a.genesis()),
    ("/epochs/latest", lambda s: "/epochs/latest", lambda a, s: a.epoch_latest()),
    (
        "/epochs/latest/parameters",
        lambda s: "/epochs/latest/parameters",
        lambda a, s: a.epoch_latest_parameters(),
    ),
    (
        "/epochs/{number}/parameters",
        lambda s: "/epochs/0/parameters",
        lambda a, s: a.epoch_protocol_parameters(0),
    ),
    ("/blocks/latest", lambda s: "/blocks/latest", lambda a, s: a.block_latest()),
    (
        "/blocks/latest/txs",
        lambda s: "/blocks/latest/txs",
        lambda a, s: a.block_latest_transactions(),
    ),
    ("/blocks/{hash_or_number}", lambda s: "/blocks/1", lambda a, s: a.block("1")),
    (
        "/blocks/{hash_or_number}/txs",
        lambda s: f"/blocks/{s.pay_block}/txs",
        lambda a, s: a.block_transactions(str(s.pay_block)),
    ),
    ("/addresses/{address}", lambda s: f"/addresses/{s.addr_a}", lambda a, s: a.address(s.addr_a)),
    (
        "/addresses/{address}/utxos",
        lambda s: f"/addresses/{s.script_addr}/utxos",
        lambda a, s: a.address_utxos(s.script_addr),
    ),
    (
        "/addresses/{address}/utxos/{asset}",
        lambda s: f"/addresses/{s.addr_a}/utxos/{s.unit}",
        lambda a, s: a.address_utxos_asset(s.addr_a, s.unit),
    ),
    (
        "/addresses/{address}/transactions",
        lambda s: f"/addresses/{s.addr_a}/transactions",
        lambda a, s: a.address_transactions(s.addr_a),
    ),
    ("/addresses/{address}/txs", lambda s: f"/addresses/{s.addr_a}/txs", None),  # type: ignore[list-item]
    ("/txs/{hash}", lambda s: f"/txs/{s.pay_tx}", lambda a, s: a.transaction(s.pay_tx)),
    (
        "/txs/{hash}/utxos",
        lambda s: f"/txs/{s.spend_tx}/utxos",
        lambda a, s: a.transaction_utxos(s.spend_tx),
    ),
    (
        "/txs/{hash}/metadata",
        lambda s: f"/txs/{s.pay_tx}/metadata",
        lambda a, s: a.transaction_metadata(s.pay_tx),
    ),
    (
        "/txs/{hash}/metadata/cbor",
        lambda s: f"/txs/{s.pay_tx}/metadata/cbor",
        lambda a, s: a.transaction_metadata_cbor(s.pay_tx),
    ),
    (
        "/txs/{hash}/redeemers",
        lambda s: f"/txs/{s.spend_tx}/redeemers",
        lambda a, s: a.transaction_redeemers(s.spend_tx),
    ),
    (
        "/txs/{hash}/cbor",
        lambda s: f"/txs/{s.pay_tx}/cbor",
        lambda a, s: a.transaction_cbor(s.pay_tx),
    ),
    ("/metadata/txs/labels", lambda s: "/metadata/txs/labels", lambda a, s: a.metadata_labels()),
    (
        "/metadata/txs/labels/{label}",
        lambda s: "/metadata/txs/labels/674",
        lambda a, s: a.metadata_label_json("674"),
    ),
    (
        "/metadata/txs/labels/{label}/cbor",
        lambda s: "/metadata/txs/labels/1234/cbor",
        lambda a, s: a.metadata_label_cbor("1234"),
    ),
    ("/assets/{asset}", lambda s: f"/assets/{s.unit}", lambda a, s: a.asset(s.unit)),
    (
        "/assets/{asset}/addresses",
        lambda s: f"/assets/{s.unit}/addresses",
        lambda a, s: a.asset_addresses(s.unit),
    ),
    (
        "/scripts/{script_hash}",
        lambda s: f"/scripts/{s.script_hash}",
        lambda a, s: a.script(s.script_hash),
    ),
    (
        "/scripts/{script_hash}/json",
        lambda s: f"/scripts/{s.native_policy}/json",
        lambda a, s: a.script_json(s.native_policy),
    ),
    (
        "/scripts/{script_hash}/cbor",
        lambda s: f"/scripts/{s.script_hash}/cbor",
        lambda a, s: a.script_cbor(s.script_hash),
    ),
    (
        "/scripts/{script_hash}/redeemers",
        lambda s: f"/scripts/{s.redeemer_script}/redeemers",
        lambda a, s: a.script_redeemers(s.redeemer_script),
    ),
    (
        "/scripts/datum/{datum_hash}",
        lambda s: f"/scripts/datum/{s.inline_datum_hash}",
        lambda a, s: a.script_datum(s.inline_datum_hash),
    ),
    (
        "/scripts/datum/{datum_hash}/cbor",
        lambda s: f"/scripts/datum/{s.hashed_datum_hash}/cbor",
        lambda a, s: a.script_datum_cbor(s.hashed_datum_hash),
    ),
    (
        "/accounts/{stake_address}",
        lambda s: f"/accounts/{s.stake_a}",
        lambda a, s: a.accounts(s.stake_a),
    ),
    ("/mempool", lambda s: "/mempool", lambda a, s: a.mempool()),
    (
        "/mempool/{hash}",
        lambda s: f"/mempool/{s.mempool_tx}",
        lambda a, s: a.mempool_tx(s.mempool_tx),
    ),
]

# The server's route templates name some parameters differently from the spec.
_ALIASES = {"{addr}": "{address}", "{tx_hash}": "{hash}"}


def _spec_template(route_path: str) -> str:
    for ours, theirs in _ALIASES.items():
        route_path = route_path.replace(ours, theirs)
    return route_path


def _get(served: Served, path: str, **params: Any) -> httpx.Response:
    return served.client.get(f"{served.url}{path}", params=params)


@pytest.mark.parametrize(("template", "path", "call"), GETS, ids=[g[0] for g in GETS])
def test_get_matches_spec_and_client(served: Served, template: str, path: Any, call: Any) -> None:
    response = _get(served, path(served.sc))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    contract.validate(template, 200, body)
    if isinstance(body, list):
        assert body, f"{template} should list something in the scenario"
    if call is not None:
        parsed = call(served.api, served.sc)
        as_json = (
            [vars(x) if hasattr(x, "__dict__") else x for x in parsed]
            if isinstance(parsed, list)
            else parsed
        )
        assert as_json is not None
        if template != "/health/clock":
            again = call(served.api, served.sc)
            assert type(again) is type(parsed)


def test_every_served_blockfrost_route_is_covered(served: Served) -> None:
    covered = {g[0] for g in GETS} | {
        "/tx/submit",
        "/utils/txs/evaluate",
        "/utils/txs/evaluate/utxos",
    }
    for route, methods in served.routes:
        if route.startswith("/admin/"):
            continue
        template = _spec_template(route)
        method = "post" if "POST" in methods else "get"
        assert contract.has_path(template, method), f"{route} is not a Blockfrost path"
        assert template in covered, f"{template} has no contract test"


def test_values_rendered_as_blockfrost_does(served: Served) -> None:
    sc = served.sc
    # The inline-datum output was spent; the datum-hash one is still at the script address.
    (hashed,) = _get(served, f"/addresses/{sc.script_addr}/utxos").json()
    assert hashed["data_hash"] == sc.hashed_datum_hash and hashed["inline_datum"] is None
    inline = _get(served, f"/txs/{sc.pay_tx}/utxos").json()["outputs"][1]
    assert inline["inline_datum"] == server_scenario.INLINE_DATUM.hex()
    assert inline["data_hash"] == sc.inline_datum_hash  # Blockfrost hashes inline datums too
    ref = _get(served, f"/addresses/{sc.addr_a}/utxos").json()
    assert [u["reference_script_hash"] for u in ref if u["reference_script_hash"]] == [
        sc.script_hash
    ]

    tx_utxos = _get(served, f"/txs/{sc.spend_tx}/utxos").json()
    flags = {
        (i["tx_hash"], i["output_index"]): (i["collateral"], i["reference"])
        for i in tx_utxos["inputs"]
    }
    assert flags == {
        (sc.pay_tx, 1): (False, False),
        (sc.pay_tx, 0): (True, False),
        (sc.pay_tx, 3): (False, True),
    }
    outs = _get(served, f"/txs/{sc.pay_tx}/utxos").json()["outputs"]
    assert outs[1]["consumed_by_tx"] == sc.spend_tx and outs[2]["consumed_by_tx"] is None

    tx = _get(served, f"/txs/{sc.pay_tx}").json()
    assert tx["fees"] == "300000" and tx["valid_contract"] is True and tx["utxo_count"] == 6
    token = {a["unit"]: a["quantity"] for a in tx["output_amount"]}
    assert token[sc.unit] == "1000"

    redeemers = _get(served, f"/txs/{sc.spend_tx}/redeemers").json()
    assert [(r["purpose"], r["tx_index"], r["unit_mem"], r["unit_steps"]) for r in redeemers] == [
        ("spend", 0, "5000", "1000000")
    ]
    metadata = _get(served, f"/txs/{sc.pay_tx}/metadata").json()
    assert metadata == [
        {"label": "674", "json_metadata": {"msg": ["hello devnet"]}},
        {"label": "1234", "json_metadata": "0x0102"},
    ]
    native = _get(served, f"/scripts/{sc.native_policy}/json").json()["json"]
    assert native["type"] == "sig" and len(native["keyHash"]) == 56


def test_protocol_parameters_feed_pycardano(served: Served) -> None:
    from pycardano import BlockFrostChainContext

    from chain.devnet.cost_models import cost_model_names, plutus_v3_cost_model

    params = _get(served, "/epochs/latest/parameters").json()
    assert list(params["cost_models"]["PlutusV3"]) == cost_model_names("PlutusV3")
    assert params["cost_models_raw"]["PlutusV3"] == plutus_v3_cost_model()
    ctx = BlockFrostChainContext(project_id="devnet", base_url=served.url[: -len("/v0")])
    pp = ctx.protocol_param
    assert pp.min_fee_coefficient == 44 and pp.min_fee_constant == 155_381
    assert list(pp.cost_models["PlutusV3"].values()) == plutus_v3_cost_model()
    assert pp.coins_per_utxo_byte == 4_310
    assert ctx.genesis_param.network_magic == 42
    utxos = ctx.utxos(served.sc.addr_a)
    assert {str(u.input.transaction_id) for u in utxos} == {served.sc.pay_tx}
    with_script = [u for u in utxos if u.output.script is not None]
    assert len(with_script) == 1 and with_script[0].output.script == server_scenario.ALWAYS_TRUE_V3


PAGED = [
    ("/blocks/{hash_or_number}/txs", "/blocks/{pay_block}/txs"),
    ("/addresses/{address}/utxos", "/addresses/{script_addr}/utxos"),
    ("/addresses/{address}/transactions", "/addresses/{addr_a}/transactions"),
    ("/addresses/{address}/txs", "/addresses/{addr_a}/txs"),
    ("/metadata/txs/labels", "/metadata/txs/labels"),
    ("/mempool", "/mempool"),
]


@pytest.mark.parametrize(("template", "path"), PAGED, ids=[p[0] for p in PAGED])
def test_pagination(served: Served, template: str, path: str) -> None:
    sc = served.sc
    concrete = path.format(script_addr=sc.script_addr, addr_a=sc.addr_a, pay_block=sc.pay_block)
    everything = _get(served, concrete).json()
    contract.validate(template, 200, everything)
    pages = [_get(served, concrete, count=1, page=p).json() for p in range(1, len(everything) + 2)]
    for page in pages:
        contract.validate(template, 200, page)
    assert [p[0] for p in pages[:-1]] == everything
    assert pages[-1] == []
    desc = _get(served, concrete, order="desc").json()
    assert desc == list(reversed(everything))
    assert _get(served, concrete, count=100, page=2).json() == []


def test_address_transactions_from_to(served: Served) -> None:
    sc = served.sc
    all_txs = _get(served, f"/addresses/{sc.addr_a}/transactions").json()
    heights = sorted({t["block_height"] for t in all_txs})
    assert len(heights) >= 2
    later = _get(served, f"/addresses/{sc.addr_a}/transactions", **{"from": str(heights[1])}).json()
    assert later and all(t["block_height"] >= heights[1] for t in later)
    earlier = _get(served, f"/addresses/{sc.addr_a}/transactions", to=str(heights[0])).json()
    assert earlier and all(t["block_height"] <= heights[0] for t in earlier)
    contract.validate("/addresses/{address}/transactions", 200, later)


ERRORS = [
    ("/txs/{hash}", "/txs/" + "ab" * 32, 404),
    ("/txs/{hash}", "/txs/nothex", 400),
    ("/txs/{hash}/utxos", "/txs/" + "cd" * 32 + "/utxos", 404),
    ("/blocks/{hash_or_number}", "/blocks/999999", 404),
    ("/blocks/{hash_or_number}", "/blocks/zz", 400),
    ("/addresses/{address}", "/addresses/addr_test1notanaddress", 400),
    ("/addresses/{address}/utxos", "/addresses/{unknown}/utxos", 404),
    ("/assets/{asset}", "/assets/" + "ab" * 29, 404),
    ("/assets/{asset}", "/assets/xyz", 400),
    ("/scripts/{script_hash}", "/scripts/" + "ab" * 28, 404),
    ("/scripts/datum/{datum_hash}", "/scripts/datum/" + "ab" * 32, 404),
    ("/accounts/{stake_address}", "/accounts/{unknown_stake}", 404),
    ("/accounts/{stake_address}", "/accounts/stake_nope", 400),
    ("/epochs/{number}/parameters", "/epochs/99/parameters", 404),
    ("/metadata/txs/labels/{label}", "/metadata/txs/labels/abc", 400),
    ("/mempool/{hash}", "/mempool/" + "ef" * 32, 404),
    ("/blocks/latest/txs", "/blocks/latest/txs?count=101", 400),
    ("/mempool", "/mempool?page=0", 400),
    ("/mempool", "/mempool?order=sideways", 400),
]


@pytest.mark.parametrize(("template", "path", "status"), ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_error_bodies_match_spec(served: Served, template: str, path: str, status: int) -> None:
    from pycardano import Address, Network, PaymentVerificationKey, StakeVerificationKey

    vk = PaymentVerificationKey.from_primitive(bytes(32))
    unknown = str(Address(vk.hash(), network=Network.TESTNET))
    unknown_stake = str(
        Address(
            staking_part=StakeVerificationKey.from_primitive(bytes(32)).hash(),
            network=Network.TESTNET,
        )
    )
    concrete = path.format(unknown=unknown, unknown_stake=unknown_stake)
    response = served.client.get(f"{served.url}{concrete}")
    assert response.status_code == status, response.text
    assert str(status) in contract.documented_statuses(template)
    contract.validate(template, status, response.json())


def test_blockfrost_client_sees_errors(served: Served) -> None:
    with pytest.raises(ApiError) as info:
        served.api.transaction("ab" * 32)
    assert info.value.status_code == 404 and info.value.message
    with pytest.raises(ApiError) as info:
        served.api.address("addr_test1broken")
    assert info.value.status_code == 400


def test_submit_and_evaluate_shapes(served: Served) -> None:
    from pycardano import Transaction

    sc = served.sc
    spend = Transaction.from_cbor(sc.ledger.transaction(sc.spend_tx).cbor)  # type: ignore[union-attr]
    r = served.client.post(
        f"{served.url}/utils/txs/evaluate",
        content=spend.to_cbor().hex(),
        headers={"Content-Type": "application/cbor"},
    )
    assert r.status_code == 200
    contract.validate("/utils/txs/evaluate", 200, r.json(), method="post")
    assert r.json()["result"] == {
        "EvaluationResult": {"spend:0": {"memory": 1000, "steps": 100000}}
    }
    result = served.api.transaction_evaluate_cbor(spend.to_cbor())
    assert result.result.EvaluationResult.to_dict()["spend:0"].memory == 1000

    bad = served.client.post(
        f"{served.url}/tx/submit", content=b"\x84\x00", headers={"Content-Type": "application/cbor"}
    )
    assert bad.status_code == 400
    contract.validate("/tx/submit", 400, bad.json(), method="post")
    unsupported = served.client.post(
        f"{served.url}/tx/submit", content=spend.to_cbor(), headers={"Content-Type": "text/plain"}
    )
    assert unsupported.status_code == 400
    contract.validate("/tx/submit", 400, unsupported.json(), method="post")


# --- the same contract over a real Ledger --------------------------------------------------


@pytest.fixture(scope="module")
def served_real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with running_devnet(tmp_path_factory.mktemp("real"), block_time=0.1) as devnet:
        sc = server_scenario.build_real(devnet)
        api = BlockFrostApi(project_id="devnet", base_url=devnet.root_url)
        with httpx.Client(timeout=30) as client:
            yield Served(devnet.url, client, api, sc, [])


@pytest.mark.parametrize(("template", "path", "call"), GETS, ids=[g[0] for g in GETS])
def test_real_ledger_get_matches_spec(
    served_real: Served, template: str, path: Any, call: Any
) -> None:
    test_get_matches_spec_and_client(served_real, template, path, call)


@pytest.mark.parametrize(("template", "path"), PAGED, ids=[p[0] for p in PAGED])
def test_real_ledger_pagination(served_real: Served, template: str, path: str) -> None:
    test_pagination(served_real, template, path)


def test_real_ledger_values(served_real: Served) -> None:
    sc = served_real.sc
    tx_utxos = _get(served_real, f"/txs/{sc.spend_tx}/utxos").json()
    kinds = {(i["collateral"], i["reference"]) for i in tx_utxos["inputs"]}
    assert kinds == {(False, False), (True, False), (False, True)}
    script_input = next(i for i in tx_utxos["inputs"] if i["address"] == sc.script_addr)
    assert script_input["inline_datum"] == server_scenario.INLINE_DATUM.hex()
    assert script_input["data_hash"] == sc.inline_datum_hash
    (redeemer,) = _get(served_real, f"/txs/{sc.spend_tx}/redeemers").json()
    assert redeemer["purpose"] == "spend" and redeemer["script_hash"] == sc.script_hash
    pay = _get(served_real, f"/txs/{sc.pay_tx}").json()
    assert pay["stake_cert_count"] == 1 and pay["deposit"] == "2000000"
    account = _get(served_real, f"/accounts/{sc.stake_a}").json()
    assert account["registered"] is True and account["withdrawable_amount"] == "0"
    mempool = _get(served_real, f"/mempool/{sc.mempool_tx}").json()
    assert mempool["tx"]["hash"] == sc.mempool_tx and mempool["inputs"]
