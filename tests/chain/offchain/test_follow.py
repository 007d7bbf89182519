"""Following a deployment on a running devnet: what the follower lists and what the
classifier makes of it, honest transactions against the forgeries an outsider can post.

One deployment per module; each test follows from the tip it found when it began, so it
sees only its own transactions. The rollback tests run last (they rewrite the chain).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import cbor2
import httpx
import pytest
from protocol_fixtures import NTX_NAME, ProtocolWorld, protocol_world, wallet
from pycardano import MultiAsset

from chain.offchain.builders import assembly as A
from chain.offchain.builders.deploy import OracleSetup, deploy
from chain.offchain.builders.mint import mint_test_ntx
from chain.offchain.builders.onchain import datum_cbor, out_ref_text
from chain.offchain.builders.refund import build_cancel, build_refund
from chain.offchain.builders.settle import Settlement, batch_metadata, build_settle_batch
from chain.offchain.follow.blockfrost import BlockfrostFollower
from chain.offchain.follow.classify import (
    CANCEL,
    DEFAULT_CLASSIFIERS,
    PAYOUT,
    REFUND,
    Movement,
    classify,
    watched_scripts,
)
from chain.offchain.follow.decode import decode_tx
from chain.offchain.follow.model import BlockPoint, ChainDataError, FollowStep
from chain.offchain.follow.reader import follower_for


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProtocolWorld]:
    with protocol_world(tmp_path_factory.mktemp("follow")) as w:
        yield w


@pytest.fixture
def follower(world: ProtocolWorld) -> BlockfrostFollower:
    found = follower_for(world.context)
    assert isinstance(found, BlockfrostFollower)
    return found


def follow_from(
    world: ProtocolWorld, follower: BlockfrostFollower, since: BlockPoint
) -> FollowStep:
    scripts = watched_scripts(world.deployment, DEFAULT_CLASSIFIERS)
    return follower.follow([since], scripts, since)


def movements(world: ProtocolWorld, step: FollowStep) -> list[Movement]:
    return [m for tx in step.txs for m in classify(tx, world.deployment)]


def blockfrost(world: ProtocolWorld, path: str) -> Any:
    response = httpx.get(f"{world.devnet.url}{path}", timeout=10)
    response.raise_for_status()
    return response.json()


def settle(world: ProtocolWorld, settlements: list[Settlement], **kw: Any) -> str:
    quorum = world.oracle_quorum
    batch = build_settle_batch(
        world.context,
        kw.pop("deployment", world.deployment),
        settlements,
        b"\x11" * 32,
        b"follow",
        [o.pkh for o in quorum],
        quorum[0].address,
        **kw,
    )
    return world.submit(A.sign(batch.built, [o.signing_key for o in quorum]))


def test_a_settlement_is_read_as_payouts_and_the_remainder(
    world: ProtocolWorld, follower: BlockfrostFollower
) -> None:
    since = follower.tip()
    p = world.providers
    escrows = world.lock([world.job(1_000), world.job(500)])
    tx_id = settle(
        world,
        [
            Settlement(escrows[0], ((p[0].address, 600),)),
            Settlement(escrows[1], ((p[1].address, 100), (p[2].address, 50))),
        ],
    )
    step = follow_from(world, follower, since)
    assert step.common == since and [tx.hash for tx in step.txs] == [tx_id]
    header = blockfrost(world, f"/txs/{tx_id}")
    tx = step.txs[0]
    assert (tx.block.height, tx.block.hash) == (header["block_height"], header["block"])
    assert step.cursor.height >= tx.block.height
    found = {(m.kind, m.address, m.ntx, m.escrow_ref) for m in movements(world, step)}
    first, second = (out_ref_text(e.input) for e in escrows)
    submitter = str(world.submitter.address)
    assert found == {
        (PAYOUT, str(p[0].address), 600, first),
        (REFUND, submitter, 400, first),
        (PAYOUT, str(p[1].address), 100, second),
        (PAYOUT, str(p[2].address), 50, second),
        (REFUND, submitter, 350, second),
    }
    for m in movements(world, step):
        assert m.tx_hash == tx_id and m.action == "settle"
        escrow = next(e for e in escrows if out_ref_text(e.input) == m.escrow_ref)
        job_id = bytes(cbor2.loads(datum_cbor(escrow.output.datum)).value[1]).hex()
        assert m.job_id == job_id
    # Nothing after the cursor: a second step finds nothing new.
    again = follow_from(world, follower, step.cursor)
    assert again.common == step.cursor and again.txs == ()


def test_refund_and_cancel_are_read_as_returns(
    world: ProtocolWorld, follower: BlockfrostFollower
) -> None:
    since = follower.tip()
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
    cancel_tx = world.submit(
        A.sign(cancel.built, [world.submitter.signing_key, *(o.signing_key for o in quorum)])
    )
    stranger = wallet(301)
    world.fund(stranger)
    deadline = cbor2.loads(datum_cbor(late.output.datum)).value[7]
    world.wait_until_chain_ms(deadline + 1_000)
    refund = build_refund(world.context, world.deployment, [late], stranger.address)
    refund_tx = world.submit(A.sign(refund.built, [stranger.signing_key]))

    found = {
        (m.kind, m.action, m.tx_hash, m.escrow_ref, m.ntx, m.address)
        for m in movements(world, follow_from(world, follower, since))
    }
    submitter = str(world.submitter.address)
    assert found == {
        (CANCEL, "cancel", cancel_tx, out_ref_text(cancelled.input), 800, submitter),
        (REFUND, "refund", refund_tx, out_ref_text(late.input), 700, submitter),
    }


def test_an_outsiders_memo_and_payment_are_not_earnings(
    world: ProtocolWorld, follower: BlockfrostFollower
) -> None:
    """A 'proofnet settlement' memo (label 674, the real settlement's layout) on a
    transaction paying a provider a token named NTX: it spends no escrow, so the follower
    does not even list it, and read directly it classifies as nothing."""
    since = follower.tip()
    outsider = wallet(302)
    world.fund(outsider)
    tx_id, minted = mint_test_ntx(world.context, outsider, outsider.address, 5_000, NTX_NAME)
    world.devnet.wait_for_tx(tx_id)
    provider = world.providers[0]
    fake = MultiAsset.from_primitive({minted.policy_id: {NTX_NAME: 5_000}})
    plan = A.TxPlan(
        change_address=outsider.address,
        outputs=[A.output_with_min_ada(world.context, provider.address, fake)],
        metadata=batch_metadata(b"batch-forged", b"\x11" * 32, b"\x22" * 32, 1),
    )
    built = A.finalize(world.context, plan, outsider.utxos(world.context))
    forged = world.submit(A.sign(built, [outsider.signing_key]))
    meta = {int(m["label"]) for m in blockfrost(world, f"/txs/{forged}/metadata")}
    assert 674 in meta

    step = follow_from(world, follower, since)
    assert forged not in {tx.hash for tx in step.txs} and movements(world, step) == []
    assert classify(follower.transaction(forged), world.deployment) == ()


def test_an_escrow_of_a_fake_ntx_is_not_this_deployments(
    world: ProtocolWorld, follower: BlockfrostFollower
) -> None:
    """An outsider locks his own token at the shared escrow script with a datum naming this
    deployment's batch script and configuration, and refunds it: the spend is listed (same
    script) but the datum does not trust this deployment's NTX, so nothing is recorded."""
    since = follower.tip()
    outsider = wallet(303)
    world.fund(outsider)
    tx_id, minted = mint_test_ntx(world.context, outsider, outsider.address, 5_000, NTX_NAME)
    world.devnet.wait_for_tx(tx_id)
    counterfeit = dataclasses.replace(world.deployment, ntx_policy=minted.policy_id.hex())
    job = world.job(900, deadline_in_ms=8_000, submitter=outsider)
    from chain.offchain.builders.lock import lock_escrows

    locked = lock_escrows(world.context, counterfeit, [job], outsider, min_margin_ms=1_000)
    world.devnet.wait_for_tx(locked.tx_id)
    (escrow,) = world.utxos_of(locked.tx_id, world.deployment.escrow_address, 1)
    world.wait_until_chain_ms(job.deadline + 1_000)
    refund = build_refund(world.context, counterfeit, [escrow], outsider.address)
    refund_tx = world.submit(A.sign(refund.built, [outsider.signing_key]))

    step = follow_from(world, follower, since)
    assert refund_tx in {tx.hash for tx in step.txs}  # listed: the escrow script ran
    assert movements(world, step) == []
    # The honest twin: under the deployment it does trust, the same refund is a refund.
    assert [m.kind for tx in step.txs for m in classify(tx, counterfeit)] == [REFUND]


