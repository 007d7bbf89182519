"""Following a deployment through a self-hosted node (Ogmios chain-sync + Kupo) on a running
devnet, spoken over the real protocols (`chain.devnet.node_bridge`): the follower must read
exactly what the Blockfrost follower reads of the same chain, resume from any known point,
see rollbacks, and fail in one line when a service is down or misconfigured.

One deployment per module; the rollback tests come last (they rewrite the chain).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import cbor2
import pytest
from protocol_fixtures import ProtocolWorld, protocol_world, wallet

from chain.devnet.node_bridge import NodeBridge, OgmiosBridge, node_bridge
from chain.offchain.backends import NodeChainContext, chain_context
from chain.offchain.builders import assembly as A
from chain.offchain.builders.onchain import datum_cbor
from chain.offchain.builders.refund import build_cancel, build_refund
from chain.offchain.builders.settle import Settlement, build_settle_batch
from chain.offchain.errors import BackendConfigError, BackendUnavailableError
from chain.offchain.follow.blockfrost import BlockfrostFollower
from chain.offchain.follow.classify import DEFAULT_CLASSIFIERS, classify, watched_scripts
from chain.offchain.follow.kupo import Kupo
from chain.offchain.follow.model import BlockPoint, ChainDataError, FollowStep
from chain.offchain.follow.ogmios import OgmiosFollower
from chain.offchain.follow.reader import follower_for
from proofnet.settings import build_settings

pytestmark = pytest.mark.slow  # a devnet, a deployment, a node bridge


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProtocolWorld]:
    with protocol_world(tmp_path_factory.mktemp("follow-ogmios")) as w:
        yield w


@pytest.fixture(scope="module")
def node(world: ProtocolWorld) -> Iterator[NodeBridge]:
    with node_bridge(world.devnet.url) as bridge:
        yield bridge


@pytest.fixture
def blockfrost(world: ProtocolWorld) -> BlockfrostFollower:
    found = follower_for(world.context)
    assert isinstance(found, BlockfrostFollower)
    return found


@pytest.fixture
def ogmios(node: NodeBridge) -> OgmiosFollower:
    from pycardano import Network

    found = follower_for(NodeChainContext(node.ogmios_url, node.kupo_url, Network.TESTNET))
    assert isinstance(found, OgmiosFollower)
    return found


def scripts(world: ProtocolWorld) -> tuple[str, ...]:
    return watched_scripts(world.deployment, DEFAULT_CLASSIFIERS)


def settle(world: ProtocolWorld, settlements: list[Settlement]) -> str:
    quorum = world.oracle_quorum
    batch = build_settle_batch(
        world.context,
        world.deployment,
        settlements,
        b"\x11" * 32,
        b"ogmios",
        [o.pkh for o in quorum],
        quorum[0].address,
    )
    return world.submit(A.sign(batch.built, [o.signing_key for o in quorum]))


def same_reading(world: ProtocolWorld, a: FollowStep, b: FollowStep) -> None:
    """Both followers read the same transactions, decoded alike, with the same movements."""
    assert [t.hash for t in a.txs] == [t.hash for t in b.txs]
    for left, right in zip(a.txs, b.txs, strict=True):
        assert left == right
        assert left.block.slot == right.block.slot and left.block.time == right.block.time
        assert classify(left, world.deployment) == classify(right, world.deployment)


def test_the_start_point_is_the_block_before_the_deployment(
    world: ProtocolWorld, blockfrost: BlockfrostFollower, ogmios: OgmiosFollower
) -> None:
    config_tx = world.deployment.config_ref.partition("#")[0]
    by_node = ogmios.point_before(config_tx)
    assert by_node is not None and by_node == blockfrost.point_before(config_tx)
    assert ogmios.tx_block(config_tx) == blockfrost.tx_block(config_tx)
    assert ogmios.point_before("00" * 32) is None


def test_settlement_refund_and_cancel_read_as_through_blockfrost(
    world: ProtocolWorld, blockfrost: BlockfrostFollower, ogmios: OgmiosFollower
) -> None:
    since = blockfrost.tip()
    p = world.providers
    escrows = world.lock([world.job(1_000), world.job(500)])
    settled = settle(
        world,
        [
            Settlement(escrows[0], ((p[0].address, 600),)),
            Settlement(escrows[1], ((p[1].address, 100), (p[2].address, 50))),
        ],
    )
    (late,) = world.lock([world.job(700, deadline_in_ms=8_000)], min_margin_ms=1_000)
    (cancelled,) = world.lock([world.job(800, cancel_until_in_ms=600_000)])
    quorum = world.oracle_quorum
    cancel = build_cancel(
        world.context,
        world.deployment,
        [cancelled],
        [o.pkh for o in quorum],
        world.submitter.address,
    )
    cancelled_tx = world.submit(
        A.sign(cancel.built, [world.submitter.signing_key, *(o.signing_key for o in quorum)])
    )
    stranger = wallet(311)
    world.fund(stranger)
    world.wait_until_chain_ms(cbor2.loads(datum_cbor(late.output.datum)).value[7] + 1_000)
    refund = build_refund(world.context, world.deployment, [late], stranger.address)
    refunded = world.submit(A.sign(refund.built, [stranger.signing_key]))

    by_node = ogmios.follow([since], scripts(world), since)
    by_rest = blockfrost.follow([since], scripts(world), since)
    assert by_node.common == since
    assert {settled, cancelled_tx, refunded} <= {t.hash for t in by_node.txs}
    # The node's step may end at a later tip; compare what both covered.
    covered = min(by_node.cursor.height, by_rest.cursor.height)
    same_reading(
        world,
        FollowStep(since, tuple(t for t in by_node.txs if t.block.height <= covered), since, since),
        FollowStep(since, tuple(t for t in by_rest.txs if t.block.height <= covered), since, since),
    )
    # From the new cursor there is nothing more of the deployment.
    again = ogmios.follow([by_node.cursor, since], scripts(world), since)
    assert again.common == by_node.cursor and not again.txs


def test_a_long_backlog_is_read_in_whole_blocks(
    world: ProtocolWorld, ogmios: OgmiosFollower
) -> None:
    since = ogmios.tip()
    p = world.providers
    for amount in (100, 200, 300):
        (escrow,) = world.lock([world.job(amount)])
        settle(world, [Settlement(escrow, ((p[3].address, amount),))])
    small = OgmiosFollower(ogmios.ogmios_url, ogmios.kupo, max_txs=1)
    short = OgmiosFollower(ogmios.ogmios_url, ogmios.kupo, max_blocks=2)
    two = short.follow([since], scripts(world), since)
    assert two.cursor.height == since.height + 2 and two.tip.height > two.cursor.height
    seen: list[str] = []
    known = [since]
    for _ in range(20):
        step = small.follow(known, scripts(world), since)
        seen.extend(t.hash for t in step.txs)
        known = [step.cursor, *known]
        if step.cursor.hash == step.tip.hash and len(seen) >= 3:
            break
    whole = ogmios.follow([since], scripts(world), since)
    assert seen[:3] == [t.hash for t in whole.txs][:3] and len(seen) == len(set(seen))


def test_an_unreachable_or_misconfigured_node_fails_in_one_line(node: NodeBridge) -> None:

    start = BlockPoint(0, "00" * 32)
    down = OgmiosFollower("ws://127.0.0.1:9", Kupo(node.kupo_url), timeout_s=5)
    with pytest.raises(BackendUnavailableError) as ogmios_down:
        down.follow([], ("00" * 28,), start)
    assert "PROOFNET_OGMIOS_URL" in str(ogmios_down.value)
    assert "\n" not in str(ogmios_down.value)
    no_kupo = OgmiosFollower(node.ogmios_url, Kupo("http://127.0.0.1:9", timeout_s=5))
    with pytest.raises(BackendUnavailableError) as kupo_down:
        no_kupo.point_before("00" * 32)
    assert "PROOFNET_KUPO_URL" in str(kupo_down.value)
    with pytest.raises(BackendConfigError, match="PROOFNET_KUPO_URL"):
        follower_for(
            chain_context(
                build_settings(chain_backend="ogmios", ogmios_url=node.ogmios_url, kupo_url="")
            )
        )


def test_a_node_that_lies_about_a_transaction_is_refused(
    world: ProtocolWorld, ogmios: OgmiosFollower, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ogmios hands out transaction CBOR; a body that does not hash to the transaction's id
    (a raised fee, a changed output) stops the follower there: it is never read as a
    settlement, and never skipped."""
    since = ogmios.tip()
    (escrow,) = world.lock([world.job(200)])
    tx_id = settle(world, [Settlement(escrow, ((world.providers[0].address, 200),))])
    honest = OgmiosBridge.block_json

    def lying(self: OgmiosBridge, block: dict[str, Any]) -> dict[str, Any]:
        found = honest(self, block)
        for tx in found["transactions"]:
            if tx["id"] == tx_id:
                body, witnesses, valid, aux = cbor2.loads(bytes.fromhex(tx["cbor"]))
                body[2] += 1  # the fee
                tx["cbor"] = cbor2.dumps([body, witnesses, valid, aux]).hex()
        return found

    monkeypatch.setattr(OgmiosBridge, "block_json", lying)
    with pytest.raises(ChainDataError, match=f"does not hash to {tx_id}"):
        ogmios.follow([since], scripts(world), since)
    monkeypatch.setattr(OgmiosBridge, "block_json", honest)
    assert tx_id in {t.hash for t in ogmios.follow([since], scripts(world), since).txs}


