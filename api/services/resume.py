"""Long jobs resume: a whole job whose lease ended early (released, failed, expired) is
handed to the next provider from the last checkpoint the lost attempt committed and
uploaded, not from step 0.

A worker uploads its proof files under `pot/` as it trains, `pot/prefix.json` (the
manifest of the checkpoints committed so far, `pot.recorder`) among them. When the job is
claimed again, `resume_point` reads the newest lost attempt's prefix and picks its last
checkpoint whose uploaded files are the ones the prefix's leaf commits (weights file hash,
optimizer file hash and RNG bytes bound by the leaf's state hash): a file that is missing,
sealed or forged does not match, and an earlier checkpoint (or the attempt before) is used.
A prefix of a lease that itself resumed must keep the leaves it resumed from, so a chain of
lost attempts never rewrites what an earlier one committed.

The new lease records what it resumed (`Lease.resumed_lease_id`, `resumed_at`) and takes the
lost attempt's nonce, so the resumed run draws the same seed-derived data order. Each
attempt's proved segments follow from these records (`attempt_history`): an attempt proves
from the segment after the checkpoint it resumed at (1 for the first) to the checkpoint the
next attempt resumed from it (to the end of the schedule when it completed).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Connection
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from api.models import Job, JobResult, Lease, Provider
from api.storage import BlobStore
from pot.manifest import (
    PREFIX_NAME,
    Leaf,
    Manifest,
    ProofError,
    optimizer_path,
    rng_path,
    state_hash,
    weights_path,
)
from pot.recorder import POT_SUBDIR
from proofnet.messages.claim import ClaimResume, ResumeFile

PREFIX_RESULT = f"{POT_SUBDIR}/{PREFIX_NAME}"
# A prefix holds hashes only (at most MAX_SEGMENTS leaves of ~400 bytes); an RNG file is
# JSON of a few generators' states. Anything larger is not read.
MAX_PREFIX_BYTES = 8 * 2**20
MAX_RNG_BYTES = 2**20
LOST_OUTCOMES = ("released", "failed", "expired")


@dataclass(frozen=True)
class ResumePoint:
    """Where the next lease of a job starts: checkpoint `at` of lease `lease`'s prefix."""

    lease: Lease
    prefix: Manifest
    at: int
    files: tuple[ResumeFile, ...]

    def claim(self) -> ClaimResume:
        return ClaimResume(
            from_attempt=self.lease.attempt,
            at=self.at,
            step=self.prefix.leaves[self.at].step,
            prefix_root=Manifest(
                steps_per_checkpoint=self.prefix.steps_per_checkpoint,
                data_seed=self.prefix.data_seed,
                leaves=self.prefix.leaves[: self.at + 1],
            ).root,
            files=self.files,
        )


def resume_point(session: Session, store: BlobStore, job: Job) -> ResumePoint | None:
    """The last committed, intact checkpoint of the job's lost attempts (newest first), or
    None: the job starts from step 0."""
    lost = session.exec(
        select(Lease)
        .where(Lease.job_id == job.id, col(Lease.outcome).in_(LOST_OUTCOMES))
        .order_by(col(Lease.id).desc())
    ).all()
    by_id = {lease.id: lease for lease in lost}
    for lease in lost:
        point = _point_of(session, store, lease, by_id)
        if point is not None:
            return point
    return None


def _results(session: Session, lease: Lease) -> dict[str, JobResult]:
    rows = session.exec(
        select(JobResult).where(
            JobResult.lease_id == lease.id, col(JobResult.name).startswith(POT_SUBDIR + "/")
        )
    ).all()
    return {row.name: row for row in rows}


def _read(store: BlobStore, row: JobResult, limit: int) -> bytes | None:
    if row.size > limit:
        return None
    try:
        return store.read_bytes(row.sha256)
    except (OSError, KeyError, FileNotFoundError):
        return None


def committed_prefix(session: Session, store: BlobStore, lease: Lease) -> Manifest | None:
    """The prefix lease `lease` uploaded, if it parses (None otherwise)."""
    row = _results(session, lease).get(PREFIX_RESULT)
    raw = None if row is None else _read(store, row, MAX_PREFIX_BYTES)
    if raw is None:
        return None
    try:
        return Manifest.from_bytes(raw)
    except ProofError:
        return None


def _point_of(
    session: Session, store: BlobStore, lease: Lease, lost: dict[int | None, Lease]
) -> ResumePoint | None:
    rows = _results(session, lease)
    prefix = committed_prefix(session, store, lease)
    if prefix is None:
        return None
    first = 1
    if lease.resumed_lease_id is not None and lease.resumed_at is not None:
        # It resumed another attempt: its prefix must keep the leaves it was handed.
        earlier = lost.get(lease.resumed_lease_id)
        before = None if earlier is None else committed_prefix(session, store, earlier)
        if before is None or not _chains(prefix, before, lease.resumed_at):
            return None
        first = lease.resumed_at + 1
    for at in range(prefix.segments, first - 1, -1):
        files = _checkpoint_files(store, rows, prefix.leaves[at], at)
        if files is not None:
            top = rows[PREFIX_RESULT]
            head = ResumeFile(name=PREFIX_RESULT, sha256=top.sha256, size=top.size)
            return ResumePoint(lease=lease, prefix=prefix, at=at, files=(head, *files))
    return None


def _chains(prefix: Manifest, before: Manifest, at: int) -> bool:
    return (
        (prefix.steps_per_checkpoint, prefix.data_seed)
        == (before.steps_per_checkpoint, before.data_seed)
        and len(before.leaves) > at
        and prefix.leaves[: at + 1] == before.leaves[: at + 1]
    )


