"""What the settlement engine pays storage on, and when a job's escrow may be spent.

One escrow is settled once: its settlement entry pays the claim's outputs, the storage
receipts, and sends the rest back to the submitter's address, where it is no longer locked
(the batch script checks the remainder goes to the submitter, not back to the escrow).
Storage cannot be paid "later, from the remainder", so a job that keeps storage holds its
escrow until its copies' terms were challenged, and then pays compute and storage in one
entry. `StorageLedger.held_jobs` decides which jobs wait, each rule with its reason:

1. a job whose spec keeps no storage never waits;
2. the API's active copies of each candidate job are read first and registered here, so a
   job verified before the first challenge round saw its copies waits for them all the
   same (the race this closes: settling first, then finding copies nobody pays);
3. a copy within its term waits, and a little past it (`final_round_grace_s`) for the
   round that pays its last stretch; past that it ends with what its challenges proved
   (an oracle that runs no rounds does not hold an escrow until its deadline);
4. a job that keeps storage but has no copy yet (results are placed after the job ends)
   waits `placement_grace_s` from when its claim was queued for the first one;
5. when the API cannot be read, every candidate waits for the next tick (could not check
   is retry, never "no storage").

The escrow's deadline leaves room for the term (`api.services.escrow_deadline`), and
`proofnet job store` places copies while the job runs or just after, so waiting ends
before the deadline; a copy placed after its job's escrow was settled is not paid.

Once every copy of a job ended or failed, each copy that earned something becomes one
`StorageReceipt`, signed by this oracle, carrying the evidence of its passed challenges
(`proofnet.messages.storage_receipt`) and paying at most what that evidence covers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from nacl.signing import SigningKey
from sqlmodel import Session, col, select

from oracle.models import StorageAccrual, StorageChallengeRecord
from oracle.retrieval.blocks import BlockReadError, BlockTime
from oracle.retrieval.feed import JobStorage, JobStorageSource, Placement, PlacementFeedError
from proofnet.messages.storage_receipt import (
    MAX_EVIDENCE,
    ChallengeEvidence,
    StorageReceipt,
    StorageReceiptBody,
    beacon_refusal,
    evidence_bound,
    sign_receipt,
    terms_refusal,
    thin,
)

log = logging.getLogger("oracle.retrieval")

ACCRUING = "accruing"
ENDED = "ended"


def _unix(stamp: datetime) -> int:
    return int((stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp())


@dataclass(frozen=True)
class HoldPolicy:
    placement_grace_s: float = 3600.0
    final_round_grace_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.placement_grace_s < 0 or self.final_round_grace_s < 0:
            raise ValueError("storage hold times must not be negative")


def accrual_of(placement: Placement, payout_address: str, now: datetime) -> StorageAccrual:
    """The oracle's row for a copy it has just learned of: accruing, nothing earned yet."""
    return StorageAccrual(
        placement_id=placement.id,
        job_id=placement.job_id,
        provider_key=placement.provider_key,
        payout_address=payout_address,
        content_root=placement.commitment.content_root,
        size=placement.commitment.size,
        chunk_size=placement.commitment.chunk_size,
        ntx_per_gb_month=placement.ntx_per_gb_month,
        placed_at=placement.placed_at,
        paid_through=placement.placed_at,
        updated_at=now,
        ends_at=placement.ends_at,
    )


# How long what `prepare` read stands for the API's answer (one engine tick or request).
PREPARED_FOR_S = 10.0


@dataclass(frozen=True)
class _Prepared:
    at: float  # time.monotonic() when read
    jobs: frozenset[str]
    views: Mapping[str, JobStorage]
    error: str | None = None


