"""Storage payouts in the settlement, from the oracle's side: a job whose copies are still
in their term holds its escrow back; once they ended, the job's first claim carries one
oracle-signed receipt per copy that earned something, paid in the same settlement entry
after the claim's own outputs; the receipts move with the claim (batched, settled, back
when dropped); a co-signer refuses a receipt for another job, from an oracle outside the
batch, over what holding the copy can earn, or paying a copy twice."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from nacl.signing import SigningKey
from sqlmodel import Session
from test_units_recomputed import _verified
from unit_fixtures import UnitWorld, make_unit_world, relay_topology

from oracle.models import StorageAccrual, StorageChallengeRecord
from oracle.retrieval.feed import JobStorage, Placement, PlacementFeedError
from oracle.retrieval.ledger import HoldPolicy, StorageLedger
from oracle.settlement.bundle import STORAGE_VERSION, make_bundle, parse_bundle
from oracle.settlement.ports import OutRef
from oracle.settlement.queue import AttestationQueue
from oracle.settlement.quorum import CoSigner, IntakeVerifier, QuorumRefusal, _claim
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from proofnet.messages import storage as s
from proofnet.messages import storage_receipt as r
from proofnet.messages.verification_fee import oracle_key_hash
from tests.proofnet.storage_receipts import CHUNK, evidence_for, receipt

ORACLE = SigningKey(b"\x0b" * 32)
SIGNERS = {oracle_key_hash(bytes(ORACLE.verify_key).hex())}
PLACED = datetime(2026, 11, 1, tzinfo=UTC)
DATA = b"proofnet" * 1280  # 10 KiB in 10 chunks
ROOT = s.commit(DATA, CHUNK).content_root
PRICE = 10**9


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AttestationStore]:
    engine = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
    st = AttestationStore(engine)
    st.create_schema()
    yield st
    engine.dispose()


@pytest.fixture
def world(store: AttestationStore) -> UnitWorld:
    w = make_unit_world(store, relay_topology(2, None))
    for index in (0, 1):
        w.complete(index)
        _verified(w, store, index)
    w.set_job(status="completed")
    return w


def _copy(store: AttestationStore, world: UnitWorld, placement_id: int, **over: object) -> None:
    fields: dict[str, object] = {
        "placement_id": placement_id,
        "job_id": world.job_id,
        "provider_key": f"{placement_id:02d}" * 32,
        "payout_address": world.payout(0),
        "content_root": ROOT,
        "size": len(DATA),
        "chunk_size": CHUNK,
        "ntx_per_gb_month": PRICE,
        "placed_at": PLACED,
        "amount": 500,
        "paid_through": PLACED + timedelta(days=15),
        "status": "ended",
        "challenges_passed": 3,
        "updated_at": PLACED,
    }
    fields.update(over)
    # The challenges it passed (days 7, 14, 15), with the evidence a receipt carries.
    start = int(PLACED.timestamp())
    answered = [start + d * 86400 for d in (7, 14, 15)]
    with Session(store.engine) as session, session.begin():
        session.add(StorageAccrual.model_validate(fields))
        for i, e in enumerate(evidence_for(DATA, placement_id, answered)):
            stamp = datetime.fromtimestamp(e.answered_at, UTC)
            session.add(
                StorageChallengeRecord(
                    challenge_id=f"{placement_id:016x}{i:016x}",
                    placement_id=placement_id,
                    job_id=world.job_id,
                    provider_key=str(fields["provider_key"]),
                    chunk_index=e.index,
                    issued_at=stamp,
                    answered_at=stamp,
                    passed=True,
                    beacon=e.beacon,
                    leaf_hash=e.leaf_hash,
                    proof=list(e.proof),
                )
            )


def _queue() -> AttestationQueue:
    return AttestationQueue(StorageLedger(ORACLE, "devnet"))


def _escrow(world: UnitWorld) -> OutRef:
    return OutRef(world.escrow.tx_id, world.escrow.index)


def test_a_job_whose_copies_are_in_their_term_waits(
    store: AttestationStore, world: UnitWorld
) -> None:
    _copy(store, world, 1, status="accruing")
    with Session(store.engine) as session:
        assert _queue().unit_escrows(session) == []
        # Without the storage ledger (an oracle that pays no storage) nothing waits.
        assert [g.job_id for g in AttestationQueue().unit_escrows(session)] == [world.job_id]


def test_ended_copies_are_paid_beside_the_jobs_first_claim(
    store: AttestationStore, world: UnitWorld
) -> None:
    _copy(store, world, 1)
    _copy(store, world, 2, status="failed", amount=200)
    _copy(store, world, 3, status="failed", amount=0)  # failed before earning: nothing
    with Session(store.engine) as session:
        (group,) = _queue().unit_escrows(session)
        claims = _queue().unit_claims(session, [group.escrow])
    first, second = claims
    assert [r.body.placement_id for r in first.storage] == [1, 2] and second.storage == ()
    # The claim's own outputs first, then the storage, in the settlement entry.
    assert first.outputs() == (
        *first.payouts().outputs,
        (world.payout(0), 500),
        (world.payout(0), 200),
    )
    assert first.with_valid_storage(SIGNERS) == first
    assert first.with_valid_storage({"00" * 28}).storage == ()
    # The bundle publishes the receipts (version 3), read back per attestation.
    bundle = make_bundle(claims)
    parsed = parse_bundle(bundle.body)
    assert b'"version":3' in bundle.body and STORAGE_VERSION == 3
    assert parsed.storage == (first.storage, ())


def test_receipts_move_with_their_claims(store: AttestationStore, world: UnitWorld) -> None:
    _copy(store, world, 1)
    queue = _queue()
    with Session(store.engine) as session:
        claims = queue.unit_claims(session, [_escrow(world)])
    ids = [c.attestation_id for c in claims]

    def settlement() -> str | None:
        with Session(store.engine) as session:
            row = session.get(StorageAccrual, 1)
            assert row is not None
            return row.settlement

    with Session(store.engine) as session, session.begin():
        queue.mark(session, ids, "batched")
    assert settlement() == "batched"
    with Session(store.engine) as session:
        # Batched: not offered again beside another claim.
        assert all(c.storage == () for c in queue.unit_claims(session, [_escrow(world)]))
    with Session(store.engine) as session, session.begin():
        queue.mark(session, ids, "verified")  # the batch was dropped
    assert settlement() is None
    with Session(store.engine) as session, session.begin():
        queue.mark(session, ids, "batched")
        queue.mark(session, ids, "settled")
    assert settlement() == "settled"


def _cosigner(world: UnitWorld) -> CoSigner:
    return CoSigner(None, None, None, IntakeVerifier(world.context()))  # type: ignore[arg-type]


WEEKS = [1_000_000 + 7 * 86400 * k for k in range(1, 5)]


def _receipt(world: UnitWorld, key: SigningKey = ORACLE, **over: object) -> r.StorageReceipt:
    fields: dict[str, object] = {
        "network": "devnet",
        "job_id": world.job_id,
        "payout_address": world.payout(0),
        "data": DATA,
        "placed_at": 1_000_000,
        "answered": WEEKS,
        "placement_id": 1,
        "provider_key": "01" * 32,
        "ntx_per_gb_month": PRICE,
    }
    fields.update(over)
    return receipt(key, **fields)  # type: ignore[arg-type]


def test_a_cosigner_checks_every_receipt_the_bundle_pays(world: UnitWorld) -> None:
    cosigner = _cosigner(world)
    claim = _claim(world.attestation(0))
    good = _receipt(world)
    assert cosigner._with_storage(claim, [good], SIGNERS).storage == (good,)
    earned = good.body.amount
    bunched = _receipt(world, answered=[WEEKS[-1] - 3, WEEKS[-1] - 2, WEEKS[-1]], amount=earned)
    other = evidence_for(b"another object!!" * 640, 1, WEEKS)
    foreign = r.sign_receipt(
        ORACLE, good.body.model_copy(update={"challenges": other})
    )  # proofs for another root
    duplicated = r.sign_receipt(
        ORACLE, good.body.model_copy(update={"challenges": (good.body.challenges[0],) * 4})
    )
    attacks = [
        ([_receipt(world, job_id="00" * 32)], "another job"),
        ([_receipt(world, SigningKey.generate())], "not signed by an oracle of this batch"),
        ([_receipt(world, amount=earned + 1)], f"pays {earned + 1}, over"),
        ([_receipt(world, network="mainnet")], "network"),
        ([good, _receipt(world, amount=10)], "paid twice"),
        ([bunched], "3 verified challenge"),
        ([foreign], "0 verified challenge"),
        ([duplicated], "1 verified challenge"),
    ]
    for receipts, words in attacks:
        with pytest.raises(QuorumRefusal, match=words):
            cosigner._with_storage(claim, receipts, SIGNERS)
    forged = good.model_copy(
        update={"body": good.body.model_copy(update={"payout_address": world.payout(1)})}
    )
    with pytest.raises(QuorumRefusal, match="signature does not verify"):
        cosigner._with_storage(claim, [forged], SIGNERS)


class _Api:
    """The API's storage of jobs, as a settling oracle reads it (`JobStorageSource`)."""

    def __init__(self, jobs: dict[str, JobStorage]) -> None:
        self.jobs = jobs
        self.down = False

    def job_storage(self, job_ids: Sequence[str]) -> dict[str, JobStorage]:
        if self.down:
            raise PlacementFeedError("cannot reach the API")
        return {j: self.jobs[j] for j in job_ids if j in self.jobs}