def test_a_settlement_of_another_deployment_is_not_ours(
    world: ProtocolWorld, follower: BlockfrostFollower
) -> None:
    """Every deployment shares the escrow script: a second deployment's settlement is
    listed, but only that deployment reads payouts in it."""
    other_admin = wallet(304)
    world.fund(other_admin, 300_000_000)
    setup = OracleSetup(tuple(o.pkh for o in world.oracles), world.threshold, (other_admin.pkh,), 1)
    other = deploy(
        world.context,
        other_admin,
        setup,
        bytes.fromhex(world.deployment.ntx_policy),
        NTX_NAME,
    )
    assert other.batch_hash != world.deployment.batch_hash
    assert other.escrow_hash == world.deployment.escrow_hash
    since = follower.tip()
    from chain.offchain.builders.lock import lock_escrows

    job = world.job(1_200)
    locked = lock_escrows(world.context, other, [job], world.submitter)
    world.devnet.wait_for_tx(locked.tx_id)
    (escrow,) = world.utxos_of(locked.tx_id, other.escrow_address, 1)
    provider = world.providers[1]
    tx_id = settle(world, [Settlement(escrow, ((provider.address, 1_000),))], deployment=other)

    step = follow_from(world, follower, since)
    assert tx_id in {tx.hash for tx in step.txs}
    assert movements(world, step) == []
    theirs = [m for tx in step.txs for m in classify(tx, other)]
    assert {(m.kind, m.ntx) for m in theirs} == {(PAYOUT, 1_000), (REFUND, 200)}


