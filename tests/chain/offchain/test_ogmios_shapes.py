"""The node backend's pure parts, without a chain: Ogmios' slot clock across eras, Kupo's
value shapes, the ledger's input order spend redeemers point into, and transaction
metadata rendered as Blockfrost renders it (what the auditor reads)."""

from __future__ import annotations

import cbor2
import pytest

from chain.offchain.escrow_terms import kupo_assets as _assets
from chain.offchain.follow.model import ChainDataError
from chain.offchain.follow.ogmios import tx_inputs
from chain.offchain.follow.ogmios_history import _metadatum
from chain.offchain.follow.ogmios_rpc import SlotClock, point_of

MAINNET_ERAS = [
    # Byron: 20 s slots; Shelley onwards: 1 s (mainnet's era summaries, abridged).
    {"start": {"time": {"seconds": 0}, "slot": 0, "epoch": 0},
     "parameters": {"slotLength": {"milliseconds": 20000}}},
    {"start": {"time": {"seconds": 89856000}, "slot": 4492800, "epoch": 208},
     "parameters": {"slotLength": {"milliseconds": 1000}}},
]  # fmt: skip


def test_the_slot_clock_follows_each_eras_slot_length() -> None:
    clock = SlotClock.of("2017-09-23T21:44:51Z", MAINNET_ERAS)
    start = 1506203091
    assert clock.time(0) == start
    assert clock.time(10) == start + 200  # Byron
    assert clock.time(4492800) == start + 89856000
    # A Shelley-era slot: mainnet's well-known conversion (slot 4924800 = epoch 209 start).
    assert clock.time(4924800) == 1596491091
    with pytest.raises(ChainDataError):
        SlotClock.of("2017-09-23T21:44:51Z", [])
    with pytest.raises(ChainDataError):
        SlotClock.of("not a time", MAINNET_ERAS)


def test_points_and_kupo_assets() -> None:
    assert point_of("origin") is None
    assert point_of({"slot": 5, "id": "ab" * 32}).slot == 5  # type: ignore[union-attr]
    with pytest.raises(ChainDataError):
        point_of({"slot": "x"})
    policy = "11" * 28
    assert _assets({f"{policy}.4e5458": 7, policy: 2}) == {f"{policy}4e5458": 7, policy: 2}


def test_inputs_are_in_ledger_order_whatever_the_body_lists() -> None:
    a, b = bytes.fromhex("ff" * 32), bytes.fromhex("00" * 32)
    listed = [[a, 0], [b, 3], [b, 1]]
    for inputs in (listed, cbor2.CBORTag(258, listed)):  # plain array, Conway's tagged set
        body = {0: inputs, 1: [], 2: 0}
        raw = cbor2.dumps([body, {}, True, None])
        assert tx_inputs(raw) == [("00" * 32, 1), ("00" * 32, 3), ("ff" * 32, 0)]
    with pytest.raises(ChainDataError):
        tx_inputs(b"\x01\x02")


def test_metadata_reads_as_blockfrost_renders_it() -> None:
    memo = {"msg": ["proofnet settlement"], "root": b"\x11" * 2, "n": 3}
    assert _metadatum(memo) == {"msg": ["proofnet settlement"], "root": "0x1111", "n": 3}
