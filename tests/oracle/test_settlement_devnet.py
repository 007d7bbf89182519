"""The settlement engine on a real devnet with the real builders and scripts: batches pay
exactly the attested amounts with remainders to submitters, the audit trail matches, and
rollbacks injected through the devnet's fault endpoints are settled exactly once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from settlement_fixtures import oracle_engine, statuses

from chain.devnet.node_bridge import node_bridge
from chain.devnet.testing import running_devnet
from oracle.settlement import scenario as sc
from oracle.settlement.audit import Expected, audit_payouts, settlement_tx_of
from oracle.settlement.builder_port import CardanoSettlementBuilder
from oracle.settlement.bundle import MEMO_LABEL, parse_bundle
from oracle.settlement.chain_view import BlockfrostChainView
from oracle.settlement.engine import BatchPolicy, SettlementEngine
from oracle.settlement.intents import IntentLog
from oracle.settlement.models import IntentState
from oracle.settlement.node_chain_view import NodeChainView
from oracle.settlement.queue import AttestationQueue
from oracle.settlement.watcher import WatchConfig

BUDGET = 1_000


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with (
        running_devnet(tmp_path_factory.mktemp("devnet"), block_time=0.2) as devnet,
    ):
        devnet_api = sc.Devnet(devnet.url)
        yield devnet_api, sc.setup(devnet_api, oracles=1, threshold=1, tag="settle-test")


@pytest.fixture(scope="module")
def manual_chain(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A devnet whose blocks the test produces by hand (after a pumped setup), so a
    rollback of depth d undoes exactly the d blocks the test made."""
    with (
        running_devnet(tmp_path_factory.mktemp("devnet-manual"), block_time=3600) as devnet,
    ):
        devnet_api = sc.Devnet(devnet.url)
        stop = threading.Event()

        def pump() -> None:
            while not stop.wait(0.1):
                devnet.produce_block()

        pumper = threading.Thread(target=pump, daemon=True)
        pumper.start()
        try:
            scenario = sc.setup(devnet_api, oracles=1, threshold=1, tag="rollback-test")
            escrows = sc.lock(scenario, 6, budget=BUDGET, nonce_base=300)
        finally:
            stop.set()
            pumper.join()
        yield devnet_api, scenario, escrows


def _engine(tmp_path: Path, scenario: sc.Scenario, depth: int = 2, chain_view=None):  # type: ignore[no-untyped-def]
    db = oracle_engine(tmp_path)
    builder = CardanoSettlementBuilder(
        scenario.devnet.context(), scenario.deployment, scenario.oracle_keys[0]
    )
    engine = SettlementEngine(
        IntentLog(db, AttestationQueue()),
        chain_view or BlockfrostChainView(scenario.devnet.url),
        builder,
        policy=BatchPolicy(batch_size=8, max_wait_s=0),
        watch=WatchConfig(confirmation_depth=depth),
        proposer="devnet-test",
    )
    return db, engine


