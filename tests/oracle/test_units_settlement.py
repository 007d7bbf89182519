"""Settling the escrow of a topology job (in-memory chain and builder): its unit claims wait
until the job is over and every completed unit is decided (or a grace period passed, or the
deadline nears), then go in one batch together, never split; the intent log keeps one live
intent per escrow whatever the number of its attestations."""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType

import cbor2
import pytest
from oracle_fixtures import FakeFeed, escrow_datum, job_spec
from pycardano import Address, Network, TransactionOutput, Value, VerificationKeyHash
from settlement_fixtures import (
    FakeChain,
    add_verified,
    make_engine_for,
    oracle_engine,
    statuses,
)
from sqlalchemy.engine import Engine
from sqlmodel import Session
from unit_fixtures import relay_topology, topology_spec

from oracle.inputs.feed import JobInfo, LeaseInfo
from oracle.inputs.feed_units import UnitInfo
from oracle.models import RECEIVED, REJECTED, VERIFIED, AttestationRecord, escrow_ref, payable_key
from oracle.settlement.engine import SettlementEngine
from oracle.settlement.models import IntentState
from oracle.settlement.ports import OutRef
from oracle.settlement.readiness import JobEndReadiness, ReadinessPolicy
from proofnet.messages import merkle
from proofnet.messages.topology import plan

_n = itertools.count(1)


def add_unit(
    engine: Engine,
    escrow: OutRef,
    job_id: str,
    unit: int,
    *,
    amount: int = 100,
    status: str = VERIFIED,
    age_s: float = 0.0,
    nonce: str = "cd" * 32,
) -> int:
    """A unit attestation row as the intake leaves it (verified, received or rejected)."""
    n = next(_n)
    stamp = datetime.now(UTC) - timedelta(seconds=age_s)
    # The attested nonce is the completing lease's (`LEASE`), as the intake checked.
    payload = json.dumps({"n": n, "escrow": str(escrow), "unit": unit, "nonce": nonce}).encode()
    ref = escrow_ref(escrow.tx_id, escrow.index)
    row = AttestationRecord(
        job_id=job_id,
        escrow_tx_id=escrow.tx_id,
        escrow_index=escrow.index,
        escrow_ref=ref,
        payable_escrow=payable_key(ref, unit) if status == VERIFIED else None,
        worker_key=f"{n:064x}",
        payout_address=f"provider-{str(escrow)[-8:]}",
        amount=amount,
        cose=cbor2.dumps([b"p", {}, payload, bytes(64)]),
        leaf_hash=merkle.leaf_hash(payload).hex(),
        status=status,
        received_at=stamp,
        updated_at=stamp,
        unit_index=unit,
        unit_output=f"{unit + 1:064x}",
    )
    with Session(engine) as session:
        session.add(row)
        session.commit()
        assert row.id is not None
        return row.id


LEASE = LeaseInfo("ab" * 32, "addr_test1", "cd" * 32, 1, 0, 1, 1)


def job_with_units(status: str, completed: tuple[int, ...]) -> JobInfo:
    """A 3-stage relay with evaluations (units 0..4), units in `completed` completed."""
    spec = topology_spec(relay_topology(), seed=11)
    assert spec.topology is not None
    units = tuple(
        UnitInfo(
            u.index,
            u.kind,
            "completed" if u.index in completed else "cancelled",
            LEASE if u.index in completed else None,
            (),
            None,
            MappingProxyType({}),
            MappingProxyType({}),
        )
        for u in plan(spec.topology)
    )
    return JobInfo(spec.job_id, spec, status, None, None, units=units)


@dataclasses.dataclass
class Clock:
    now: float = dataclasses.field(default_factory=time.time)

    def __call__(self) -> float:
        return self.now


@dataclasses.dataclass
class Setup:
    db: Engine
    chain: FakeChain
    feed: FakeFeed
    clock: Clock
    engine: SettlementEngine
    escrow: OutRef
    job: JobInfo

    def set_job(self, status: str, completed: tuple[int, ...]) -> None:
        job = job_with_units(status, completed)
        self.job = job
        self.feed.jobs[job.job_id] = job


