"""Long jobs resume: a whole job whose lease ended early (released, failed, expired) is
handed to the next provider from the last checkpoint the lost attempt committed and
uploaded, not from step 0.

A worker uploads its proof files under `pot/` as it trains, `pot/prefix.json` (the
manifest of the checkpoints committed so far, `pot.recorder`) among them. When the job is
claimed again, `resume_point` reads the newest lost attempt's prefix and picks its last
checkpoint whose uploaded files are the ones the prefix's leaf commits (weights file hash,
optimizer file hash and RNG bytes bound by the leaf's state hash): a file that is missing,
forged does not match, and an earlier checkpoint (or the attempt before) is used.

A sealed job's checkpoint files are sealed to the submitter (its prefix is not: it holds
commitments only), so the API cannot check them against the leaf. It hands out the last
checkpoint whose three files were uploaded sealed, marks the claim `sealed`, and the new
provider waits for the submitter's resume grant (api/services/resume_grants.py), opens the
files and checks them against the leaf itself before training (worker/sealed_resume.py). A
checkpoint with some files sealed and some in the clear is never handed out.
A prefix of a lease that itself resumed must keep the leaves it resumed from, so a chain of
lost attempts never rewrites what an earlier one committed.

The new lease records what it resumed (`Lease.resumed_lease_id`, `resumed_at`) and takes the
lost attempt's nonce, so the resumed run draws the same seed-derived data order. Each
attempt's proved segments follow from these records (`attempt_history`): an attempt proves
from the segment after the checkpoint it resumed at (1 for the first) to the checkpoint the
next attempt resumed from it (to the end of the schedule when it completed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import cbor2
from sqlalchemy import Connection
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from api.models import Job, JobResult, Lease, Provider
from api.storage import BlobMissing, BlobStore
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
from proofnet.messages.attestation import Attestation, verify_attestation
from proofnet.messages.canonical import parse_canonical_json
from proofnet.messages.claim import ClaimResume, ResumeFile
from proofnet.messages.envelope import MAGIC_BYTES, is_sealed
from proofnet.messages.jobspec import JobSpec

PREFIX_RESULT = f"{POT_SUBDIR}/{PREFIX_NAME}"
# A prefix holds hashes only (at most MAX_SEGMENTS leaves of ~400 bytes); an RNG file is
# JSON of a few generators' states. Anything larger is not read.
MAX_PREFIX_BYTES = 8 * 2**20
MAX_RNG_BYTES = 2**20
MAX_CLAIM_BYTES = 64 * 2**10
LOST_OUTCOMES = ("released", "failed", "expired")


@dataclass(frozen=True)
class ResumePoint:
    """Where the next lease of a job starts: checkpoint `at` of lease `lease`'s prefix."""

    lease: Lease
    prefix: Manifest
    at: int
    files: tuple[ResumeFile, ...]
    sealed: bool = False  # the checkpoint's files are sealed: the worker checks the leaf

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
            sealed=self.sealed,
        )


def resume_point(session: Session, store: BlobStore, job: Job) -> ResumePoint | None:
    """The last committed, intact checkpoint of the job's lost attempts (newest first), or
    None: the job starts from step 0. A spec without a proof schedule is never resumed: its
    segments could not be told apart, so no attempt could be paid for its own."""
    if JobSpec.from_dict(job.spec).schedule is None:
        return None
    lost = session.exec(
        select(Lease)
        .where(Lease.job_id == job.id, col(Lease.outcome).in_(LOST_OUTCOMES))
        .order_by(col(Lease.id).desc())
    ).all()
    by_id = {lease.id: lease for lease in lost}
    below = _sealed_refusals(session, lost)
    for lease in lost:
        point = _point_of(session, store, lease, by_id, below.get(lease.id))
        if point is not None:
            return point
    return None