def _placement(world: UnitWorld, placement_id: int, now: datetime) -> Placement:
    return Placement(
        id=placement_id,
        job_id=world.job_id,
        kind="results",
        object_key=f"jobs/{world.job_id}/results/out.json",
        provider_key="0a" * 32,
        commitment=s.Commitment(content_root=ROOT, size=len(DATA), chunk_size=CHUNK),
        ntx_per_gb_month=PRICE,
        placed_at=now,
        ends_at=now + timedelta(days=30),
        budget=10**9,
        max_ntx_per_gb_month=PRICE,
    )


def test_a_job_settles_only_after_its_copies_the_oracle_never_challenged(
    store: AttestationStore, world: UnitWorld
) -> None:
    # The race: the job's compute is verified before any challenge round saw its copies.
    now = datetime.now(UTC)
    api = _Api({world.job_id: JobStorage(world.job_id, True, (_placement(world, 9, now),))})
    clock = [now.timestamp()]
    queue = AttestationQueue(
        StorageLedger(
            ORACLE, "devnet", source=api, policy=HoldPolicy(600, 3600), clock=lambda: clock[0]
        )  # noqa: E501
    )
    with Session(store.engine) as session:
        assert queue.unit_escrows(session) == []  # held for the copy the API lists
        session.commit()
    with Session(store.engine) as session:
        row = session.get(StorageAccrual, 9)
        assert row is not None and row.status == "accruing"
    # The API unreadable: the job waits (could not check is not "no storage").
    api.down, api.jobs = True, {}
    with Session(store.engine) as session:
        assert queue.unit_escrows(session) == []
    # Past the term and the last round's grace: settled with what was proven.
    api.down = False
    clock[0] += 31 * 86400
    with Session(store.engine) as session:
        assert [g.job_id for g in queue.unit_escrows(session)] == [world.job_id]