def _setup(tmp_path: Path, chain: FakeChain | None = None, **policy: float) -> Setup:
    db = oracle_engine(tmp_path)
    chain = chain or FakeChain()
    feed = FakeFeed()
    clock = Clock()
    readiness = JobEndReadiness(
        feed, chain, db, ReadinessPolicy(**{"recheck_s": 0.0, **policy}), clock
    )
    engine = make_engine_for(db, chain, batch_size=4)
    engine.readiness = readiness
    job = job_with_units("running", (0, 1))
    feed.jobs[job.job_id] = job
    return Setup(db, chain, feed, clock, engine, chain.add_escrow(), job)


def _settle(s: Setup) -> None:
    for _ in range(6):
        s.engine.tick()
        s.chain.produce_block()
    s.engine.tick()


def test_unit_claims_wait_for_the_job_then_settle_in_one_entry(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    single = s.chain.add_escrow()
    single_id = add_verified(s.db, single, amount=50)
    units = [add_unit(s.db, s.escrow, s.job.job_id, i, amount=1000) for i in (0, 1)]
    _settle(s)
    # The single-unit job's claim went its own way; the running job's claims wait.
    assert statuses(s.db)[single_id] == "settled"
    assert {statuses(s.db)[i] for i in units} == {"verified"}

    s.set_job("stopped", (0, 1, 3))
    units.append(add_unit(s.db, s.escrow, s.job.job_id, 3, amount=100, status=RECEIVED))
    s.engine.tick()  # unit 3 is completed but its attestation is still being verified
    assert not s.chain.mempool and {statuses(s.db)[i] for i in units[:2]} == {"verified"}

    with Session(s.db) as session:
        row = session.get(AttestationRecord, units[2])
        assert row is not None
        row.status, row.payable_escrow = VERIFIED, payable_key(str(s.escrow), 3)
        session.add(row)
        session.commit()
    batch = s.engine.tick()
    assert batch is not None
    (tx,) = s.chain.mempool.values()
    assert tx.inputs == (str(s.escrow),) * 3  # one escrow, one entry, three payouts
    assert [n for _, n in tx.payouts] == [1000, 1000, 100]
    items = s.engine.intents.items(batch)
    assert [i.escrow_ref for i in items] == [str(s.escrow)] * 3
    # Exactly one item holds the escrow live: the UNIQUE column allows one live intent.
    assert [i.live_escrow for i in items] == [str(s.escrow), None, None]
    _settle(s)
    assert {statuses(s.db)[i] for i in units} == {"settled"}


def test_a_rejected_unit_counts_as_decided(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    s.set_job("completed", (0, 1, 2, 3, 4))
    ids = [add_unit(s.db, s.escrow, s.job.job_id, i) for i in (0, 1, 2, 4)]
    forged = add_unit(s.db, s.escrow, s.job.job_id, 3, status=REJECTED)
    assert s.engine.tick() is not None
    # But not while another attestation of that unit is still being verified.
    s2 = _setup(tmp_path / "second")
    s2.set_job("completed", (0, 1))
    add_unit(s2.db, s2.escrow, s2.job.job_id, 0)
    add_unit(s2.db, s2.escrow, s2.job.job_id, 1, status=REJECTED)
    pending = add_unit(s2.db, s2.escrow, s2.job.job_id, 1, status=RECEIVED)
    assert s2.engine.tick() is None
    assert statuses(s2.db)[pending] == RECEIVED
    assert statuses(s.db)[forged] == REJECTED and len(ids) == 4


def test_grace_period_bounds_the_wait_for_missing_attestations(tmp_path: Path) -> None:
    s = _setup(tmp_path, grace_s=600.0)
    ids = [add_unit(s.db, s.escrow, s.job.job_id, i) for i in (0, 1)]
    s.set_job("failed", (0, 1, 2))  # unit 2's provider never sent its attestation
    assert s.engine.tick() is None
    s.clock.now += 599
    assert s.engine.tick() is None
    s.clock.now += 2
    assert s.engine.tick() is not None
    (tx,) = s.chain.mempool.values()
    assert len(tx.payouts) == 2 and statuses(s.db)[ids[0]] == "batched"


def test_grace_starts_when_the_oracle_first_saw_the_job_over_and_survives_restarts(
    tmp_path: Path,
) -> None:
    s = _setup(tmp_path, grace_s=100.0)
    add_unit(s.db, s.escrow, s.job.job_id, 0)
    s.set_job("cancelled", (0, 1))
    assert s.engine.tick() is None
    # A new process (new readiness object, same database) keeps the first sighting.
    readiness = JobEndReadiness(
        s.feed, s.chain, s.db, ReadinessPolicy(grace_s=100.0, recheck_s=0.0), s.clock
    )
    s.engine.readiness = readiness
    s.clock.now += 101
    assert s.engine.tick() is not None


class DeadlineChain(FakeChain):
    """A chain whose escrows carry a real EscrowDatum with `deadline_ms`."""

    deadline_ms: int = 0

    def output_cbor(self, ref: OutRef) -> bytes | None:
        datum = escrow_datum(job_spec(seed=1).job_id, deadline_ms=self.deadline_ms)
        address = Address(VerificationKeyHash(b"\x01" * 28), network=Network.TESTNET)
        return bytes(TransactionOutput(address, Value(2_000_000), datum=datum).to_cbor())


def test_deadline_near_settles_what_is_verified_of_a_running_job(tmp_path: Path) -> None:
    chain = DeadlineChain()
    chain.deadline_ms = int((time.time() + 3600) * 1000)
    s = _setup(tmp_path, chain=chain, deadline_margin_s=1800.0)
    add_unit(s.db, s.escrow, s.job.job_id, 0)
    assert s.engine.tick() is None  # running, deadline an hour away
    s.clock.now += 1801
    assert s.engine.tick() is not None  # 29 minutes left: pay what is verified


def test_without_a_readiness_rule_unit_claims_never_settle(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    s.engine.readiness = None
    s.set_job("completed", (0, 1))
    ids = [add_unit(s.db, s.escrow, s.job.job_id, i) for i in (0, 1)]
    _settle(s)
    assert {statuses(s.db)[i] for i in ids} == {"verified"}


def test_an_escrows_claims_are_never_split_across_batches(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    s.set_job("completed", (0, 1, 2, 3, 4))
    # Five unit claims with a batch size of four, plus an older single-unit claim.
    single = add_verified(s.db, s.chain.add_escrow(), age_s=60)
    units = [add_unit(s.db, s.escrow, s.job.job_id, i) for i in range(5)]
    first = s.engine.tick()
    assert first is not None
    (tx,) = s.chain.mempool.values()
    assert len(tx.inputs) == 1 and statuses(s.db)[single] == "batched"
    _settle(s)
    # The escrow went alone, all five together, though larger than a batch.
    confirmed = [tx for block in s.chain.blocks for tx in block]
    by_escrow = [tx for tx in confirmed if str(s.escrow) in tx.inputs]
    assert len(by_escrow) == 1 and len(by_escrow[0].payouts) == 5
    assert {statuses(s.db)[i] for i in units} == {"settled"}


def test_dropped_and_revived_intents_keep_one_live_item_per_escrow(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    s.set_job("completed", (0, 1))
    ids = [add_unit(s.db, s.escrow, s.job.job_id, i) for i in (0, 1)]
    batch = s.engine.tick()
    assert batch is not None
    s.engine.intents.drop(batch, "test")
    assert {statuses(s.db)[i] for i in ids} == {"verified"}
    with Session(s.db) as session:
        rows = [session.get(AttestationRecord, i) for i in ids]
        assert [r.payable_escrow for r in rows if r] == [
            payable_key(str(s.escrow), 0),
            payable_key(str(s.escrow), 1),
        ]
    s.engine.intents.revive(batch, None, None)
    live = [i.live_escrow for i in s.engine.intents.items(batch)]
    assert live == [str(s.escrow), None]
    assert {statuses(s.db)[i] for i in ids} == {"batched"}
    assert s.engine.intents.get(batch).state == IntentState.SUBMITTED  # type: ignore[union-attr]


@pytest.mark.parametrize("status", ["running", "queued"])
def test_jobs_not_over_keep_their_escrow(tmp_path: Path, status: str) -> None:
    s = _setup(tmp_path)
    s.set_job(status, (0, 1, 2, 3, 4))
    for i in range(5):
        add_unit(s.db, s.escrow, s.job.job_id, i)
    assert s.engine.tick() is None