class StorageLedger:
    def __init__(
        self,
        signing_key: SigningKey,
        network: str,
        *,
        source: JobStorageSource | None = None,
        policy: HoldPolicy | None = None,
        clock: Callable[[], float] = time.time,
        blocks: BlockTime | None = None,
    ) -> None:
        self.key = signing_key
        self.network = network
        self.source = source
        # The chain's blocks, to check a receipt's beacons against (None: not checked, as
        # for an oracle with no chain: its beacons are random, docs/storage.md).
        self.blocks = blocks
        self.policy = policy or HoldPolicy()
        self.clock = clock
        # Specs never change: a job known to keep no storage is not asked about again.
        self._no_storage: set[str] = set()
        # The API's answer read by `prepare`, outside any database transaction.
        self._prepared: _Prepared | None = None
        self._prepared_lock = threading.Lock()

    def prepare(self, job_ids: Collection[str]) -> None:
        """Read the API's storage of these jobs now, for the next `held_jobs` over them.
        Called before a database transaction opens: on SQLite a transaction holds the file's
        write lock, and an HTTP call made inside one keeps the oracle's intake (and an API
        sharing the file on one host) waiting for as long as the call takes."""
        asked = frozenset(j for j in job_ids if j not in self._no_storage)
        if self.source is None or not asked:
            return
        try:
            prepared = _Prepared(time.monotonic(), asked, self.source.job_storage(sorted(asked)))
        except PlacementFeedError as exc:
            prepared = _Prepared(time.monotonic(), asked, {}, str(exc))
        with self._prepared_lock:
            self._prepared = prepared

    def _views(self, asked: Collection[str]) -> dict[str, JobStorage]:
        """The API's storage of `asked`: as `prepare` read it moments ago, else read now
        (a caller that did not prepare). PlacementFeedError: the API could not be read."""
        assert self.source is not None
        with self._prepared_lock:
            prepared = self._prepared
        if (
            prepared is not None
            and set(asked) <= prepared.jobs
            and time.monotonic() - prepared.at <= PREPARED_FOR_S
        ):
            if prepared.error is not None:
                raise PlacementFeedError(prepared.error)
            return {j: v for j, v in prepared.views.items() if j in asked}
        return self.source.job_storage(sorted(asked))

    def held_jobs(self, session: Session, candidates: Mapping[str, float] | None = None) -> set[str]:  # fmt: skip
        """Of the jobs with claims waiting (`candidates`: job id -> when its oldest claim was
        queued, POSIX seconds), those whose escrow must not be settled yet (rules in the
        module doc). Without candidates: the jobs with a copy still accruing here."""
        now = self.clock()
        asked = {j: t for j, t in (candidates or {}).items() if j not in self._no_storage}
        views = {}
        if self.source is not None and asked:
            try:
                views = self._views(asked)
            except PlacementFeedError as exc:
                log.warning("storage of jobs %s not readable; they wait: %s", sorted(asked), exc)
                return set(asked)
            for job_id in asked:
                view = views.get(job_id)
                if view is not None and not view.keeps_storage:
                    self._no_storage.add(job_id)
                elif view is not None:
                    self._register(session, view.placements)
        held: set[str] = set()
        rows = session.exec(select(StorageAccrual).where(StorageAccrual.status == ACCRUING)).all()
        for row in rows:
            if (
                row.ends_at is not None
                and _unix(row.ends_at) + self.policy.final_round_grace_s <= now
            ):  # noqa: E501
                # Its last round never came: it ends with what its challenges proved.
                row.status = ENDED
                row.updated_at = datetime.now(UTC)
                session.add(row)
                continue
            held.add(row.job_id)
        session.flush()
        known = set(
            session.exec(
                select(StorageAccrual.job_id).where(col(StorageAccrual.job_id).in_(list(asked)))
            ).all()
        )  # noqa: E501
        for job_id, queued in asked.items():
            view = views.get(job_id)
            if view is None or not view.keeps_storage or job_id in known:
                continue
            if now - queued < self.policy.placement_grace_s:
                held.add(job_id)  # its content is placed after the job ends: wait for it
        return held

    def refusal(self, session: Session, job_ids: Collection[str]) -> str | None:
        """Why a co-signer must not sign a batch settling `job_ids` now, or None: one of
        them has a copy still in its term (as the API lists it now, or as this oracle's own
        rounds see it), or the API cannot say. The wait for a first copy is the proposer's
        alone (a co-signer has no time the job was queued at)."""
        held = self.held_jobs(session, dict.fromkeys(job_ids, 0.0))
        if not held:
            return None
        return (
            f"job(s) {sorted(held)} keep storage still in its term (or the API cannot say): "
            "their escrow pays it, and is spent once, after the term"
        )

    def receipt_refusal(self, receipt: StorageReceipt) -> str | None:
        """Why a co-signer must not pay `receipt`, from what others recorded, or None: its
        terms (job, provider, root, size, chunk size, price, placed-at) are not those of the
        placement the API lists, or a challenge's beacon is no block of the chain at about
        its `issued_at`. "Could not check" (API or chain unreadable) refuses too."""
        body = receipt.body
        if self.source is not None:
            try:
                view = self.source.job_storage([body.job_id]).get(body.job_id)
            except PlacementFeedError as exc:
                return f"the API's placements could not be read: {exc}"
            placement = None if view is None else view.placement(body.placement_id)
            if placement is None:
                return f"the API records no placement {body.placement_id} of job {body.job_id}"
            why = terms_refusal(
                body,
                job_id=placement.job_id,
                provider_key=placement.provider_key,
                content_root=placement.commitment.content_root,
                size=placement.commitment.size,
                chunk_size=placement.commitment.chunk_size,
                ntx_per_gb_month=placement.ntx_per_gb_month,
                placed_at=_unix(placement.placed_at),
            )
            if why is not None:
                return why
        if self.blocks is not None:
            for evidence in body.challenges:
                try:
                    when = self.blocks(evidence.beacon)
                except BlockReadError as exc:
                    return f"the chain could not be read to check a beacon: {exc}"
                why = beacon_refusal(evidence, when)
                if why is not None:
                    return why
        return None

    def _register(self, session: Session, placements: Collection[Placement]) -> None:
        for placement in placements:
            if session.get(StorageAccrual, placement.id) is None:
                # The payout address comes with the provider's offer, at the first round.
                session.add(accrual_of(placement, "", datetime.now(UTC)))
        session.flush()

    def receipts(self, session: Session, job_id: str) -> tuple[StorageReceipt, ...]:
        """One signed receipt per copy of `job_id` that earned something, not yet batched,
        carrying its passed challenges and paying no more than they cover."""
        rows = session.exec(
            select(StorageAccrual)
            .where(
                StorageAccrual.job_id == job_id,
                col(StorageAccrual.amount) > 0,
                col(StorageAccrual.settlement).is_(None),
                StorageAccrual.status != ACCRUING,
            )
            .order_by(col(StorageAccrual.placement_id))
        ).all()
        out = []
        for row in rows:
            receipt = self._receipt(session, row)
            if receipt is not None:
                out.append(receipt)
        return tuple(out)

    def _receipt(self, session: Session, row: StorageAccrual) -> StorageReceipt | None:
        if not row.payout_address or row.chunk_size is None:
            return None
        passed = session.exec(
            select(StorageChallengeRecord)
            .where(
                StorageChallengeRecord.placement_id == row.placement_id,
                StorageChallengeRecord.passed == True,  # noqa: E712
                col(StorageChallengeRecord.leaf_hash).is_not(None),
            )
            .order_by(col(StorageChallengeRecord.answered_at))
        ).all()
        evidence = [
            ChallengeEvidence(
                beacon=c.beacon,
                index=c.chunk_index,
                leaf_hash=c.leaf_hash,
                proof=tuple(c.proof or ()),
                issued_at=_unix(c.issued_at),
                answered_at=_unix(c.answered_at),
            )
            for c in passed
            if c.beacon is not None and c.leaf_hash is not None and c.answered_at is not None
        ]
        placed_at = _unix(row.placed_at)
        kept = thin(evidence, placed_at)[-MAX_EVIDENCE:]
        if not kept:
            return None
        body = StorageReceiptBody(
            network=self.network,  # type: ignore[arg-type]
            job_id=row.job_id,
            placement_id=row.placement_id,
            provider_key=row.provider_key,
            payout_address=row.payout_address,
            content_root=row.content_root,
            size=row.size,
            chunk_size=row.chunk_size,
            ntx_per_gb_month=row.ntx_per_gb_month,
            placed_at=placed_at,
            paid_through=max(_unix(row.paid_through), kept[-1].answered_at),
            challenges=kept,
            amount=1,
            oracle_key=bytes(self.key.verify_key).hex(),
        )
        # Never more than the evidence covers (each pass here was rounded up on its own).
        amount = min(row.amount, evidence_bound(body))
        if amount < 1:
            return None
        return sign_receipt(self.key, body.model_copy(update={"amount": amount}))

    def move(self, session: Session, job_ids: Collection[str], status: str) -> None:
        """Move the copies of `job_ids` with the attestations they are paid beside:
        batched with them, settled with them, unpaid again when their batch is dropped
        (status "verified") or their escrow is gone ("rejected")."""
        if not job_ids:
            return
        query = select(StorageAccrual).where(col(StorageAccrual.job_id).in_(list(job_ids)))
        for row in session.exec(query).all():
            if status == "batched":
                payable = row.amount > 0 and row.status != ACCRUING and row.settlement is None
                row.settlement = "batched" if payable else row.settlement
            elif status == "settled" and row.settlement == "batched":
                row.settlement = "settled"
            elif status in ("verified", "rejected") and row.settlement == "batched":
                row.settlement = None
            session.add(row)
        session.flush()