def test_a_long_backlog_is_read_in_bounded_steps(world: ProtocolWorld) -> None:
    """At most `max_txs` transactions a step, whole blocks only: the cursor stops below the
    first block that did not fit, and the next step resumes there."""
    small = BlockfrostFollower(world.context.api, max_txs=1)
    since = small.tip()
    p = world.providers
    settled = []
    for amount in (10, 20):
        (escrow,) = world.lock([world.job(amount)])
        settled.append(settle(world, [Settlement(escrow, ((p[0].address, amount),))]))
    first = follow_from(world, small, since)
    assert [tx.hash for tx in first.txs] == settled[:1]
    assert (
        first.cursor.height
        < world.context.api.transaction(settled[1], return_type="json")["block_height"]
    )
    second = follow_from(world, small, first.cursor)
    assert [tx.hash for tx in second.txs] == settled[1:]


def test_a_backend_that_lies_about_a_transaction_is_refused(
    world: ProtocolWorld, follower: BlockfrostFollower
) -> None:
    p = world.providers
    (escrow,) = world.lock([world.job(300)])
    tx_id = settle(world, [Settlement(escrow, ((p[3].address, 300),))])
    header = blockfrost(world, f"/txs/{tx_id}")
    utxos = blockfrost(world, f"/txs/{tx_id}/utxos")
    cbor = blockfrost(world, f"/txs/{tx_id}/cbor")["cbor"]
    honest = decode_tx(header, utxos, cbor)
    assert [m.kind for m in classify(honest, world.deployment)] == [PAYOUT, REFUND]

    # Another transaction's body under this id.
    lock_cbor = blockfrost(world, f"/txs/{escrow.input.transaction_id}/cbor")["cbor"]
    with pytest.raises(ChainDataError, match="does not hash"):
        decode_tx(header, utxos, lock_cbor)
    # Spent outputs that are not the body's inputs (an escrow the body never spent).
    forged = dict(
        utxos, inputs=[dict(i, output_index=i["output_index"] + 7) for i in utxos["inputs"]]
    )
    with pytest.raises(ChainDataError, match="inputs differ"):
        decode_tx(header, forged, cbor)


