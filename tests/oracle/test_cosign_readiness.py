"""A co-signer applies the proposer's readiness rule itself before it signs a settlement of a
topology job's escrow (`JobEndReadiness.refusal`), from its own read of the API feed, its own
store and its own clock: not while the job runs (unless the escrow's deadline is near), and
once it is over only when every completed unit is paid by the batch or decided here, or its
own grace period since it first saw the job over has passed. It judges attestations of
superseded leases in its own store as the proposer does, so an honest batch verifies."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
from oracle_fixtures import FakeFeed
from settlement_fixtures import FakeChain, oracle_engine, statuses
from sqlalchemy.engine import Engine
from sqlmodel import Session
from test_units_settlement import Clock, DeadlineChain, add_unit, job_with_units
from unit_fixtures import UnitWorld, make_unit_world, node_topology

from oracle.inputs.feed import FeedError, JobInfo
from oracle.models import RECEIVED, REJECTED, AttestationRecord
from oracle.settlement.models import JobEnd
from oracle.settlement.ports import OutRef, UnitEscrow
from oracle.settlement.quorum import CoSigner, IntakeVerifier, QuorumRefusal, SignatureVerifier
from oracle.settlement.readiness import JobEndReadiness, ReadinessPolicy
from oracle.storage.store import AttestationStore
from oracle.verification.verify import Reason, verify


@dataclasses.dataclass
class CoSignerView:
    """A co-signer's readiness rule over its own store, feed and clock."""

    db: Engine
    feed: FakeFeed
    clock: Clock
    readiness: JobEndReadiness
    escrow: OutRef
    job: JobInfo

    def set_job(self, status: str, completed: tuple[int, ...]) -> None:
        self.job = job_with_units(status, completed)
        self.feed.jobs[self.job.job_id] = self.job

    def refusal(self, bundled: tuple[int, ...]) -> str | None:
        return self.readiness.refusal(self.escrow, self.job.job_id, bundled)


def _view(tmp_path: Path, chain: FakeChain | None = None, **policy: float) -> CoSignerView:
    db = oracle_engine(tmp_path)
    chain = chain or FakeChain()
    feed, clock = FakeFeed(), Clock()
    readiness = JobEndReadiness(feed, chain, db, ReadinessPolicy(**policy), clock)
    job = job_with_units("running", (0, 1))
    feed.jobs[job.job_id] = job
    return CoSignerView(db, feed, clock, readiness, chain.add_escrow(), job)


def test_a_running_jobs_escrow_is_not_settled_early(tmp_path: Path) -> None:
    v = _view(tmp_path)
    # Stages 0 and 1 are verified and their attestations are in the batch; the pipeline
    # still runs: paying them now would refund what the later stages are about to earn.
    reason = v.refusal((0, 1))
    assert reason is not None
    assert f"job {v.job.job_id} is running" in reason and "not while its units" in reason
    v.set_job("queued", (0, 1))
    assert "is queued" in (v.refusal((0, 1)) or "")
    v.set_job("completed", (0, 1, 2, 3, 4))
    assert v.refusal((0, 1, 2, 3, 4)) is None


def test_over_means_every_completed_unit_is_paid_or_decided_here(tmp_path: Path) -> None:
    v = _view(tmp_path)
    v.set_job("stopped", (0, 1, 3))
    reason = v.refusal((0, 1))
    assert reason is not None and "unit(s) [3]" in reason and "600s from now" in reason
    # This oracle rejected unit 3's attestation itself: decided, not waited for.
    add_unit(v.db, v.escrow, v.job.job_id, 3, status=REJECTED)
    assert v.refusal((0, 1)) is None
    # ... unless another attestation of unit 3 is still being verified here.
    add_unit(v.db, v.escrow, v.job.job_id, 3, status=RECEIVED)
    assert "unit(s) [3]" in (v.refusal((0, 1)) or "")
    assert v.refusal((0, 1, 3)) is None  # the batch pays it: the batch's verdict decides


def test_grace_runs_on_the_cosigners_clock_from_its_first_sighting(tmp_path: Path) -> None:
    v = _view(tmp_path, grace_s=600.0)
    v.set_job("failed", (0, 1, 2))  # unit 2's attestation never reached anyone
    # The proposer's grace ran out and it proposes without unit 2; this co-signer sees the
    # job over for the first time now and starts its own grace period.
    assert "600s from now" in (v.refusal((0, 1)) or "")
    with Session(v.db) as session:
        first = session.get(JobEnd, str(v.escrow))
        assert first is not None and first.seen_at == v.clock.now
    v.clock.now += 599
    assert "1s from now" in (v.refusal((0, 1)) or "")
    # A restarted co-signer (new rule, same database) keeps its first sighting.
    v.readiness = JobEndReadiness(
        v.feed, FakeChain(), v.db, ReadinessPolicy(grace_s=600.0), v.clock
    )
    v.clock.now += 1
    assert v.refusal((0, 1)) is None