# --- rollbacks (last: they rewrite the chain) ----------------------------------------------


def _settled_at(world: ProtocolWorld, ogmios: OgmiosFollower) -> tuple[BlockPoint, str]:
    before = ogmios.tip()
    (escrow,) = world.lock([world.job(400)])
    tx_id = settle(world, [Settlement(escrow, ((world.providers[2].address, 400),))])
    return before, tx_id


def test_a_rollback_that_keeps_the_transaction_finds_it_again(
    world: ProtocolWorld, ogmios: OgmiosFollower
) -> None:
    before, tx_id = _settled_at(world, ogmios)
    first = ogmios.follow([before], scripts(world), before)
    (tx,) = [t for t in first.txs if t.hash == tx_id]
    world.devnet.admin("rollback", {"from_height": tx.block.height, "drop": False})
    world.devnet.wait_for_tx(tx_id)  # back in a new block

    step = ogmios.follow([first.cursor, before], scripts(world), before)
    assert step.common == before  # the old cursor's block is gone
    (again,) = [t for t in step.txs if t.hash == tx_id]
    assert again.block.hash != tx.block.hash
    assert classify(again, world.deployment) and again.inputs == tx.inputs


def test_a_rollback_that_drops_the_transaction_forgets_it(
    world: ProtocolWorld, ogmios: OgmiosFollower
) -> None:
    before, tx_id = _settled_at(world, ogmios)
    first = ogmios.follow([before], scripts(world), before)
    (tx,) = [t for t in first.txs if t.hash == tx_id]
    world.devnet.admin("rollback", {"from_height": tx.block.height, "drop": True})

    step = ogmios.follow([first.cursor, before], scripts(world), before)
    assert step.common == before
    assert tx_id not in {t.hash for t in step.txs}