def test_a_transaction_whose_scripts_failed_moves_nothing(
    world: ProtocolWorld, follower: BlockfrostFollower
) -> None:
    """The same body with is_valid false (its scripts failed: only collateral moved, none of
    its outputs exist) is not a settlement, whether the flag comes from the CBOR or the
    backend's `valid_contract`."""
    (escrow,) = world.lock([world.job(250)])
    tx_id = settle(world, [Settlement(escrow, ((world.providers[0].address, 250),))])
    header = blockfrost(world, f"/txs/{tx_id}")
    utxos = blockfrost(world, f"/txs/{tx_id}/utxos")
    raw = cbor2.loads(bytes.fromhex(blockfrost(world, f"/txs/{tx_id}/cbor")["cbor"]))
    body, witnesses, _valid, aux = raw
    failed_cbor = cbor2.dumps([body, witnesses, False, aux]).hex()
    honest_cbor = cbor2.dumps([body, witnesses, True, aux]).hex()
    assert classify(decode_tx(header, utxos, honest_cbor), world.deployment)
    assert classify(decode_tx(header, utxos, failed_cbor), world.deployment) == ()
    failed_header = dict(header, valid_contract=False)
    assert classify(decode_tx(failed_header, utxos, honest_cbor), world.deployment) == ()


# --- rollbacks (last: they rewrite the chain) ----------------------------------------------


def _settled_at(world: ProtocolWorld, follower: BlockfrostFollower) -> tuple[BlockPoint, str]:
    before = follower.tip()
    (escrow,) = world.lock([world.job(400)])
    tx_id = settle(world, [Settlement(escrow, ((world.providers[2].address, 400),))])
    return before, tx_id


def test_a_rollback_that_keeps_the_transaction_finds_it_again(
    world: ProtocolWorld, follower: BlockfrostFollower
) -> None:
    before, tx_id = _settled_at(world, follower)
    first = follow_from(world, follower, before)
    (tx,) = [t for t in first.txs if t.hash == tx_id]
    world.devnet.admin("rollback", {"from_height": tx.block.height, "drop": False})
    world.devnet.wait_for_tx(tx_id)  # back in a new block

    scripts = watched_scripts(world.deployment, DEFAULT_CLASSIFIERS)
    step = follower.follow([first.cursor, before], scripts, before)
    assert step.common == before  # the old cursor's block is gone
    (again,) = [t for t in step.txs if t.hash == tx_id]
    assert again.block.hash != tx.block.hash
    assert [m.kind for m in classify(again, world.deployment)] == [PAYOUT, REFUND]


def test_a_rollback_that_drops_the_transaction_forgets_it(
    world: ProtocolWorld, follower: BlockfrostFollower
) -> None:
    before, tx_id = _settled_at(world, follower)
    first = follow_from(world, follower, before)
    (tx,) = [t for t in first.txs if t.hash == tx_id]
    world.devnet.admin("rollback", {"from_height": tx.block.height, "drop": True})

    scripts = watched_scripts(world.deployment, DEFAULT_CLASSIFIERS)
    step = follower.follow([first.cursor, before], scripts, before)
    assert step.common == before
    assert tx_id not in {t.hash for t in step.txs}
