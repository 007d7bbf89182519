"""Retrieval challenge rounds: challenge, verify, accrue or fail and re-replicate.

Checks applied to each placement in turn, each with its reason:

1. the term is not over (after `ends_at` nothing more is earned, so nothing is asked);
2. the provider still offers storage (a withdrawn offer holds nothing anyone can check);
3. the chunk asked for is drawn from a beacon (the chain's latest block hash) with
   `beacon_index`, so a provider cannot keep only the chunks it expects to be asked for,
   and a co-signer re-derives it from the receipt (the oracle did not pick it);
4. what its endpoint serves is verified against the committed root (`verify_answer`):
   a forged path, a short chunk or a stale answer prove a bad copy.

An answered challenge pays the time since the last challenge (GB-months at the placement's
price, at most `MAX_CREDIT_S`), capped so that all copies of a job together stay within the
spec's storage budget (what its escrow locked for storage), and keeps its evidence (beacon,
leaf hash, audit path) for the receipt. A failed one is never paid (the time since the last
challenge is forfeit). Failing to serve (a timeout, the endpoint down, an object missing) is
a *strike*: `max_strikes` in a row within `strike_window_s` and the copy is lost. Serving
bytes that do not verify, or withdrawing the offer, is fatal at once. A lost copy ends, and
the object is copied from a copy that still verifies to the cheapest other offer that fits.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

import httpx
from sqlalchemy import func, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from oracle.models import StorageAccrual, StorageChallengeRecord
from oracle.retrieval.feed import (
    Offer,
    Placement,
    PlacementFeed,
    PlacementFeedError,
    Replacement,
    by_key,
)
from oracle.retrieval.ledger import accrual_of
from proofnet.messages import merkle
from proofnet.messages.storage import (
    Commitment,
    RetrievalAnswer,
    RetrievalChallenge,
    Verdict,
    storage_cost,
    verify_answer,
)
from proofnet.messages.storage_receipt import MAX_CREDIT_S, beacon_index
from proofnet.storage_objects import (
    ObjectStoreError,
    S3Location,
    answer_challenge,
    put_committed_pinned,
    read_committed,
)

log = logging.getLogger("oracle.retrieval")

ACCRUING = "accruing"
FAILED = "failed"
ENDED = "ended"


class Beacon(Protocol):
    def __call__(self) -> str:
        """A block hash (64 hex) nobody knew before its block: the seed of a challenge."""
        ...


class BeaconError(Exception):
    """No beacon could be read (the chain did not answer); the round waits."""


def random_beacon() -> str:
    """A fresh random beacon: for an oracle without a chain (tests, a local demo). A
    co-signer re-derives the chunk from it all the same, but cannot tell it was not picked."""
    return secrets.token_hex(32)


def chain_beacon(http: httpx.Client, blockfrost_url: str) -> Beacon:
    """The hash of the chain's latest block, from a Blockfrost-shaped API (the devnet's too)."""

    def latest() -> str:
        try:
            response = http.get(blockfrost_url.rstrip("/") + "/blocks/latest")
            response.raise_for_status()
            value = str(response.json()["hash"]).lower()
            bytes.fromhex(value)
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
            raise BeaconError(f"cannot read the latest block: {exc}") from exc
        if len(value) != 64:
            raise BeaconError(f"the latest block's hash is not 32 bytes: {value[:80]!r}")
        return value

    return latest


class ReplicaWriter(Protocol):
    def __call__(self, offer: Offer, key: str, data: bytes, chunk_size: int) -> Commitment: ...


def s3_writer(
    http: httpx.Client, access_key: str | None = None, secret_key: str | None = None
) -> ReplicaWriter:
    """Writes a copy (and its proof sidecar) to an offer's endpoint through `http`, the
    same pinned client the reads use: a provider's endpoint on a private address gets no
    write from the oracle's host either."""

    def write(offer: Offer, key: str, data: bytes, chunk_size: int) -> Commitment:
        return put_committed_pinned(
            http,
            S3Location(offer.endpoint, offer.bucket),
            key,
            data,
            chunk_size=chunk_size,
            access_key=access_key,
            secret_key=secret_key,
        )

    return write