def test_a_job_that_keeps_storage_waits_for_its_first_copy_then_settles_without(
    store: AttestationStore, world: UnitWorld
) -> None:
    api = _Api({world.job_id: JobStorage(world.job_id, True, ())})
    start = datetime.now(UTC).timestamp()
    clock = [start]
    queue = AttestationQueue(
        StorageLedger(
            ORACLE, "devnet", source=api, policy=HoldPolicy(600, 3600), clock=lambda: clock[0]
        )  # noqa: E501
    )
    with Session(store.engine) as session:
        assert queue.unit_escrows(session) == []  # results are placed after the job ends
    clock[0] += 3 * 86400  # no copy came within the grace period
    with Session(store.engine) as session:
        assert [g.job_id for g in queue.unit_escrows(session)] == [world.job_id]
    # A job whose spec keeps no storage never waits.
    api.jobs = {world.job_id: JobStorage(world.job_id, False, ())}
    clock[0] = start
    fresh = AttestationQueue(StorageLedger(ORACLE, "devnet", source=api, clock=lambda: clock[0]))
    with Session(store.engine) as session:
        assert [g.job_id for g in fresh.unit_escrows(session)] == [world.job_id]


def test_a_cosigner_refuses_to_spend_an_escrow_whose_storage_term_runs(
    store: AttestationStore, world: UnitWorld
) -> None:
    # A dishonest proposer settles the job now, refunding the storage budget to the
    # submitter before the copies' term is over; the co-signer reads the API's copies.
    now = datetime.now(UTC)
    api = _Api({world.job_id: JobStorage(world.job_id, True, (_placement(world, 9, now),))})
    clock = [now.timestamp()]
    ledger = StorageLedger(ORACLE, "devnet", source=api, clock=lambda: clock[0])
    with Session(store.engine) as session:
        why = ledger.refusal(session, [world.job_id])
    assert why is not None and "still in its term" in why
    with Session(store.engine) as session:
        assert ledger.refusal(session, ["00" * 32]) is None  # a job the API does not know
    # Its honest twin: after the term (and the last round's grace) it signs.
    clock[0] += 31 * 86400
    with Session(store.engine) as session:
        assert ledger.refusal(session, [world.job_id]) is None


