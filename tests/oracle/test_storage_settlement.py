"""Storage payouts in the settlement, from the oracle's side: a job whose copies are still
in their term holds its escrow back; once they ended, the job's first claim carries one
oracle-signed receipt per copy that earned something, paid in the same settlement entry
after the claim's own outputs; the receipts move with the claim (batched, settled, back
when dropped); a co-signer refuses a receipt for another job, from an oracle outside the
batch, over what holding the copy can earn, or paying a copy twice."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from nacl.signing import SigningKey
from sqlmodel import Session
from test_units_recomputed import _verified
from unit_fixtures import UnitWorld, make_unit_world, relay_topology

from oracle.models import StorageAccrual
from oracle.retrieval.ledger import StorageLedger
from oracle.settlement.bundle import STORAGE_VERSION, make_bundle, parse_bundle
from oracle.settlement.ports import OutRef
from oracle.settlement.queue import AttestationQueue
from oracle.settlement.quorum import CoSigner, IntakeVerifier, QuorumRefusal, _claim
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from proofnet.messages import storage as s
from proofnet.messages.verification_fee import oracle_key_hash

ORACLE = SigningKey(b"\x0b" * 32)
SIGNERS = {oracle_key_hash(bytes(ORACLE.verify_key).hex())}
PLACED = datetime(2026, 11, 1, tzinfo=UTC)


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
        "content_root": "ef" * 32,
        "size": s.GB,
        "ntx_per_gb_month": 1_000,
        "placed_at": PLACED,
        "amount": 500,
        "paid_through": PLACED + timedelta(days=15),
        "status": "ended",
        "challenges_passed": 15,
        "updated_at": PLACED,
    }
    fields.update(over)
    with Session(store.engine) as session, session.begin():
        session.add(StorageAccrual.model_validate(fields))


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


def _receipt(world: UnitWorld, key: SigningKey = ORACLE, **over: object) -> s.StorageReceipt:
    fields: dict[str, object] = {
        "network": "devnet",
        "job_id": world.job_id,
        "placement_id": 1,
        "provider_key": "01" * 32,
        "payout_address": world.payout(0),
        "content_root": "ef" * 32,
        "size": s.GB,
        "ntx_per_gb_month": 1_000,
        "placed_at": 0,
        "paid_through": s.MONTH_S,
        "challenges_passed": 3,
        "amount": 1_000,
        "oracle_key": bytes(key.verify_key).hex(),
    }
    fields.update(over)
    return s.sign_receipt(key, s.StorageReceiptBody.model_validate(fields))


def test_a_cosigner_checks_every_receipt_the_bundle_pays(world: UnitWorld) -> None:
    cosigner = _cosigner(world)
    claim = _claim(world.attestation(0))
    good = _receipt(world)
    assert cosigner._with_storage(claim, [good], SIGNERS).storage == (good,)
    attacks = [
        ([_receipt(world, job_id="00" * 32)], "another job"),
        ([_receipt(world, SigningKey.generate())], "not signed by an oracle of this batch"),
        ([_receipt(world, amount=1_001)], "over 1000"),
        ([_receipt(world, network="mainnet")], "network"),
        ([good, _receipt(world, amount=10)], "paid twice"),
    ]
    for receipts, words in attacks:
        with pytest.raises(QuorumRefusal, match=words):
            cosigner._with_storage(claim, receipts, SIGNERS)
    forged = good.model_copy(
        update={"body": good.body.model_copy(update={"payout_address": world.payout(1)})}
    )
    with pytest.raises(QuorumRefusal, match="signature does not verify"):
        cosigner._with_storage(claim, [forged], SIGNERS)
