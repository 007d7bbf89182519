"""The oracle's durable store of attestations and verdicts (SQLite or PostgreSQL).

`verify` decides; this module records. Every state change checks the current status in
the same statement, so two verifiers (threads or oracle processes sharing a database)
cannot both move one attestation, and the UNIQUE constraints in `oracle.models` make the
database itself refuse a second payable attestation for one escrow (or, for topology jobs,
for one unit of an escrow).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, Table, bindparam, func, insert, update
from sqlalchemy import select as core_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from oracle.models import (
    PAYABLE_STATUSES,
    RECEIVED,
    REJECTED,
    UNPROVEN,
    VERIFIED,
    AttestationRecord,
    EarlyCheckRecord,
    SpotCheckRecord,
    VerificationRecord,
    escrow_ref,
    payable_key,
)
from oracle.storage import cancel_marks
from oracle.storage.db import open_session
from oracle.storage.schema import create_tables
from oracle.verification.early import EarlyVerdict
from oracle.verification.unit_checks import PayableUnit, attested_nonce
from oracle.verification.verify import Reason, VerificationResult, leaf_of
from proofnet.messages.attestation import Attestation

MAX_RETRY_DELAY_S = 300.0


def _attestations() -> Table:
    return AttestationRecord.__table__  # type: ignore[attr-defined, no-any-return]


_HOLDER_OF_LEAF = core_select(_attestations().c.id).where(
    _attestations().c.leaf_hash == bindparam("leaf")
)
_PAYABLE_FOR_ESCROW = core_select(_attestations().c.id, _attestations().c.status).where(
    _attestations().c.payable_escrow == bindparam("escrow")
)
_PAYABLE_UNITS = core_select(
    _attestations().c.unit_index,
    _attestations().c.id,
    _attestations().c.status,
    _attestations().c.unit_output,
    _attestations().c.cose,
).where(
    _attestations().c.escrow_ref == bindparam("escrow"),
    _attestations().c.payable_escrow.is_not(None),
    _attestations().c.unit_index.is_not(None),
)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _verdict_values(
    result: VerificationResult,
    key: str,
    attempts: int,
    now: datetime,
    max_retry_delay_s: float = MAX_RETRY_DELAY_S,
) -> dict[str, object]:
    """The columns a verdict sets on a `received` row (the same keys for every outcome);
    `key` is the row's payable key (`oracle.models.payable_key`)."""
    if result.outcome == "verified":
        # A verified attestation says why only when the fault is the job's.
        status, payable, reason, retry_at = VERIFIED, key, "", None
        message = result.message[:2000] if result.fault else ""
    elif result.outcome in ("rejected", "unproven"):
        status, payable = (REJECTED if result.outcome == "rejected" else UNPROVEN), None
        reason, message, retry_at = str(result.reason), result.message[:2000], None
    else:
        delay = min(max_retry_delay_s, 2.0 ** min(attempts + 1, 16))
        status, payable, reason = RECEIVED, None, ""
        message, retry_at = result.message[:2000], now + timedelta(seconds=delay)
    return {
        "status": status,
        "payable_escrow": payable,
        "reason": reason,
        "message": message,
        "retry_at": retry_at,
        "fault": result.fault,
        "stop_evidence": None if result.stop is None else result.stop.to_json(),
        "attempts": attempts + 1,
        "updated_at": now,
    }


@dataclass(frozen=True)
class StoreSnapshot:
    """The store's answers for one batch, read in two queries (a `StoreView`). The UNIQUE
    constraints still decide when two verifiers race, so a stale snapshot cannot pay twice."""

    leaves: dict[str, int]
    payable: dict[str, tuple[int, str]]
    # escrow out-ref -> unit index -> its payable attestation (escrows of unit attestations)
    units: dict[str, dict[int, PayableUnit]] = field(default_factory=dict)
    # escrow out-ref -> why it is not paid: this oracle co-signed its cancel
    cancelled: dict[str, str] = field(default_factory=dict)

    def holder_of_leaf(self, leaf_hash: str) -> int | None:
        return self.leaves.get(leaf_hash)

    def cancelled_escrow(self, escrow: str) -> str | None:
        return self.cancelled.get(escrow)

    def payable_for_escrow(self, escrow: str) -> tuple[int, str] | None:
        return self.payable.get(escrow)

    def payable_units(self, escrow: str) -> Mapping[int, PayableUnit]:
        return self.units.get(escrow, {})