def test_near_its_deadline_an_escrow_is_settled_whatever_the_jobs_state(tmp_path: Path) -> None:
    chain = DeadlineChain()
    chain.deadline_ms = int((time.time() + 3600) * 1000)
    v = _view(tmp_path, chain=chain, deadline_margin_s=1800.0)
    assert v.refusal((0,)) is not None  # running, deadline an hour away (co-signer's clock)
    v.clock.now += 1801
    assert v.refusal((0,)) is None  # both read the deadline from the same datum


def test_an_unreadable_feed_refuses_rather_than_guesses(tmp_path: Path) -> None:
    v = _view(tmp_path)

    class Down(FakeFeed):
        def job(self, job_id: str) -> JobInfo | None:
            raise FeedError("API feed unreachable (job): connection refused")

    v.readiness.feed = Down()
    reason = v.refusal((0, 1))
    assert reason is not None and "cannot ask the API whether job" in reason
    v.readiness.feed = FakeFeed()
    assert v.refusal((0, 1)) == f"the API does not know job {v.job.job_id}"


def test_near_the_deadline_superseded_attestations_are_not_paid(tmp_path: Path) -> None:
    """The proposer's deadline rule also rejects attestations of leases the API no longer
    counts (which co-signers would refuse), and so does the co-signer's."""
    chain = DeadlineChain()
    chain.deadline_ms = int((time.time() + 600) * 1000)
    v = _view(tmp_path, chain=chain)
    stale = add_unit(v.db, v.escrow, v.job.job_id, 0, nonce="77" * 32)
    current = add_unit(v.db, v.escrow, v.job.job_id, 1)
    group = UnitEscrow(v.escrow, v.job.job_id, 2, 0.0)
    assert v.readiness.ready(group) is True
    assert statuses(v.db)[stale] == REJECTED and statuses(v.db)[current] == "verified"
    with Session(v.db) as session:
        row = session.get(AttestationRecord, stale)
        assert row is not None and row.reason == Reason.LEASE_SUPERSEDED
    other = _view(tmp_path / "cosigner", chain=chain)
    stale = add_unit(other.db, other.escrow, v.job.job_id, 0, nonce="77" * 32)
    other.feed.jobs = v.feed.jobs
    assert other.readiness.refusal(other.escrow, v.job.job_id, (0, 1)) is None
    assert statuses(other.db)[stale] == REJECTED


# --- superseded cluster-node attestations ---------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> AttestationStore:
    s = AttestationStore(oracle_engine(tmp_path, "cosigner.db"))
    s.create_schema()
    return s


def _verified(world: UnitWorld, store: AttestationStore, index: int) -> int:
    cose = world.sign(index)
    row, created = store.receive(world.attestation(index), cose)
    assert created and row.id is not None
    assert store.apply(row.id, verify(cose, world.context(), own_id=row.id)).status == "verified"
    return row.id


def _second_attempt(world: UnitWorld) -> None:
    """Cluster attempt 1 failed after node 0 completed; attempt 2 completes both nodes."""
    world.nonces[0] = "77" * 32
    world.outputs.clear()
    world.cluster_output = "3" * 64
    world.complete(0)
    world.complete(1)
    world.set_job(status="completed")


def test_cosigner_judges_a_superseded_node_attestation_as_the_proposer_does(
    store: AttestationStore,
) -> None:
    """This co-signer also verified node 0's attestation of cluster attempt 1 (the proposer
    rejected its copy as lease_superseded when the job ended). The honest batch pays attempt
    2's nodes: the co-signer reaches the same verdict from the feed and verifies them."""
    world = make_unit_world(store, node_topology(2))
    world.complete(0)
    stale = _verified(world, store, 0)
    _second_attempt(world)
    bundle = [world.sign(0), world.sign(1)]
    verifier = IntakeVerifier(world.context())
    # Judged before the rule below, the stale attestation holds node 0 and the batch fails.
    with pytest.raises(QuorumRefusal, match="superseded"):
        verifier.verify_bundle(bundle)

    cosigner = CoSigner(None, FakeChain(), None, verifier)  # type: ignore[arg-type]
    assert isinstance(cosigner.readiness, JobEndReadiness)  # its own feed and store
    escrow = OutRef(world.escrow.tx_id, world.escrow.index)
    cosigner._check_jobs_over({(escrow, world.job_id): frozenset({("unit", 0), ("unit", 1)})})
    released = store.get(stale)
    assert released is not None and released.status == REJECTED
    assert released.reason == Reason.LEASE_SUPERSEDED and released.payable_escrow is None
    claims = verifier.verify_bundle(bundle)
    assert [c.unit.index for c in claims if c.unit is not None] == [0, 1]


def test_a_cosigner_without_an_api_feed_signs_no_unit_claims(store: AttestationStore) -> None:
    world = make_unit_world(store, node_topology(2))
    cosigner = CoSigner(
        None,  # type: ignore[arg-type]
        FakeChain(),
        None,  # type: ignore[arg-type]
        SignatureVerifier("devnet", "00" * 28),
    )
    assert cosigner.readiness is None
    escrow = OutRef(world.escrow.tx_id, world.escrow.index)
    with pytest.raises(QuorumRefusal, match="no API feed"):
        cosigner._check_jobs_over({(escrow, world.job_id): frozenset({("unit", 0)})})
    cosigner._check_jobs_over({})  # single-unit jobs only: nothing to check