def _until(engine: SettlementEngine, done, timeout: float = 90.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "settlement did not finish in time"
        engine.tick()
        time.sleep(0.1)


def test_batch_pays_attested_amounts_and_refunds_remainders(chain, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    devnet, scenario = chain
    db, engine = _engine(tmp_path, scenario)
    escrows = sc.lock(scenario, 3, budget=BUDGET, nonce_base=100)
    rows = sc.attested_escrows(scenario, db, escrows, amount=300)
    _until(engine, lambda: set(statuses(db).values()) == {"settled"})

    expected = [Expected(e, addr, amount) for e, (_, addr, amount) in rows.items()]
    unit = scenario.ntx_policy + sc.NTX_NAME.hex()
    result = audit_payouts(devnet.url, expected, unit)
    # Worker keys repeat every 7 attestations; 3 escrows here use 3 distinct addresses.
    assert (result.double_payments, result.lost, result.paid) == (0, 0, 3)

    (tx_id,) = {settlement_tx_of(devnet.url, e) for e in rows}
    assert tx_id is not None
    utxos = httpx.get(f"{devnet.url}/txs/{tx_id}/utxos").json()
    to_submitter = [o for o in utxos["outputs"] if o["address"] == str(scenario.submitter.address)]
    refunds = sorted(
        int(a["quantity"]) for o in to_submitter for a in o["amount"] if a["unit"] == unit
    )
    assert refunds == sorted(BUDGET - amount for _, _, amount in rows.values())

    # Metadata: CIP-20 memo, root and bundle hash; the bundle is served and matches.
    meta = httpx.get(f"{devnet.url}/txs/{tx_id}/metadata").json()
    (memo,) = [m["json_metadata"] for m in meta if m["label"] == str(MEMO_LABEL)]
    assert memo["msg"][0] == "proofnet settlement"
    intent = engine.intents.by_tx(tx_id)
    assert intent is not None and intent.state == IntentState.CONFIRMED
    bundle = engine.intents.bundle(intent.bundle_sha256)
    assert bundle is not None
    parsed = parse_bundle(bundle.body)
    assert parsed.merkle_root.hex() == intent.merkle_root
    assert memo["root"].removeprefix("0x") == intent.merkle_root
    assert memo["bundle"].removeprefix("0x") == intent.bundle_sha256
    redeemers = httpx.get(f"{devnet.url}/txs/{tx_id}/redeemers").json()
    assert any(r["purpose"] == "reward" for r in redeemers)


def test_the_engine_settles_watching_and_submitting_through_ogmios_and_kupo(  # type: ignore[no-untyped-def]
    chain, tmp_path: Path
) -> None:
    """PROOFNET_CHAIN_BACKEND=ogmios: the engine's chain is `NodeChainView` over the devnet
    node bridge (tip, spends, tx status, output CBOR, submission); the builder still asks
    the devnet for UTxOs and protocol parameters (the bridge serves no such queries)."""
    devnet, scenario = chain
    with node_bridge(devnet.url) as node:
        view = NodeChainView(node.ogmios_url, node.kupo_url)
        db, engine = _engine(tmp_path, scenario, chain_view=view)
        escrows = sc.lock(scenario, 2, budget=BUDGET, nonce_base=200)
        # Payouts are counted per address on a chain the other tests of this module share:
        # workers 3 and 4, none of theirs (0 to 2).
        rows = sc.attested_escrows(scenario, db, escrows, amount=250, first_worker=3)
        _until(engine, lambda: set(statuses(db).values()) == {"settled"})
    expected = [Expected(e, addr, amount) for e, (_, addr, amount) in rows.items()]
    result = audit_payouts(devnet.url, expected, scenario.ntx_policy + sc.NTX_NAME.hex())
    assert (result.double_payments, result.lost, result.paid) == (0, 0, 2)
    (tx_id,) = {settlement_tx_of(devnet.url, e) for e in rows}
    intent = engine.intents.by_tx(tx_id) if tx_id is not None else None
    assert intent is not None and intent.state == IntentState.CONFIRMED


@pytest.mark.parametrize(("depth", "drop"), [(1, True), (2, False), (3, True)])
def test_rollback_is_detected_and_settled_exactly_once(
    manual_chain, tmp_path: Path, depth: int, drop: bool
) -> None:  # type: ignore[no-untyped-def]
    devnet, scenario, all_escrows = manual_chain
    db, engine = _engine(tmp_path, scenario, depth=depth + 2)
    escrows = all_escrows[2 * (depth - 1) : 2 * depth]
    rows = sc.attested_escrows(scenario, db, escrows, amount=100 + depth)

    batch = engine.tick()
    assert batch is not None
    intent = engine.intents.get(batch)
    assert intent is not None and intent.tx_id is not None
    for _ in range(depth):
        devnet.admin("produce-block")
    engine.tick()
    included = engine.intents.get(batch)
    assert included is not None and included.block_height is not None
    assert included.state == IntentState.SUBMITTED  # depth + 2 not reached yet

    undone = devnet.admin("rollback", {"depth": depth, "drop": drop})
    assert intent.tx_id in undone["rolled_back_txs"]  # type: ignore[operator]
    engine.tick()  # sees the tx gone from its block
    kinds = [e.kind for e in engine.intents.events(batch)]
    assert "rolled_back" in kinds
    if drop:
        assert kinds[-1] == "resubmitted"

    def settled() -> bool:
        devnet.admin("produce-block")
        return set(statuses(db).values()) == {"settled"}

    _until(engine, settled)

    final = engine.intents.get(batch)
    assert final is not None and final.state == IntentState.CONFIRMED
    assert {settlement_tx_of(devnet.url, e) for e in rows} == {intent.tx_id}
    unit = scenario.ntx_policy + sc.NTX_NAME.hex()
    # Provider addresses repeat across tests: compare against what each was paid before.
    spent = httpx.get(f"{devnet.url}/txs/{intent.tx_id}/utxos").json()
    paid = {
        (o["address"], int(a["quantity"]))
        for o in spent["outputs"]
        for a in o["amount"]
        if a["unit"] == unit and o["address"] != str(scenario.submitter.address)
    }
    assert paid == {(addr, amount) for _, addr, amount in rows.values()}
    assert audit_payouts  # the chaos test audits balances with unique addresses