@dataclass(frozen=True)
class Applied:
    """What `apply` did to one attestation."""

    attestation_id: int
    status: str
    reason: str
    changed: bool  # False when the row had already left `received` (nothing written)


class AttestationStore:
    def __init__(self, engine: Engine, *, max_retry_delay_s: float = MAX_RETRY_DELAY_S) -> None:
        self.engine = engine
        # A postponed verification is tried again after 2, 4, 8, ... seconds, up to this.
        self.max_retry_delay_s = max_retry_delay_s

    def create_schema(self) -> None:
        """Create the oracle's tables (and any settlement tables already imported), and
        upgrade tables an older version created (`oracle.storage.schema`)."""
        create_tables(self.engine)

    def session(self) -> Session:
        return open_session(self.engine)

    # --- intake -------------------------------------------------------------------------

    def receive(
        self, att: Attestation, cose: bytes, *, now: datetime | None = None
    ) -> tuple[AttestationRecord, bool]:
        """Store an authenticated attestation as `received`; (row, created). The same
        attestation sent again returns the stored row and created=False."""
        now = now or _utcnow()
        leaf = leaf_of(cose)
        ref = att.domain.escrow
        row = AttestationRecord(
            job_id=att.job_id,
            escrow_tx_id=ref.tx_id,
            escrow_index=ref.index,
            escrow_ref=escrow_ref(ref.tx_id, ref.index),
            worker_key=att.worker_key,
            payout_address=att.payout_address,
            amount=att.amount,
            cose=bytes(cose),
            leaf_hash=leaf,
            status=RECEIVED,
            received_at=now,
            updated_at=now,
            unit_index=None if att.unit is None else att.unit.index,
            unit_output=None if att.unit is None else att.unit.output,
            attempt=None if att.segments is None else att.segments.attempt,
        )
        with self.session() as s:
            s.add(row)
            try:
                s.commit()
            except IntegrityError:
                s.rollback()
                existing = s.exec(
                    select(AttestationRecord).where(AttestationRecord.leaf_hash == leaf)
                ).first()
                if existing is None:  # the constraint that fired was not the leaf's
                    raise
                return existing, False
            s.refresh(row)
            return row, True

    def receive_many(self, items: Sequence[tuple[Attestation, bytes]]) -> list[int]:
        """Store many authenticated attestations in one transaction; their row ids in order.
        Attestations already stored keep their row (and id)."""
        now = _utcnow()
        ids: list[int] = []
        with self.session() as s:
            leaves = [leaf_of(cose) for _, cose in items]
            existing = dict(
                s.exec(
                    select(AttestationRecord.leaf_hash, AttestationRecord.id).where(
                        col(AttestationRecord.leaf_hash).in_(leaves)
                    )
                ).all()
            )
            fresh: dict[str, dict[str, object]] = {}
            for (att, cose), leaf in zip(items, leaves, strict=True):
                if leaf in existing or leaf in fresh:
                    continue
                ref = att.domain.escrow
                fresh[leaf] = {
                    "job_id": att.job_id,
                    "escrow_tx_id": ref.tx_id,
                    "escrow_index": ref.index,
                    "escrow_ref": escrow_ref(ref.tx_id, ref.index),
                    "payable_escrow": None,
                    "worker_key": att.worker_key,
                    "payout_address": att.payout_address,
                    "amount": att.amount,
                    "cose": bytes(cose),
                    "leaf_hash": leaf,
                    "status": RECEIVED,
                    "reason": "",
                    "message": "",
                    "attempts": 0,
                    "received_at": now,
                    "updated_at": now,
                    "retry_at": None,
                    "unit_index": None if att.unit is None else att.unit.index,
                    "unit_output": None if att.unit is None else att.unit.output,
                    "attempt": None if att.segments is None else att.segments.attempt,
                }
            if fresh:
                table = AttestationRecord.__table__  # type: ignore[attr-defined]
                # Multi-row INSERT ... RETURNING (SQLite and PostgreSQL both have it).
                # Rows come back keyed by leaf hash, so their order does not matter; asking
                # for parameter order would make SQLite insert one row per statement.
                inserted = s.connection().execute(
                    insert(table).returning(table.c.leaf_hash, table.c.id),
                    list(fresh.values()),
                )
                existing.update({str(leaf): int(i) for leaf, i in inserted})
            ids = [int(existing[leaf] or 0) for leaf in leaves]
            s.commit()
        return ids

    # --- reads --------------------------------------------------------------------------

    def get(self, attestation_id: int) -> AttestationRecord | None:
        with self.session() as s:
            return s.get(AttestationRecord, attestation_id)

    def for_job(self, job_id: str) -> list[AttestationRecord]:
        with self.session() as s:
            rows = s.exec(
                select(AttestationRecord)
                .where(AttestationRecord.job_id == job_id)
                .order_by(col(AttestationRecord.id))
            ).all()
            return list(rows)

    def verifications(self, attestation_id: int) -> list[VerificationRecord]:
        with self.session() as s:
            return list(
                s.exec(
                    select(VerificationRecord)
                    .where(VerificationRecord.attestation_id == attestation_id)
                    .order_by(col(VerificationRecord.id))
                ).all()
            )

    # --- early replay of the first segment ---------------------------------------------

    def record_early(self, verdict: EarlyVerdict, *, now: datetime | None = None) -> bool:
        """Keep the early verdict on a lease's first segment; False when one was already
        kept for that lease (the first decided verdict stands)."""
        row = EarlyCheckRecord(
            nonce=verdict.nonce,
            job_id=verdict.job_id,
            attempt=verdict.attempt,
            status="passed" if verdict.passed else "failed",
            fault=verdict.fault,
            reason=str(verdict.reason or ""),
            message=verdict.message[:2000],
            prefix_root=verdict.prefix_root,
            verifier=verdict.verifier,
            report=verdict.report,
            checked_at=now or _utcnow(),
        )
        with self.session() as s:
            s.add(row)
            try:
                s.commit()
            except IntegrityError:
                s.rollback()
                return False
        return True

    def early_decided(self, nonces: Iterable[str]) -> set[str]:
        """The leases (nonces) among `nonces` whose first segment has an early verdict."""
        wanted = list(nonces)
        if not wanted:
            return set()
        with self.session() as s:
            rows = s.exec(
                select(EarlyCheckRecord.nonce).where(col(EarlyCheckRecord.nonce).in_(wanted))
            ).all()
            return set(rows)

    def early_job_faults(self, nonces: Iterable[str]) -> list[EarlyCheckRecord]:
        """The early verdicts among `nonces`' leases that found the job at fault: what this
        oracle signs and posts to the API, again each round while the lease runs."""
        wanted = list(nonces)
        if not wanted:
            return []
        with self.session() as s:
            return list(
                s.exec(
                    select(EarlyCheckRecord).where(
                        col(EarlyCheckRecord.nonce).in_(wanted), EarlyCheckRecord.fault == "job"
                    )
                ).all()
            )

    def early_checks(self, job_id: str) -> list[EarlyCheckRecord]:
        with self.session() as s:
            return list(
                s.exec(
                    select(EarlyCheckRecord)
                    .where(EarlyCheckRecord.job_id == job_id)
                    .order_by(col(EarlyCheckRecord.id))
                ).all()
            )

    def spot_checks(self, attestation_id: int) -> list[SpotCheckRecord]:
        with self.session() as s:
            return list(
                s.exec(
                    select(SpotCheckRecord)
                    .where(SpotCheckRecord.attestation_id == attestation_id)
                    .order_by(col(SpotCheckRecord.id))
                ).all()
            )

    def snapshot(
        self, attestations: Iterable[Attestation], leaves: Sequence[str] | None = None
    ) -> StoreSnapshot:
        """What `holder_of_leaf` and `payable_for_escrow` answer for these attestations
        (`leaves`: their leaf hashes when the caller has them already)."""
        atts = list(attestations)
        if leaves is None:
            leaves = [a.leaf_hash().hex() for a in atts]
        escrows = [escrow_ref(a.domain.escrow.tx_id, a.domain.escrow.index) for a in atts]
        keys = [
            payable_key(
                e,
                None if a.unit is None else a.unit.index,
                None if a.segments is None else a.segments.attempt,
            )
            for e, a in zip(escrows, atts, strict=True)
        ]
        unit_escrows = sorted({e for e, a in zip(escrows, atts, strict=True) if a.unit})
        table = _attestations()
        units: dict[str, dict[int, PayableUnit]] = {e: {} for e in unit_escrows}
        with self.engine.connect() as conn:
            held = conn.execute(
                core_select(table.c.leaf_hash, table.c.id).where(
                    table.c.leaf_hash.in_(list(leaves))
                )
            ).all()
            payable = conn.execute(
                core_select(table.c.payable_escrow, table.c.id, table.c.status).where(
                    table.c.payable_escrow.in_(keys)
                )
            ).all()
            if unit_escrows:
                rows = conn.execute(
                    core_select(
                        table.c.escrow_ref,
                        table.c.unit_index,
                        table.c.id,
                        table.c.status,
                        table.c.unit_output,
                        table.c.cose,
                    ).where(
                        table.c.escrow_ref.in_(unit_escrows),
                        table.c.payable_escrow.is_not(None),
                        table.c.unit_index.is_not(None),
                    )
                ).all()
                for ref, unit, ident, status, output, cose in rows:
                    units[str(ref)][int(unit)] = PayableUnit(
                        int(ident), str(status), output, attested_nonce(bytes(cose))
                    )
        marks = cancel_marks.find(self.engine, sorted(set(escrows)))
        return StoreSnapshot(
            leaves={str(leaf): int(i) for leaf, i in held if i is not None},
            payable={str(r): (int(i), str(st)) for r, i, st in payable if i is not None},
            units=units,
            cancelled={ref: m.describe() for ref, m in marks.items()},
        )

    # The two replay lookups run once per verification: Core statements, built once, on a
    # plain connection (an ORM session costs several times the query itself).

    def holder_of_leaf(self, leaf_hash: str) -> int | None:
        with self.engine.connect() as conn:
            row = conn.execute(_HOLDER_OF_LEAF, {"leaf": leaf_hash}).first()
        return None if row is None or row[0] is None else int(row[0])

    def payable_for_escrow(self, escrow: str) -> tuple[int, str] | None:
        with self.engine.connect() as conn:
            row = conn.execute(_PAYABLE_FOR_ESCROW, {"escrow": escrow}).first()
        if row is None or row[0] is None:
            return None
        return int(row[0]), str(row[1])

    def cancelled_escrow(self, escrow: str) -> str | None:
        """Why `escrow` is not paid when this oracle co-signed its cancel, else None."""
        found = cancel_marks.find(self.engine, [escrow]).get(escrow)
        return None if found is None else found.describe()

    def payable_units(self, escrow: str) -> Mapping[int, PayableUnit]:
        """The payable unit attestations of escrow out-ref `escrow`, by unit index."""
        with self.engine.connect() as conn:
            rows = conn.execute(_PAYABLE_UNITS, {"escrow": escrow}).all()
        return {
            int(u): PayableUnit(int(i), str(st), out, attested_nonce(bytes(cose)))
            for u, i, st, out, cose in rows
        }

    def attempt_jobs_waiting(self, limit: int = 100) -> list[str]:
        """Jobs with a verified, not yet batched attestation of an attempt of a resumed job:
        their escrow waits for every attempt's claim (`oracle.intake.lost_claims`)."""
        table = _attestations()
        with self.engine.connect() as conn:
            rows = conn.execute(
                core_select(table.c.job_id)
                .where(table.c.status == VERIFIED, table.c.attempt.is_not(None))
                .distinct()
                .limit(limit)
            ).all()
        return sorted(str(r[0]) for r in rows)

    def waiting_in_escrow(self, escrow: str) -> list[int]:
        """Received (not yet decided) unit attestations of `escrow`: those waiting for an
        input unit's verdict, rescheduled when one of its units is verified."""
        table = _attestations()
        with self.engine.connect() as conn:
            rows = conn.execute(
                core_select(table.c.id)
                .where(
                    table.c.escrow_ref == escrow,
                    table.c.status == RECEIVED,
                    table.c.unit_index.is_not(None),
                )
                .order_by(table.c.unit_index, table.c.id)
            ).all()
        return [int(r[0]) for r in rows]

    def due(self, *, now: datetime | None = None, limit: int = 100) -> list[AttestationRecord]:
        """Received attestations whose verification is due (new, or a retry whose time came)."""
        now = now or _utcnow()
        with self.session() as s:
            rows = s.exec(
                select(AttestationRecord)
                .where(
                    AttestationRecord.status == RECEIVED,
                    (col(AttestationRecord.retry_at).is_(None))
                    | (col(AttestationRecord.retry_at) <= now),
                )
                .order_by(col(AttestationRecord.id))
                .limit(limit)
            ).all()
            return list(rows)

    def count_by_status(self) -> dict[str, int]:
        with self.session() as s:
            rows = s.exec(
                select(AttestationRecord.status, func.count(col(AttestationRecord.id))).group_by(
                    AttestationRecord.status
                )
            ).all()
            return {str(status): int(n) for status, n in rows}

    # --- verdicts -----------------------------------------------------------------------

    def apply(
        self,
        attestation_id: int,
        result: VerificationResult,
        *,
        now: datetime | None = None,
        started_at: datetime | None = None,
        duration_ms: float = 0.0,
        verifier: str = "",
    ) -> Applied:
        return self.apply_many(
            [(attestation_id, result, started_at, duration_ms)], now=now, verifier=verifier
        )[0]

    def apply_many(
        self,
        items: Sequence[tuple[int, VerificationResult, datetime | None, float]],
        *,
        now: datetime | None = None,
        verifier: str = "",
    ) -> list[Applied]:
        """Record verdicts in one transaction (a batch costs a few statements, not a few per
        attestation). A verdict only moves a row that is still `received`. A verified
        attestation whose escrow another attestation already holds is rejected as
        `escrow_already_claimed`."""
        if not items:
            return []
        now = now or _utcnow()
        try:
            return self._apply_bulk(items, now, verifier)
        except IntegrityError:
            pass
        # Some verified row collided on its escrow: redo one at a time so the others stand.
        return [self._apply_alone(item, now, verifier) for item in items]

    def _apply_bulk(
        self,
        items: Sequence[tuple[int, VerificationResult, datetime | None, float]],
        now: datetime,
        verifier: str,
    ) -> list[Applied]:
        table = AttestationRecord.__table__  # type: ignore[attr-defined]
        ids = [i for i, _r, _s, _d in items]
        with self.session() as s:
            query = select(  # type: ignore[call-overload]
                col(AttestationRecord.id),
                col(AttestationRecord.status),
                col(AttestationRecord.escrow_ref),
                col(AttestationRecord.attempts),
                col(AttestationRecord.reason),
                col(AttestationRecord.unit_index),
                col(AttestationRecord.attempt),
            ).where(col(AttestationRecord.id).in_(ids))
            if self.engine.dialect.name == "postgresql":
                query = query.with_for_update()
            current = {row[0]: row for row in s.exec(query).all()}
            updates: list[dict[str, object]] = []
            verifications: list[dict[str, object]] = []
            spots: list[dict[str, object]] = []
            out: list[Applied] = []
            for attestation_id, result, started, duration in items:
                row = current.get(attestation_id)
                if row is None:
                    raise KeyError(f"no attestation {attestation_id}")
                verifications.append(
                    {
                        "attestation_id": attestation_id,
                        "outcome": result.outcome,
                        "reason": str(result.reason or ""),
                        "message": result.message[:2000],
                        "checks": list(result.checks),
                        "verifier": verifier,
                        "started_at": started or now,
                        "duration_ms": duration,
                    }
                )
                spot = result.spot_check
                if spot is not None and (spot.segments or spot.report is not None):
                    spots.append(
                        {
                            "attestation_id": attestation_id,
                            "seed": spot.seed,
                            "segments": list(spot.segments),
                            "status": "passed"
                            if spot.passed
                            else ("failed" if spot.reason else "error"),
                            "message": spot.message[:2000],
                            "report": spot.report,
                            "verifier": spot.verifier or verifier,
                            "started_at": started or now,
                            "duration_ms": duration,
                        }
                    )
                _id, status, ref, attempts, reason, unit, attempt = row
                if status != RECEIVED:
                    out.append(Applied(attestation_id, str(status), str(reason), False))
                    continue
                key = payable_key(
                    str(ref),
                    None if unit is None else int(unit),
                    None if attempt is None else int(attempt),
                )
                values = _verdict_values(result, key, int(attempts), now, self.max_retry_delay_s)
                updates.append({"_id": attestation_id, **values})
                out.append(
                    Applied(attestation_id, str(values["status"]), str(values["reason"]), True)
                )
            if updates:
                stmt = (
                    update(table)
                    .where(table.c.id == bindparam("_id"), table.c.status == RECEIVED)
                    .values({k: bindparam(k) for k in updates[0] if k != "_id"})
                )
                s.connection().execute(stmt, updates)
            s.connection().execute(insert(VerificationRecord.__table__), verifications)  # type: ignore[attr-defined]
            if spots:
                s.connection().execute(insert(SpotCheckRecord.__table__), spots)  # type: ignore[attr-defined]
            s.commit()
            return out

    def _apply_alone(
        self,
        item: tuple[int, VerificationResult, datetime | None, float],
        now: datetime,
        verifier: str,
    ) -> Applied:
        attestation_id, result, started, duration = item
        with self.session() as s:
            try:
                applied = self._apply_one(
                    s, attestation_id, result, started, duration, now, verifier
                )
                s.commit()
                return applied
            except IntegrityError:
                s.rollback()
        unit = None if result.attestation is None else result.attestation.unit
        claimed = VerificationResult(
            "rejected",
            Reason.ESCROW_ALREADY_CLAIMED,
            "another attestation for this escrow was verified first"
            if unit is None
            else f"another attestation for unit {unit.index} of this escrow was verified first",
            result.checks,
            result.attestation,
            result.spot_check,
        )
        with self.session() as s:
            applied = self._apply_one(s, attestation_id, claimed, started, duration, now, verifier)
            s.commit()
            return applied

    def _apply_one(
        self,
        s: Session,
        attestation_id: int,
        result: VerificationResult,
        started_at: datetime | None,
        duration_ms: float,
        now: datetime,
        verifier: str,
    ) -> Applied:
        row = s.get(AttestationRecord, attestation_id)
        if row is None:
            raise KeyError(f"no attestation {attestation_id}")
        s.add(
            VerificationRecord(
                attestation_id=attestation_id,
                outcome=result.outcome,
                reason=str(result.reason or ""),
                message=result.message[:2000],
                checks=list(result.checks),
                verifier=verifier,
                started_at=started_at or now,
                duration_ms=duration_ms,
            )
        )
        spot = result.spot_check
        if spot is not None and (spot.segments or spot.report is not None):
            s.add(
                SpotCheckRecord(
                    attestation_id=attestation_id,
                    seed=spot.seed,
                    segments=list(spot.segments),
                    status="passed" if spot.passed else ("failed" if spot.reason else "error"),
                    message=spot.message[:2000],
                    report=spot.report,
                    verifier=spot.verifier or verifier,
                    started_at=started_at or now,
                )
            )
        values: dict[str, object] = {"attempts": AttestationRecord.attempts + 1, "updated_at": now}
        if result.outcome == "verified":
            message = result.message[:2000] if result.fault else ""
            values.update(
                status=VERIFIED,
                payable_escrow=row.payable_key,
                reason="",
                message=message,
                fault=result.fault,
                stop_evidence=None if result.stop is None else result.stop.to_json(),
            )
        elif result.outcome in ("rejected", "unproven"):
            values.update(
                fault=result.fault,
                status=REJECTED if result.outcome == "rejected" else UNPROVEN,
                payable_escrow=None,
                reason=str(result.reason),
                message=result.message[:2000],
                retry_at=None,
            )
        else:
            delay = min(self.max_retry_delay_s, 2.0 ** min(row.attempts + 1, 16))
            values.update(retry_at=now + timedelta(seconds=delay), message=result.message[:2000])
        changed = s.execute(
            update(AttestationRecord)
            .where(
                col(AttestationRecord.id) == attestation_id,
                col(AttestationRecord.status) == RECEIVED,
            )
            .values(**values)
        )
        moved = changed.rowcount == 1  # type: ignore[attr-defined]
        s.flush()
        s.refresh(row)
        return Applied(attestation_id, row.status, row.reason, moved)

    # --- for the settlement engine ----------------------------------------------------------

    def transition(
        self, ids: Iterable[int], *, from_status: str, to_status: str, now: datetime | None = None
    ) -> int:
        """Move attestations between payable states (verified/batched/settled) atomically;
        returns how many moved. Rows not in `from_status` are left alone."""
        if from_status not in PAYABLE_STATUSES or to_status not in PAYABLE_STATUSES:
            raise ValueError(f"transitions are between {PAYABLE_STATUSES}")
        now = now or _utcnow()
        with self.session() as s:
            result = s.execute(
                update(AttestationRecord)
                .where(
                    col(AttestationRecord.id).in_(list(ids)),
                    col(AttestationRecord.status) == from_status,
                )
                .values(status=to_status, updated_at=now)
            )
            s.commit()
            return int(result.rowcount)  # type: ignore[attr-defined]