def _checkpoint_files(
    store: BlobStore, rows: dict[str, JobResult], leaf: Leaf, at: int
) -> tuple[ResumeFile, ...] | None:
    """Checkpoint `at`'s three uploaded files when they are the ones `leaf` commits."""
    names = checkpoint_names(at)
    found = [rows.get(name) for name in names]
    if any(row is None for row in found):
        return None
    weights, optim, rng = (row for row in found if row is not None)
    if weights.sha256 != leaf.weights:
        return None
    raw = _read(store, rng, MAX_RNG_BYTES)
    if raw is None or state_hash(optim.sha256, raw) != leaf.state:
        return None
    return tuple(ResumeFile(name=r.name, sha256=r.sha256, size=r.size) for r in found if r)


def checkpoint_names(at: int) -> list[str]:
    """The uploaded names of checkpoint `at`'s weights, optimizer and RNG files."""
    return [
        f"{POT_SUBDIR}/{path(Path(), at).name}" for path in (weights_path, optimizer_path, rng_path)
    ]


def resume_file(session: Session, lease: Lease, position: int) -> ResumeFile | None:
    """File `position` of what lease `lease` was handed to resume from (None: no such)."""
    if lease.resumed_lease_id is None or lease.resumed_at is None:
        return None
    lost = session.get(Lease, lease.resumed_lease_id)
    if lost is None:
        return None
    rows = _results(session, lost)
    names = [PREFIX_RESULT, *checkpoint_names(lease.resumed_at)]
    if not 0 <= position < len(names) or names[position] not in rows:
        return None
    row = rows[names[position]]
    return ResumeFile(name=row.name, sha256=row.sha256, size=row.size)


# --- history ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptRow:
    """One whole-job attempt as the job view shows it: who ran it, how it ended, and the
    segments of the proof it proved (`last` None: to the end of the schedule)."""

    attempt: int
    provider: str | None
    outcome: str | None
    resumed_from_attempt: int | None
    resumed_at: int | None
    first_segment: int
    last_segment: int | None
    proved: bool  # whether any segment of the final proof is this attempt's


def feed_attempts(session: Session, job: Job) -> list[dict[str, object]]:
    """The oracle feed's view of a whole job's attempts (`attempt_history` with each
    lease's worker, nonce, times and proof uploads): what the oracle checks a resumed proof
    against (the prefix it resumed) and pays each attempt's segments by."""
    assert job.id is not None
    leases = {
        lease.attempt: lease
        for lease in session.exec(
            select(Lease).where(Lease.job_id == job.id, col(Lease.unit_id).is_(None))
        ).all()
    }
    out: list[dict[str, object]] = []
    for row in attempt_history(session, job.id):
        lease = leases[row.attempt]
        provider = session.get(Provider, lease.provider_id)
        assert provider is not None
        out.append(
            {
                "attempt": row.attempt,
                "worker_key": provider.worker_key,
                "payout_address": provider.payout_address,
                "nonce": lease.nonce,
                "outcome": row.outcome,
                "started_at": _iso(lease.created_at),
                "ended_at": None if lease.ended_at is None else _iso(lease.ended_at),
                "resumed_from_attempt": row.resumed_from_attempt,
                "resumed_at": row.resumed_at,
                "first_segment": row.first_segment,
                "last_segment": row.last_segment,
                "proved": row.proved,
                # Its proof uploads (name -> SHA-256): the oracle reads the prefix a later
                # attempt resumed, and the files that replay this attempt's segments.
                "results": {name: r.sha256 for name, r in _results(session, lease).items()},
            }
        )
    return out


def _iso(at: datetime) -> str:
    # SQLite hands datetimes back naive; every time the API stores is UTC.
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).isoformat()


def attempt_result_row(session: Session, job: Job, attempt: int, name: str) -> JobResult | None:
    """Proof upload `name` of the job's whole-job attempt `attempt` (None: no such)."""
    lease = session.exec(
        select(Lease).where(
            Lease.job_id == job.id, col(Lease.unit_id).is_(None), Lease.attempt == attempt
        )
    ).first()
    return None if lease is None else _results(session, lease).get(name)


def attempt_history(conn: Session | Connection, job_pk: int) -> list[AttemptRow]:
    """The job's whole-job attempts in order, with the segments each proved. An attempt
    resumed by a later one proved up to the checkpoint that one resumed at; the completed
    attempt to the end; a lost attempt nobody resumed from proved nothing that counts."""
    stmt = (
        sa_select(
            col(Lease.id),
            col(Lease.attempt),
            col(Provider.key_id),
            col(Lease.outcome),
            col(Lease.resumed_lease_id),
            col(Lease.resumed_at),
        )
        .select_from(Lease)
        .outerjoin(Provider, col(Provider.id) == col(Lease.provider_id))
        .where(col(Lease.job_id) == job_pk, col(Lease.unit_id).is_(None))
        .order_by(col(Lease.id))
    )
    rows = conn.execute(stmt).all()
    attempt_of = {r[0]: r[1] for r in rows}
    resumed_by = {r[4]: r[5] for r in rows if r[4] is not None}
    out = []
    for lease_id, attempt, provider, outcome, resumed_id, resumed_at in rows:
        first = 1 if resumed_at is None else resumed_at + 1
        if lease_id in resumed_by:
            last: int | None = resumed_by[lease_id]
            proved = last is not None and last >= first
        else:
            last = None
            proved = outcome in (None, "completed")
        out.append(
            AttemptRow(
                attempt=attempt,
                provider=provider,
                outcome=outcome,
                resumed_from_attempt=attempt_of.get(resumed_id),
                resumed_at=resumed_at,
                first_segment=first,
                last_segment=last,
                proved=proved,
            )
        )
    return out
