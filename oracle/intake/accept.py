"""Intake: authenticate and store attestations, then verify them in a worker pool.

`Intake.accept(cose)` runs the stateless checks (signature, encoding, domain) at once,
then takes the attestation only from a worker registered with the API (asked through the
feed) within its per-key rate, and stores what passes as `received`: nobody else can
make the oracle store anything; the full pipeline then runs in a thread pool (or inline,
`inline=True`, for small loads and tests) and its verdict is applied to the store. A sweep
re-runs verifications that were postponed (chain or API unreachable) or interrupted by a
restart, so nothing received is ever left behind. When a unit of a topology job is verified,
the other units of its escrow that wait (for their input units' verdicts) are verified
again at once instead of at their next retry time.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

from oracle.inputs.feed import FeedError
from oracle.intake.announce import Announcer, Verdict
from oracle.intake.lost_claims import lost_claims
from oracle.metrics import OracleMetrics
from oracle.models import AttestationRecord
from oracle.storage.store import Applied, AttestationStore
from oracle.verification.unit_checks import attested_nonce
from oracle.verification.verify import (
    Reason,
    Rejection,
    VerificationContext,
    VerificationResult,
    authenticate,
    leaf_of,
    verify,
)
from proofnet.limits import TokenBuckets
from proofnet.messages.attestation import Attestation

log = logging.getLogger("oracle.intake")


@dataclass(frozen=True)
class Accepted:
    record: AttestationRecord
    created: bool  # False: the same attestation was already stored


class TooManyAttestations(Exception):
    """This worker key sent more than its rate; it may send again after `retry_after_s`."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(
            f"too many attestations from this worker key; retry in {retry_after_s:.0f}s"
        )
        self.retry_after_s = retry_after_s


class RegistryUnavailable(Exception):
    """The API could not say whether the worker is registered; the worker retries later."""