@dataclass(frozen=True)
class Outcome:
    placement_id: int
    provider_key: str
    passed: bool
    reason: str
    accrued: int = 0
    replacement_id: int | None = None
    # A failure that did not end the copy (it has `strikes` in a row now).
    strikes: int = 0
    lost: bool = False


@dataclass
class RoundReport:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(o.passed for o in self.outcomes)

    @property
    def failed(self) -> int:
        return sum(not o.passed for o in self.outcomes)


@dataclass
class Challenger:
    engine: Engine
    feed: PlacementFeed
    # Reads on providers' endpoints: someone else's URLs, so a client that refuses private
    # addresses (proofnet.pinned_http) unless the operator allows them.
    http: httpx.Client
    writer: ReplicaWriter
    beacon: Beacon = field(default=random_beacon)
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    max_strikes: int = 3
    strike_window_s: float = 3 * 86400.0

    def round(self) -> RoundReport:
        """One challenge per active placement; raises PlacementFeedError when the API cannot
        be read (nothing is recorded then)."""
        now = self.clock()
        placements = self.feed.active_placements()
        offers = by_key(self.feed.offers())
        self._end_missing({p.id for p in placements})
        report = RoundReport()
        for placement in placements:
            outcome = self._one(placement, placements, offers, now)
            if outcome is not None:
                report.outcomes.append(outcome)
        return report

    def _one(
        self,
        placement: Placement,
        placements: Sequence[Placement],
        offers: dict[str, Offer],
        now: datetime,
    ) -> Outcome | None:
        accrual = self._accrual(placement, offers.get(placement.provider_key))
        if accrual.status != ACCRUING:
            return None
        if _aware(accrual.paid_through) >= placement.ends_at:
            self._set_status(placement.id, ENDED)
            return None
        offer = offers.get(placement.provider_key)
        fatal = True
        if offer is None:
            verdict = Verdict(False, "the provider withdrew its storage offer")
        else:
            challenge = self.challenge(placement)
            answer = self._fetch(offer, challenge)
            # Not serving may be the network's fault; serving what does not verify is not.
            fatal = not isinstance(answer, str) and not verify_answer(challenge, answer).passed
            verdict = self.verdict(challenge, answer)
        if verdict.passed:
            paid = self._accrue(placement, now)
            return Outcome(placement.id, placement.provider_key, True, "", accrued=paid)
        if not fatal:
            strikes = self._strike(placement, now, verdict.reason)
            if strikes < self.max_strikes:
                return Outcome(
                    placement.id, placement.provider_key, False, verdict.reason, strikes=strikes
                )
            verdict = Verdict(
                False, f"{verdict.reason} ({strikes} failed challenges in a row: copy lost)"
            )
        self._set_status(placement.id, FAILED)
        replacement = self._replicate(placement, placements, offers, verdict.reason)
        return Outcome(
            placement.id, placement.provider_key, False, verdict.reason,
            replacement_id=replacement, lost=True,
        )  # fmt: skip

    # --- challenge and verdict ----------------------------------------------------------

    def challenge(self, placement: Placement) -> RetrievalChallenge:
        """A fresh challenge for `placement`, drawn from the current beacon, recorded as
        issued."""
        challenge_id = secrets.token_hex(16)
        beacon = self.beacon()
        c = placement.commitment
        index = beacon_index(beacon, placement.id, c.content_root, c.chunk_count)
        challenge = RetrievalChallenge(
            challenge_id=challenge_id,
            placement_id=placement.id,
            object_key=placement.object_key,
            commitment=placement.commitment,
            index=index,
        )
        with Session(self.engine) as session, session.begin():
            session.add(
                StorageChallengeRecord(
                    challenge_id=challenge_id,
                    placement_id=placement.id,
                    job_id=placement.job_id,
                    provider_key=placement.provider_key,
                    chunk_index=index,
                    issued_at=self.clock(),
                    beacon=beacon,
                )
            )
        return challenge

    def _fetch(self, offer: Offer, challenge: RetrievalChallenge) -> RetrievalAnswer | str:
        try:
            return answer_challenge(self.http, S3Location(offer.endpoint, offer.bucket), challenge)
        except ObjectStoreError as exc:
            return f"the endpoint did not serve the chunk: {exc}"

    def verdict(self, challenge: RetrievalChallenge, answer: RetrievalAnswer | str) -> Verdict:
        """Verify `answer` and record the verdict, once: a challenge already answered (an
        answer replayed, or a second verdict raced in) counts as failed."""
        evidence: dict[str, object] = {}
        if isinstance(answer, str):
            verdict = Verdict(False, answer)
        else:
            verdict = verify_answer(challenge, answer)
            if verdict.passed:
                # What a receipt carries so a co-signer can walk the path itself.
                leaf = merkle.leaf_hash(answer.chunk_bytes()).hex()
                evidence = {"leaf_hash": leaf, "proof": list(answer.proof)}
        with Session(self.engine) as session, session.begin():
            marked = session.execute(
                update(StorageChallengeRecord)
                .where(
                    col(StorageChallengeRecord.challenge_id) == challenge.challenge_id,
                    col(StorageChallengeRecord.answered_at).is_(None),
                )
                .values(
                    answered_at=self.clock(),
                    passed=verdict.passed,
                    reason=verdict.reason,
                    **evidence,
                )
            )
        if marked.rowcount != 1:  # type: ignore[attr-defined]
            return Verdict(False, "the challenge was already answered (a replayed answer)")
        return verdict

    # --- accrual ------------------------------------------------------------------------

    def _accrual(self, placement: Placement, offer: Offer | None) -> StorageAccrual:
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            row = session.get(StorageAccrual, placement.id)
            payout = "" if offer is None else offer.payout_address
            if row is None:
                row = accrual_of(placement, payout, self.clock())
                session.add(row)
            elif not row.payout_address and payout:
                # Registered by the settlement queue before this round saw the offer.
                row.payout_address = payout
            return row

    def _end_missing(self, active: set[int]) -> None:
        """A copy the API no longer lists as active (another oracle found it failing, or it
        was replaced) earns nothing more here; ending it releases its job's escrow, which
        would otherwise wait for it until the deadline (`oracle.retrieval.ledger`)."""
        with Session(self.engine) as session, session.begin():
            rows = session.exec(
                select(StorageAccrual).where(StorageAccrual.status == ACCRUING)
            ).all()
            for row in rows:
                if row.placement_id not in active:
                    row.status = ENDED
                    row.updated_at = self.clock()
                    session.add(row)

    def _set_status(self, placement_id: int, status: str) -> None:
        with Session(self.engine) as session, session.begin():
            row = session.get(StorageAccrual, placement_id)
            if row is not None:
                row.status = status
                row.updated_at = self.clock()

    def _strike(self, placement: Placement, now: datetime, reason: str) -> int:
        """Count a failure that proves no bad copy; the time since the last challenge is
        forfeit all the same (only periods that end in a pass are paid). Returns the
        strikes in a row within the window, this one included."""
        with Session(self.engine) as session, session.begin():
            row = session.get(StorageAccrual, placement.id)
            assert row is not None
            first = None if row.struck_at is None else _aware(row.struck_at)
            if first is None or (now - first).total_seconds() > self.strike_window_s:
                row.strikes, row.struck_at = 1, now
            else:
                row.strikes += 1
            row.paid_through = max(_aware(row.paid_through), min(now, placement.ends_at))
            row.updated_at = self.clock()
            strikes, total, through, passed = (
                row.strikes, row.amount, row.paid_through, row.challenges_passed
            )  # fmt: skip
        try:
            # Shown with the copy (`proofnet storage status`): a provider sees it is at risk.
            self.feed.report_accrual(placement.id, total, _aware(through), passed, strikes, reason)
        except PlacementFeedError as exc:
            log.warning("strike on placement %s not reported: %s", placement.id, exc)
        return strikes

    def _accrue(self, placement: Placement, now: datetime) -> int:
        """Pay the time since the last challenge (at most `MAX_CREDIT_S`: what one passed
        challenge vouches for in a receipt), within the job's budget."""
        with Session(self.engine) as session, session.begin():
            row = session.get(StorageAccrual, placement.id)
            assert row is not None
            row.strikes, row.struck_at = 0, None
            through = _aware(row.paid_through)
            end = min(now, placement.ends_at)
            seconds = min(MAX_CREDIT_S, max(0, int((end - through).total_seconds())))
            earned = storage_cost(placement.commitment.size, placement.ntx_per_gb_month, seconds)
            spent = session.exec(
                select(func.coalesce(func.sum(StorageAccrual.amount), 0)).where(
                    StorageAccrual.job_id == placement.job_id
                )
            ).one()
            paid = max(0, min(earned, placement.budget - int(spent)))
            row.amount += paid
            row.paid_through = max(through, end)
            row.challenges_passed += 1
            row.updated_at = self.clock()
            if end >= placement.ends_at:
                row.status = ENDED
            total, through, passed = row.amount, row.paid_through, row.challenges_passed
        try:
            self.feed.report_accrual(placement.id, total, _aware(through), passed)
        except PlacementFeedError as exc:
            # The oracle's record stands; the API shows it after the next report.
            log.warning("accrual of placement %s not reported: %s", placement.id, exc)
        return paid

    # --- re-replication -----------------------------------------------------------------

    def _copy_to(
        self, targets: Sequence[Offer], failed: Placement, data: bytes
    ) -> Replacement | None:
        """The first target that takes the copy and holds it under the same commitment."""
        for target in targets:
            try:
                made = self.writer(target, failed.object_key, data, failed.commitment.chunk_size)
            except ObjectStoreError as exc:
                log.warning("re-replication to %s failed: %s", target.provider_key, exc)
                continue
            if made == failed.commitment:
                return Replacement(target.provider_key, made)
        return None

    def _replicate(
        self,
        failed: Placement,
        placements: Sequence[Placement],
        offers: dict[str, Offer],
        reason: str,
    ) -> int | None:
        """Copy the object from a copy that still verifies to the cheapest offer that fits,
        and report both to the API. Returns the new placement's id (None: not replaced)."""
        copies = [
            p
            for p in placements
            if p.job_id == failed.job_id and p.object_key == failed.object_key and p.id != failed.id
        ]
        holders = {p.provider_key for p in copies} | {failed.provider_key}
        data: bytes | None = None
        for source in copies:
            offer = offers.get(source.provider_key)
            if offer is None:
                continue
            try:
                data = read_committed(
                    self.http, S3Location(offer.endpoint, offer.bucket), source.object_key,
                    failed.commitment,
                )  # fmt: skip
                break
            except ObjectStoreError as exc:
                log.warning("replica %s of %s unreadable: %s", source.id, source.object_key, exc)
        targets = [
            o
            for o in sorted(offers.values(), key=lambda o: (o.ntx_per_gb_month, o.provider_key))
            if o.provider_key not in holders
            and o.ntx_per_gb_month <= failed.max_ntx_per_gb_month
            and o.free_bytes >= failed.commitment.size
        ]
        replacement: Replacement | None = None
        if data is None:
            why = f"{reason}; not re-replicated: no other copy verifies"
        elif not targets:
            why = f"{reason}; not re-replicated: no other offer fits (price cap, capacity)"
        else:
            replacement = self._copy_to(targets, failed, data)
            why = reason if replacement else f"{reason}; not re-replicated: no offer took the copy"
        try:
            return self.feed.report_failure(failed.id, why, replacement)
        except PlacementFeedError as exc:
            log.error("placement %s failed (%s) but the API was not told: %s", failed.id, why, exc)
            return None


def _aware(stamp: datetime) -> datetime:
    # SQLite hands back naive datetimes; the oracle stores UTC.
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def payable(engine: Engine, job_id: str | None = None) -> list[StorageAccrual]:
    """Storage earned and not yet settled, per placement (what a settlement batch pays)."""
    with Session(engine, expire_on_commit=False) as session:
        query = select(StorageAccrual).where(col(StorageAccrual.amount) > 0)
        if job_id is not None:
            query = query.where(StorageAccrual.job_id == job_id)
        return list(session.exec(query.order_by(col(StorageAccrual.placement_id))))
