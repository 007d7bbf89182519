"""Ledger state over time: persistence across restarts, blocks, rollbacks, the mempool,
faults and the faucet."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ledger_fixtures import Harness, Wallet
from pycardano import StakeCredential, StakeRegistration, TransactionOutput

from chain.devnet import errors as e
from chain.devnet.ledger import Ledger
from chain.devnet.producer import BlockProducer
from chain.devnet.txdecode import decode_output


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def _snapshot(h: Harness, *addresses: str) -> dict[str, object]:
    ledger = h.ledger
    return {
        "utxo": dict(ledger._utxo),  # the in-memory index itself
        "stake": dict(ledger._stake),
        "tip": ledger.tip(),
        "by_address": {a: ledger.utxos_at(a) for a in addresses},
    }


def _pay(h: Harness, w: Wallet, lovelace: int = 2_000_000, **kw: object) -> bytes:
    return h.build(inputs=h.utxos(w.address), outputs=[TransactionOutput(Wallet().address,
                   lovelace)], change=w.address, signers=[w.skey], **kw)  # type: ignore[arg-type]  # fmt: skip


def test_genesis_funds_the_faucet(h: Harness) -> None:
    tip = h.ledger.tip()
    assert tip.height == 0 and tip.previous_hash is None
    faucet = h.ledger.utxos_at(h.ledger.faucet_address())
    assert len(faucet) == 8
    assert (
        sum(decode_output(r.output_cbor).coin for r in faucet) == h.ledger.genesis().faucet_lovelace
    )
    assert h.ledger.genesis().system_start > 0
    assert h.ledger.protocol_params().cost_models["PlutusV3"]


def test_blocks_advance_and_seal_the_mempool(h: Harness) -> None:
    w = h.wallet()
    first = h.ledger.tip()
    tx_hash = h.ledger.submit(_pay(h, w))
    block = h.ledger.produce_block()
    assert block is not None
    assert block.height == first.height + 1 and block.previous_hash == first.hash
    assert block.slot > first.slot and block.tx_hashes == (tx_hash,)
    assert block.epoch == block.slot // h.ledger.genesis().epoch_length
    assert h.ledger.mempool() == []
    record = h.ledger.transaction(tx_hash)
    assert record is not None and record.block_hash == block.hash and record.index == 0
    assert block.fees == record.fee and block.size == record.size
    empty = h.ledger.produce_block()
    assert empty is not None and empty.tx_hashes == () and empty.hash != block.hash
    assert h.ledger.block(block.hash) == h.ledger.block(block.height) == block


def test_block_size_limit_leaves_the_rest_queued(tmp_path: Path) -> None:
    h = Harness(tmp_path, max_block_size=700)
    try:
        w = h.wallet(100_000_000)
        hashes = [h.ledger.fund(str(w.address), 2_000_000) for _ in range(4)]
        block = h.ledger.produce_block()
        assert block is not None
        assert 0 < len(block.tx_hashes) < 4 and block.size <= 700
        assert list(block.tx_hashes) == hashes[: len(block.tx_hashes)]
        assert h.ledger.mempool() == hashes[len(block.tx_hashes) :]
    finally:
        h.close()


def test_restart_keeps_chain_and_mempool(h: Harness) -> None:
    w = h.wallet(assets={"4e5458": 7})
    queued = h.ledger.submit(_pay(h, w))
    before = _snapshot(h, str(w.address), h.ledger.faucet_address())
    faucet = h.ledger.faucet_address()
    genesis = h.ledger.genesis()
    h.reopen()
    after = _snapshot(h, str(w.address), h.ledger.faucet_address())
    assert after == before
    assert h.ledger.faucet_address() == faucet and h.ledger.genesis() == genesis
    assert h.ledger.mempool() == [queued]
    block = h.ledger.produce_block()
    assert block is not None and block.tx_hashes == (queued,)


def test_chained_mempool_txs_survive_a_restart(h: Harness) -> None:
    w = h.wallet()
    hashes = [h.ledger.fund(str(w.address), 3_000_000) for _ in range(12)]
    h.reopen()
    assert h.ledger.mempool() == hashes
    h.block()
    assert h.ledger.mempool() == []
    assert len(h.ledger.utxos_at(str(w.address))) == 13


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_rollback_restores_state_and_requeues_txs(h: Harness, depth: int) -> None:
    w = h.wallet()
    snapshots = []
    block_txs: list[str] = []
    for i in range(3):
        snapshots.append(_snapshot(h, str(w.address)))
        kw: dict[str, object] = {}
        if i == 2:  # the last block also registers a stake credential
            kw = dict(certificates=[StakeRegistration(StakeCredential(
                w.stake_skey.to_verification_key().hash()))], deposits=2_000_000)  # fmt: skip
        block_txs.append(h.ledger.submit(_pay(h, w, **kw)))  # type: ignore[arg-type]
        h.block()
    assert h.ledger.reward_balance(str(w.stake_address)) == 0
    queued = h.ledger.fund(str(w.address), 5_000_000)
    tip = h.ledger.tip()

    rolled = h.ledger.rollback(depth)

    assert rolled == block_txs[3 - depth :]
    assert h.ledger.tip().height == tip.height - depth
    target = snapshots[3 - depth]
    current = _snapshot(h, str(w.address))
    assert current["utxo"] == target["utxo"] and current["stake"] == target["stake"]
    assert current["tip"] == target["tip"] and current["by_address"] == target["by_address"]
    assert h.ledger.reward_balance(str(w.stake_address)) is None
    for tx_hash in rolled:
        assert h.ledger.transaction(tx_hash) is None
    assert h.ledger.mempool() == [*rolled, queued]
    # the in-memory index equals what a fresh open rebuilds from SQLite
    h.reopen()
    assert _snapshot(h, str(w.address))["utxo"] == target["utxo"]
    assert h.ledger.mempool() == [*rolled, queued]
    # and the requeued transactions confirm again
    h.block()
    assert h.ledger.mempool() == []
    for tx_hash in [*rolled, queued]:
        assert h.ledger.transaction(tx_hash) is not None
    assert h.ledger.reward_balance(str(w.stake_address)) == 0


def test_rollback_dropping_txs_drops_their_dependants(h: Harness) -> None:
    w = h.wallet()
    first = h.ledger.submit(_pay(h, w))
    h.block()
    dependant = h.ledger.submit(_pay(h, w))  # spends the change of `first`
    assert h.ledger.mempool() == [dependant]
    assert h.ledger.rollback(1, drop_txs=True) == [first]
    assert h.ledger.mempool() == []
    assert h.ledger.transaction(first) is None
    h.reopen()
    assert h.ledger.mempool() == []


def test_rollback_never_removes_genesis(h: Harness) -> None:
    h.wallet()
    h.ledger.rollback(10)
    assert h.ledger.tip().height == 0
    assert len(h.ledger.utxos_at(h.ledger.faucet_address())) == 8
    with pytest.raises(ValueError):
        h.ledger.rollback(0)


def test_rollback_from_a_height_undoes_it_however_many_blocks_came_after(h: Harness) -> None:
    # A caller that reads the tip and then asks for a depth misses the block sealed in
    # between; a height is checked against the tip under the ledger's lock.
    w = h.wallet()
    first = h.ledger.submit(_pay(h, w))
    h.block()
    target = h.ledger.tip().height
    for _ in range(3):
        h.block()  # blocks sealed after the caller looked
    assert h.ledger.rollback_from(target, drop_txs=True) == [first]
    assert h.ledger.tip().height == target - 1
    assert h.ledger.transaction(first) is None
    with pytest.raises(ValueError):
        h.ledger.rollback_from(target + 10)
    with pytest.raises(ValueError):
        h.ledger.rollback_from(0)


def test_drop_mempool(h: Harness) -> None:
    w = h.wallet()
    hashes = [h.ledger.fund(str(w.address), 2_000_000) for _ in range(3)]
    assert h.ledger.drop_mempool() == hashes
    assert h.ledger.mempool() == []
    block = h.ledger.produce_block()
    assert block is not None and block.tx_hashes == ()
    h.reopen()
    assert h.ledger.mempool() == []


def test_pause_and_resume(h: Harness) -> None:
    w = h.wallet()
    h.ledger.pause()
    assert h.ledger.paused()
    queued = h.ledger.submit(_pay(h, w))
    assert h.ledger.produce_block() is None
    assert h.ledger.mempool() == [queued]
    h.ledger.resume()
    assert not h.ledger.paused()
    block = h.ledger.produce_block()
    assert block is not None and block.tx_hashes == (queued,)


def test_expired_mempool_tx_is_dropped_when_sealing(h: Harness) -> None:
    w = h.wallet()
    ttl = h.current_slot() + 1
    doomed = h.ledger.submit(_pay(h, w, ttl=ttl))
    deadline = time.time() + 5
    while h.ledger.genesis().slot_at(time.time()) < ttl and time.time() < deadline:
        time.sleep(0.05)
    block = h.ledger.produce_block()
    assert block is not None and doomed not in block.tx_hashes
    assert h.ledger.mempool() == []
    assert h.ledger.transaction(doomed) is None


def test_fund_mints_tokens_under_the_faucet_policy(h: Harness) -> None:
    w = Wallet()
    tx_hash = h.ledger.fund(str(w.address), 3_000_000, {"4e5458": 1000, "": 1})
    h.block()
    policy = h.ledger.faucet_policy_id()
    utxos = h.ledger.utxos_at(str(w.address), policy + "4e5458")
    assert len(utxos) == 1 and utxos[0].tx_hash == tx_hash
    out = decode_output(utxos[0].output_cbor)
    assert out.coin == 3_000_000
    assert out.assets == {bytes.fromhex(policy) + b"NTX": 1000, bytes.fromhex(policy): 1}
    asset = h.ledger.asset(policy + "4e5458")
    assert asset is not None and asset.quantity == 1000 and asset.mint_or_burn_count == 1
    assert h.ledger.utxos_at(str(w.address), policy + "00") == []
    record = h.ledger.transaction(tx_hash)
    assert record is not None
    assert h.ledger.script(policy) is not None and h.ledger.script(policy).type == "timelock"  # type: ignore[union-attr]
    inputs = h.ledger.tx_inputs(tx_hash)
    assert [i.address for i in inputs] == [h.ledger.faucet_address()]
    assert h.ledger.address_known(str(w.address))
    assert [t.hash for t in h.ledger.address_txs(str(w.address))] == [tx_hash]


def test_fund_rejects_outputs_below_min_ada(h: Harness) -> None:
    with pytest.raises(e.OutputTooSmall):
        h.ledger.fund(str(Wallet().address), 100_000)
    with pytest.raises(ValueError):
        h.ledger.fund("not-an-address", 2_000_000)


def test_many_funds_in_one_block_from_several_threads(h: Harness) -> None:
    wallets = [Wallet() for _ in range(30)]
    errors: list[BaseException] = []

    def fund(w: Wallet) -> None:
        try:
            h.ledger.fund(str(w.address), 2_000_000)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=fund, args=(w,)) for w in wallets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    block = h.ledger.produce_block()
    assert block is not None and len(block.tx_hashes) == 30
    assert all(len(h.ledger.utxos_at(str(w.address))) == 1 for w in wallets)


def test_producer_thread_makes_blocks_and_survives_failures(h: Harness) -> None:
    class Flaky:
        def __init__(self, ledger: Ledger) -> None:
            self.ledger = ledger
            self.calls = 0

        def produce_block(self) -> object:
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("transient")
            return self.ledger.produce_block()

    flaky = Flaky(h.ledger)
    producer = BlockProducer(flaky, 0.05)  # type: ignore[arg-type]
    producer.start()
    try:
        deadline = time.time() + 10
        while h.ledger.tip().height < 3 and time.time() < deadline:
            time.sleep(0.02)
    finally:
        producer.stop()
    assert h.ledger.tip().height >= 3
    assert producer.failures == 1 and not producer.running