def _cross_checked(world: UnitWorld, api: _Api, blocks: dict[str, int] | None) -> CoSigner:
    """A co-signer whose ledger reads the API's placements and (when given) the chain's
    blocks by hash (`StorageLedger.receipt_refusal`)."""
    ledger = StorageLedger(
        ORACLE, "devnet", source=api, blocks=None if blocks is None else blocks.get
    )
    cosigner = _cosigner(world)
    return dataclasses.replace(cosigner, receipt_check=ledger)


def test_a_cosigner_checks_a_receipts_terms_against_the_apis_placement(
    world: UnitWorld,
) -> None:
    """A receipt signed over another provider, size or price than the placement the API
    recorded, or for a copy the API never recorded, is refused; the receipt with the
    placement's own terms (active or failed since) is paid."""
    placed = datetime.fromtimestamp(1_000_000, UTC)
    placement = dataclasses.replace(_placement(world, 1, placed), provider_key="01" * 32)
    api = _Api({world.job_id: JobStorage(world.job_id, True, (placement,))})
    cosigner = _cross_checked(world, api, None)
    claim = _claim(world.attestation(0))
    good = _receipt(world)
    assert cosigner._with_storage(claim, [good], SIGNERS).storage == (good,)
    attacks = [
        (_receipt(world, provider_key="02" * 32), "another provider's"),
        (_receipt(world, ntx_per_gb_month=PRICE * 2), "price"),
        (_receipt(world, placement_id=9), "records no placement 9"),
        (_receipt(world, placed_at=999_000), "from before the copy was placed"),
    ]
    for bad, words in attacks:
        with pytest.raises(QuorumRefusal, match=words):
            cosigner._with_storage(claim, [bad], SIGNERS)
    # A copy that failed since is listed as ended: its earned receipt is still paid.
    api.jobs[world.job_id] = JobStorage(world.job_id, True, (), ended=(placement,))
    assert cosigner._with_storage(claim, [good], SIGNERS).storage == (good,)
    # The API cannot be read: not checked is not paid.
    api.down = True
    with pytest.raises(QuorumRefusal, match="could not be read"):
        cosigner._with_storage(claim, [good], SIGNERS)