class Intake:
    def __init__(
        self,
        store: AttestationStore,
        ctx: VerificationContext,
        metrics: OracleMetrics,
        *,
        workers: int = 2,
        inline: bool = False,
        verifier: str = "",
        per_key: TokenBuckets | None = None,
    ) -> None:
        self.store = store
        self.per_key = per_key
        self.ctx = ctx
        self.metrics = metrics
        self.inline = inline
        self.verifier = verifier
        self._pool = None if inline else ThreadPoolExecutor(workers, thread_name_prefix="verify")
        self._in_flight: set[int] = set()
        # Attestations authenticated by `accept` and not yet verified: their verification
        # skips the repeated signature check (bounded: entries leave when verified).
        self._authenticated: dict[int, Attestation] = {}
        self._lock = threading.Lock()
        # Signalled whenever a verification finishes, so an inline accept can wait for a
        # verification the sweeper started first.
        self._finished = threading.Condition(self._lock)
        # Each verdict goes to the API, which releases results to the submitter only with
        # it (oracle.intake.announce); a feed that cannot post (tests, the demo) skips it.
        sink = ctx.feed if callable(getattr(ctx.feed, "post_verdict", None)) else None
        self.announcer = None if sink is None else Announcer(sink)  # type: ignore[arg-type]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def accept(self, cose: bytes) -> Accepted:
        """Authenticate, admit and store; schedules verification. Raises `Rejection`,
        `TooManyAttestations` or `RegistryUnavailable`."""
        try:
            att = authenticate(cose, self.ctx)
            self._admit(att)
        except Rejection as exc:
            self.metrics.refused.labels(str(exc.reason)).inc()
            log.info("attestation refused: %s", exc.message, extra={"reason": str(exc.reason)})
            raise
        record, created = self.store.receive(att, cose)
        assert record.id is not None
        extra = {
            "attestation_id": record.id,
            "job_id": record.job_id,
            "escrow": record.escrow_ref,
            "worker_key": record.worker_key,
        }
        if created:
            self.metrics.received.inc()
            log.info("attestation received", extra=extra)
            with self._lock:
                self._authenticated[record.id] = att
            self.schedule(record.id)
        else:
            log.info("attestation received again; keeping the stored one", extra=extra)
        if self.inline and created:
            with self._finished:
                self._finished.wait_for(lambda: record.id not in self._in_flight, timeout=60)
            record = self.store.get(record.id) or record
        return Accepted(record, created)

    def take_lost_claims(self, job_id: str) -> int:
        """Submit the claims the job's lost attempts signed (`oracle.intake.lost_claims`),
        as their workers would; how many were new. Never raises: an unreachable API or a
        refused claim is logged (the claim is not paid until it is taken)."""
        try:
            claims = lost_claims(self.ctx.feed, job_id)
        except FeedError as exc:
            log.warning("cannot read job %s's lost attempts: %s", job_id, exc)
            return 0
        taken = 0
        for cose in claims:
            try:
                if self.store.holder_of_leaf(leaf_of(cose)) is not None:
                    continue  # taken before: stored with its verdict (or being verified)
            except Exception:  # not a COSE attestation: `accept` refuses it with its reason
                pass
            try:
                taken += self.accept(cose).created
            except (Rejection, TooManyAttestations, RegistryUnavailable) as exc:
                log.warning("a lost attempt's claim of job %s is not taken: %s", job_id, exc)
        return taken

    def _admit(self, att: Attestation) -> None:
        """Only a registered worker's attestations are stored, within its rate."""
        if self.per_key is not None:
            wait = self.per_key.take(att.worker_key)
            if wait > 0:
                raise TooManyAttestations(wait)
        try:
            worker = self.ctx.feed.worker(att.worker_key)
        except FeedError as exc:
            raise RegistryUnavailable(f"cannot ask the API about this worker: {exc}") from exc
        if worker is None:
            raise Rejection(
                Reason.WORKER_UNREGISTERED,
                f"worker {att.worker_key} is not registered with the API; register first",
            )

    def schedule(self, attestation_id: int) -> Future[Applied | None] | None:
        with self._lock:
            if attestation_id in self._in_flight:
                return None
            self._in_flight.add(attestation_id)
        if self._pool is None:
            self._run(attestation_id)
            return None
        return self._pool.submit(self._run, attestation_id)

    def sweep(self, limit: int = 100) -> int:
        """Schedule every received attestation whose verification is due; returns how many.
        Also asks again for the lost attempts' claims of resumed jobs whose escrow waits
        (a claim the API did not hold yet, or could not serve, the first time), and posts
        again the verdicts the API did not take."""
        if self.announcer is not None:
            self.announcer.retry()
        due = self.store.due(limit=limit)
        for row in due:
            assert row.id is not None
            self.schedule(row.id)
        for job_id in self.store.attempt_jobs_waiting(limit=limit):
            self.take_lost_claims(job_id)
        return len(due)

    def _run(self, attestation_id: int) -> Applied | None:
        try:
            return self.verify_one(attestation_id)
        except Exception:  # a verifier thread must survive anything one attestation does
            log.exception("verification crashed", extra={"attestation_id": attestation_id})
            return None
        finally:
            with self._finished:
                self._in_flight.discard(attestation_id)
                self._authenticated.pop(attestation_id, None)
                self._finished.notify_all()

    def _announce(
        self, row: AttestationRecord, applied: Applied, result: VerificationResult
    ) -> None:
        nonce = attested_nonce(row.cose)
        if self.announcer is None or nonce is None:
            return
        self.announcer.announce(
            Verdict(
                row.job_id,
                nonce,
                applied.status,
                result.fault,
                applied.reason,
                result.message if applied.status == "rejected" or result.fault else "",
            )
        )

    def verify_one(self, attestation_id: int) -> Applied | None:
        row = self.store.get(attestation_id)
        if row is None or row.status != "received":
            return None
        started = datetime.now(UTC)
        t0 = time.perf_counter()
        with self._lock:
            authenticated = self._authenticated.get(attestation_id)
        result = verify(row.cose, self.ctx, own_id=attestation_id, authenticated=authenticated)
        elapsed = time.perf_counter() - t0
        self.metrics.latency.observe(elapsed)
        applied = self.store.apply(
            attestation_id,
            result,
            started_at=started,
            duration_ms=elapsed * 1000,
            verifier=self.verifier,
        )
        extra = {
            "attestation_id": attestation_id,
            "job_id": row.job_id,
            "escrow": row.escrow_ref,
            "status": applied.status,
            "reason": applied.reason or None,
            "duration_ms": round(elapsed * 1000, 3),
        }
        if not applied.changed:
            return applied
        self._announce(row, applied, result)
        if applied.status == "verified":
            self.metrics.verified.inc()
            log.info("attestation verified", extra=extra)
            if row.unit_index is not None:
                for waiting in self.store.waiting_in_escrow(row.escrow_ref):
                    if waiting != attestation_id:
                        self.schedule(waiting)
            if row.attempt is not None:
                self.take_lost_claims(row.job_id)
        elif applied.status in ("rejected", "unproven"):
            self.metrics.rejected.labels(applied.reason).inc()
            log.info("attestation rejected: %s", result.message, extra=extra)
        else:
            self.metrics.retried.inc()
            log.warning("verification postponed: %s", result.message, extra=extra)
        return applied