def _sealed_refusals(session: Session, lost: Sequence[Lease]) -> dict[int | None, int]:
    """Per lost lease, the lowest sealed checkpoint of it a later lease resumed and lost
    without committing a prefix of its own (its worker found the checkpoint forged, the
    submitter never granted its keys, or it was lost before training): the next resume
    steps back before it, so a lost provider that sealed a forged checkpoint (which only
    the resuming worker can see) cannot keep the job failing, and a submitter who never
    grants ends at step 0, not stuck."""
    below: dict[int | None, int] = {}
    for lease in lost:
        if not lease.resume_sealed or lease.resumed_lease_id is None or lease.resumed_at is None:
            continue
        if PREFIX_RESULT in _results(session, lease):
            continue
        held = below.get(lease.resumed_lease_id)
        below[lease.resumed_lease_id] = (
            lease.resumed_at if held is None else min(held, lease.resumed_at)
        )
    return below


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
    session: Session,
    store: BlobStore,
    lease: Lease,
    lost: dict[int | None, Lease],
    below: int | None = None,
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
    last = prefix.segments if below is None else min(prefix.segments, below - 1)
    for at in range(last, first - 1, -1):
        found = _checkpoint_files(store, rows, prefix.leaves[at], at)
        if found is not None:
            files, sealed = found
            top = rows[PREFIX_RESULT]
            head = ResumeFile(name=PREFIX_RESULT, sha256=top.sha256, size=top.size)
            return ResumePoint(
                lease=lease, prefix=prefix, at=at, files=(head, *files), sealed=sealed
            )
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
) -> tuple[tuple[ResumeFile, ...], bool] | None:
    """Checkpoint `at`'s three uploaded files when they are the ones `leaf` commits, and
    whether they are sealed (then only the resuming worker, granted their keys, can check
    them: all three must be sealed)."""
    names = checkpoint_names(at)
    found = [rows.get(name) for name in names]
    if any(row is None for row in found):
        return None
    weights, optim, rng = (row for row in found if row is not None)
    files = tuple(ResumeFile(name=r.name, sha256=r.sha256, size=r.size) for r in found if r)
    raw = _read(store, rng, MAX_RNG_BYTES)
    if raw is None:
        return None
    if is_sealed(raw):
        heads = [_read_head(store, row) for row in (weights, optim)]
        return (files, True) if all(h is not None and is_sealed(h) for h in heads) else None
    if weights.sha256 != leaf.weights or state_hash(optim.sha256, raw) != leaf.state:
        return None
    return files, False


def _read_head(store: BlobStore, row: JobResult) -> bytes | None:
    """The first bytes of an upload (enough to tell a sealed file), not the whole file."""
    head = b""
    try:
        chunks = store.open_chunks(row.sha256)
        for chunk in chunks:
            head += chunk
            if len(head) >= MAGIC_BYTES:
                break
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    except (OSError, KeyError, FileNotFoundError, BlobMissing):
        return None
    return head[:MAGIC_BYTES]


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
    claimed: int | None = None  # what its attestation claims (see `with_claims`)


def with_claims(
    history: list[AttemptRow],
    result: dict[str, object] | None,
    lost: Mapping[int, int] | None = None,
) -> list[AttemptRow]:
    """The history with what each attempt claims: the completing attempt's attestation (the
    amount its completion reported: the share of the price for its segments when it
    resumed), and a lost attempt's signed claim for the segments it proved (`lost`, from
    `lost_claims`), which the oracle takes from its uploads and pays from the same escrow."""
    amount = None if result is None else result.get("amount")
    out = []
    for h in history:
        if h.outcome == "completed" and isinstance(amount, int) and not isinstance(amount, bool):
            h = replace(h, claimed=amount)
        elif h.outcome != "completed" and lost and h.attempt in lost:
            h = replace(h, claimed=lost[h.attempt])
        out.append(h)
    return out


def lost_claims(
    session: Session, store: BlobStore, job: Job, history: list[AttemptRow]
) -> dict[int, int]:
    """attempt -> the amount the claim a lost attempt signed for the segments it proved
    asks (`pot/claim-<last>.cose`, `worker.checkpoint_upload`), when that upload is an
    attestation its own worker signed for those segments. Shown, not paid from here: the
    oracle verifies it (`oracle.verification.lost_attempts`)."""
    assert job.id is not None
    leases = {
        lease.attempt: lease
        for lease in session.exec(
            select(Lease).where(Lease.job_id == job.id, col(Lease.unit_id).is_(None))
        ).all()
    }
    found: dict[int, int] = {}
    for h in history:
        lease = leases.get(h.attempt)
        if lease is None or h.outcome not in LOST_OUTCOMES or h.last_segment is None:
            continue
        row = _results(session, lease).get(f"{POT_SUBDIR}/claim-{h.last_segment}.cose")
        raw = None if row is None else _read(store, row, MAX_CLAIM_BYTES)
        provider = session.get(Provider, lease.provider_id)
        if raw is None or provider is None:
            continue
        att = _signed_claim(raw)
        if (
            att is not None
            and att.worker_key == provider.worker_key
            and att.segments is not None
            and (att.segments.attempt, att.segments.first, att.segments.last)
            == (h.attempt, h.first_segment, h.last_segment)
        ):
            found[h.attempt] = att.amount
    return found


def _signed_claim(raw: bytes) -> Attestation | None:
    """The attestation in `raw` when its signature holds (its domain is the oracle's to
    check), else None."""
    try:
        payload = cbor2.loads(raw)
        payload = payload.value if isinstance(payload, cbor2.CBORTag) else payload
        network = parse_canonical_json(payload[2])["domain"]
        return verify_attestation(
            raw,
            expected_network=str(network["network"]),
            expected_script_hash=str(network["escrow_script_hash"]),
        )
    except Exception:  # an upload is anyone's bytes: unreadable means not shown
        return None


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