def test_a_cosigner_refuses_a_beacon_that_is_no_block_of_the_chain_at_its_time(
    world: UnitWorld,
) -> None:
    """The attack: an oracle grinds beacons (random hashes) until the drawn chunks are ones a
    colluding provider kept. Each beacon must be a block of the chain made shortly before
    its challenge was issued; the honest receipt's beacons are."""
    placed = datetime.fromtimestamp(1_000_000, UTC)
    placement = dataclasses.replace(_placement(world, 1, placed), provider_key="01" * 32)
    api = _Api({world.job_id: JobStorage(world.job_id, True, (placement,))})
    claim = _claim(world.attestation(0))
    good = _receipt(world)
    chain = {c.beacon: c.issued_at - 20 for c in good.body.challenges}
    assert _cross_checked(world, api, chain)._with_storage(claim, [good], SIGNERS).storage
    first = good.body.challenges[0].beacon
    cases = [
        ({k: v for k, v in chain.items() if k != first}, "no block of the chain"),
        ({**chain, first: chain[first] + 3600}, "made after the challenge"),
        ({**chain, first: chain[first] - 86400}, "older than the challenge"),
    ]
    for blocks, words in cases:
        with pytest.raises(QuorumRefusal, match=words):
            _cross_checked(world, api, blocks)._with_storage(claim, [good], SIGNERS)


class _ApiOnTheSameFile(_Api):
    """An API that shares the oracle's SQLite file (`proofnet api serve` and `proofnet
    oracle serve` on one host with one data dir): answering takes the file's write lock, as
    its signed-request check does. A write lock held by the oracle's open transaction makes
    it fail, as the real API then answers only after its busy timeout, if at all."""

    def __init__(self, jobs: dict[str, JobStorage], path: Path) -> None:
        super().__init__(jobs)
        self.path = path
        self.calls = 0

    def job_storage(self, job_ids: Sequence[str]) -> dict[str, JobStorage]:
        import sqlite3

        self.calls += 1
        db = sqlite3.connect(self.path, timeout=0)
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            raise PlacementFeedError(f"the API's database is locked: {exc}") from exc
        finally:
            db.close()
        return super().job_storage(job_ids)


def test_the_settlement_reads_the_apis_storage_outside_its_database_transaction(
    store: AttestationStore, world: UnitWorld, tmp_path: Path
) -> None:
    """The attack was the oracle's own: it asked the API about a job's storage from inside
    the transaction that batches claims. An API on the same SQLite file then waited on the
    oracle's write lock while the oracle waited on the API: every read timed out, every job
    counted as "storage unreadable" and no escrow was ever settled. The engine reads the
    API first (`prepare_storage`) and batches after."""
    from oracle.settlement.intents import IntentLog

    api = _ApiOnTheSameFile(
        {world.job_id: JobStorage(world.job_id, False, ())}, tmp_path / "oracle.db"
    )
    queue = AttestationQueue(StorageLedger(ORACLE, "devnet", source=api))
    intents = IntentLog(store.engine, queue)
    # Asked from inside the transaction (no prepare), the API cannot answer: the job waits.
    with intents.session() as session:
        assert queue.unit_escrows(session) == []
    # As the engine asks: first the API, then the transaction; the job settles.
    queue.prepare_storage(intents.session)
    calls = api.calls
    with intents.session() as session:
        assert [g.job_id for g in queue.unit_escrows(session)] == [world.job_id]
    assert api.calls == calls  # nothing read from the API inside the transaction
