"""The chain watcher on a self-hosted node (PROOFNET_CHAIN_BACKEND=ogmios): Ogmios chain-sync
and Kupo, over their real protocols in front of a running devnet
(`chain.devnet.node_bridge`). What it records must be what the Blockfrost watcher records of
the same chain; a restart resumes from the stored cursor; a rollback removes the record and
the rescan restores it on the new fork.

One deployment per module; the rollback test comes last (it rewrites the chain).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pycardano import Network
from sqlalchemy import Engine
from sqlmodel import Session, col, select
from web_fixtures import ProtocolWorld, protocol_world

from api.clock import utcnow
from api.db import make_engine
from api.migrate import upgrade_head
from api.models import ChainMovement
from api.services.chain_watch import ChainWatch, PassReport, WatchConfig
from chain.devnet.node_bridge import NodeBridge, node_bridge
from chain.offchain.backends import NodeChainContext
from chain.offchain.builders import assembly as A
from chain.offchain.builders.settle import Settlement, build_settle_batch
from chain.offchain.follow.model import BlockPoint, FollowStep
from chain.offchain.follow.ogmios import OgmiosFollower
from chain.offchain.follow.reader import DeploymentFollower, follower_for

PASS_TIMEOUT_S = 90.0

pytestmark = pytest.mark.slow  # a devnet, a deployment, a node bridge


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProtocolWorld]:
    with protocol_world(tmp_path_factory.mktemp("watch-ogmios"), providers=2) as w:
        yield w


@pytest.fixture(scope="module")
def node(world: ProtocolWorld) -> Iterator[NodeBridge]:
    with node_bridge(world.devnet.url) as bridge:
        yield bridge


def database(path: Path) -> Engine:
    engine = make_engine(f"sqlite:///{path}")
    upgrade_head(engine)
    return engine


def node_follower(node: NodeBridge) -> OgmiosFollower:
    found = follower_for(NodeChainContext(node.ogmios_url, node.kupo_url, Network.TESTNET))
    assert isinstance(found, OgmiosFollower)
    return found


def watcher(world: ProtocolWorld, engine: Engine, follower: DeploymentFollower) -> ChainWatch:
    return ChainWatch(
        engine, follower, world.deployment, clock=utcnow, config=WatchConfig(confirmations=1)
    )


def pass_until(watch: ChainWatch, done: Callable[[PassReport], bool]) -> PassReport:
    deadline = time.monotonic() + PASS_TIMEOUT_S
    while True:
        report = watch.run_once()
        if done(report):
            return report
        if time.monotonic() > deadline:
            raise AssertionError(f"the watcher did not get there: last pass {report}")
        time.sleep(0.1)


def rows(engine: Engine, **where: Any) -> list[ChainMovement]:
    with Session(engine) as s:
        stmt = select(ChainMovement).order_by(
            col(ChainMovement.block_height), col(ChainMovement.output_index)
        )
        for name, value in where.items():
            stmt = stmt.where(getattr(ChainMovement, name) == value)
        return list(s.exec(stmt).all())


def recorded(engine: Engine, tx_hash: str) -> Callable[[PassReport], bool]:
    return lambda _report: bool(rows(engine, tx_hash=tx_hash))


def facts(engine: Engine, up_to: int) -> set[tuple[Any, ...]]:
    """The record as the chain says it, without when it was written."""
    return {
        (
            r.kind,
            r.action,
            r.escrow_tx_id,
            r.escrow_index,
            r.job_id,
            r.tx_hash,
            r.tx_index,
            r.output_index,
            r.address,
            r.lovelace,
            r.ntx,
            r.block_height,
            r.block_hash,
            r.slot,
            r.block_time.replace(tzinfo=None),
        )
        for r in rows(engine)
        if r.block_height <= up_to
    }


def settle(world: ProtocolWorld, settlements: Sequence[Settlement]) -> str:
    quorum = world.oracle_quorum
    batch = build_settle_batch(
        world.context,
        world.deployment,
        list(settlements),
        b"\x11" * 32,
        b"watch-ogmios",
        [o.pkh for o in quorum],
        quorum[0].address,
    )
    return world.submit(A.sign(batch.built, [o.signing_key for o in quorum]))


class Recording:
    """A follower that remembers the points each step was asked to resume from."""

    def __init__(self, inner: OgmiosFollower) -> None:
        self.inner = inner
        self.asked: list[list[BlockPoint]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def follow(
        self, known: Sequence[BlockPoint], scripts: Sequence[str], start: BlockPoint
    ) -> FollowStep:
        self.asked.append(list(known))
        return self.inner.follow(known, scripts, start)


def test_earnings_through_the_node_are_those_through_blockfrost(
    world: ProtocolWorld, node: NodeBridge, tmp_path: Path
) -> None:
    p = world.providers
    escrows = world.lock([world.job(900), world.job(400)])
    tx_id = settle(
        world,
        [
            Settlement(escrows[0], ((p[0].address, 500),)),
            Settlement(escrows[1], ((p[1].address, 150), (p[0].address, 50))),
        ],
    )
    by_rest, by_node = database(tmp_path / "rest.db"), database(tmp_path / "node.db")
    rest_watch = watcher(world, by_rest, follower_for(world.context))
    node_watch = watcher(world, by_node, node_follower(node))
    rest_report = pass_until(rest_watch, recorded(by_rest, tx_id))
    node_report = pass_until(node_watch, recorded(by_node, tx_id))
    assert rest_report.cursor is not None and node_report.cursor is not None
    up_to = min(rest_report.cursor, node_report.cursor)
    from_node = facts(by_node, up_to)
    assert from_node == facts(by_rest, up_to)
    mine = {f for f in from_node if f[5] == tx_id}
    assert {(f[0], f[8], f[10]) for f in mine} == {
        ("payout", str(p[0].address), 500),
        ("payout", str(p[1].address), 150),
        ("payout", str(p[0].address), 50),
        ("refund", str(world.submitter.address), 400),
        ("refund", str(world.submitter.address), 200),
    }


def test_a_restart_resumes_from_the_cursor_without_duplicates(
    world: ProtocolWorld, node: NodeBridge, tmp_path: Path
) -> None:
    engine = database(tmp_path / "api.db")
    (escrow,) = world.lock([world.job(300)])
    first = settle(world, [Settlement(escrow, ((world.providers[0].address, 300),))])
    report = pass_until(watcher(world, engine, node_follower(node)), recorded(engine, first))
    first_rows = facts(engine, report.cursor or 0)

    (escrow,) = world.lock([world.job(250)])
    second = settle(world, [Settlement(escrow, ((world.providers[1].address, 250),))])
    restarted = Recording(node_follower(node))  # a new process: nothing but the database
    pass_until(watcher(world, engine, restarted), recorded(engine, second))
    # It resumed from the stored cursor (not from the deployment's start) ...
    assert restarted.asked[0] and restarted.asked[0][0].height == report.cursor
    # ... and what it had recorded stayed as it was, once.
    assert facts(engine, report.cursor or 0) == first_rows
    keys = [(r.tx_hash, r.output_index) for r in rows(engine)]
    assert len(keys) == len(set(keys))
    assert [r.ntx for r in rows(engine, tx_hash=second) if r.kind == "payout"] == [250]


def test_the_api_builds_the_node_follower_from_its_settings(
    world: ProtocolWorld, node: NodeBridge, tmp_path: Path
) -> None:
    """PROOFNET_CHAIN_BACKEND=ogmios with PROOFNET_OGMIOS_URL and PROOFNET_KUPO_URL is all an
    API needs: its watcher (`chain_watch.build`) follows through the node and records."""
    from types import SimpleNamespace

    from api.config import ApiConfig
    from api.services import chain_watch
    from proofnet.settings import build_settings

    url = f"sqlite:///{tmp_path / 'api.db'}"
    engine = database(tmp_path / "api.db")
    settings = build_settings(
        chain_backend="ogmios", ogmios_url=node.ogmios_url, kupo_url=node.kupo_url
    )
    state = SimpleNamespace(
        deployment=world.deployment,
        settings=settings,
        chain_context=None,
        engine=engine,
        clock=utcnow,
        config=ApiConfig(database_url=url, network="devnet", chain_watch_confirmations=1),
    )
    watch = chain_watch.build(state)
    assert watch is not None and isinstance(watch.follower, OgmiosFollower)
    (escrow,) = world.lock([world.job(220)])
    tx_id = settle(world, [Settlement(escrow, ((world.providers[0].address, 220),))])
    pass_until(watch, recorded(engine, tx_id))
    assert [r.ntx for r in rows(engine, tx_hash=tx_id) if r.kind == "payout"] == [220]


# --- rollbacks (last: they rewrite the chain) -----------------------------------------------


def test_a_rollback_removes_the_record_and_the_rescan_restores_it(
    world: ProtocolWorld, node: NodeBridge, tmp_path: Path
) -> None:
    engine = database(tmp_path / "api.db")
    watch = watcher(world, engine, node_follower(node))
    (escrow,) = world.lock([world.job(350)])
    tx_id = settle(world, [Settlement(escrow, ((world.providers[1].address, 350),))])
    pass_until(watch, recorded(engine, tx_id))
    (old,) = rows(engine, tx_hash=tx_id, kind="payout")

    devnet = world.devnet
    devnet.admin("pause")
    try:
        devnet.admin("rollback", {"from_height": old.block_height, "drop": False})
        gone = watch.run_once()  # the chain without the settlement's block
        assert gone.rolled_back and gone.removed >= 1
        assert rows(engine, tx_hash=tx_id) == []
    finally:
        devnet.admin("resume")
    devnet.wait_for_tx(tx_id)  # the same transaction, in a new block
    pass_until(watch, recorded(engine, tx_id))
    (new,) = rows(engine, tx_hash=tx_id, kind="payout")
    assert new.block_hash != old.block_hash and (new.kind, new.ntx) == (old.kind, old.ntx)
