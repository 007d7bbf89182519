"""The units of a job with a topology (docs/topologies.md): their plan, creation, claim
and how they read back.

`plan(spec.topology)` decides the units; this module keeps their state. A unit waits
(`blocked`) until every unit in its `after` completed, then is `queued` with its input
checkpoints fixed (the outputs of its input units). A completed evaluation releases what
waits on it only when its metric passes; otherwise the pipeline stops. The job is
"running" from submission until every unit completed (then "completed"), an evaluation
failed ("stopped"), a unit ran out of attempts ("failed") or the owner cancelled it.

Every change here runs under the job's row lock (taken by `leases.active_lease`, the claim
or the sweep): the job row serialises everything that happens to its units, so there is
one lock order (job, then its units and leases) and no deadlock between them.
What a unit's lease ending does is in `api.services.unit_outcomes`; multi-node gang rules
(cluster attempts) in `api.services.clusters`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, case, exists, func, not_, or_, true
from sqlalchemy import select as sa_select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import Conflict
from api.models import Job, JobEscrow, JobUnit, Lease, Provider, ProviderGpu
from api.services.gpu_challenges import offered_clause
from proofnet.messages.claim import ClaimUnit, ClusterState, UnitInput
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.topology import Evaluation, MultiNode, Relay, Unit, UnitKind, plan

CHECKPOINT_PREFIX = "checkpoint/"


# --- the plan of a job ----------------------------------------------------------------------


@dataclass(frozen=True)
class JobPlan:
    """A job's topology and its units (`units[i].index == i`)."""

    topology: Relay | MultiNode
    units: tuple[Unit, ...]

    @property
    def checkpoint_result(self) -> str | None:
        """The result name a checkpoint is uploaded under, when the topology has one."""
        name = self.topology.checkpoint
        return None if name is None else CHECKPOINT_PREFIX + name

    @property
    def evaluation(self) -> Evaluation | None:
        return self.topology.evaluation if isinstance(self.topology, Relay) else None


_PLANS: dict[str, JobPlan] = {}
_PLANS_LOCK = threading.Lock()
_PLANS_MAX = 1024


def plan_of(job: Job) -> JobPlan:
    """The job's plan. A job's spec never changes (its id is the spec's hash), so plans are
    kept per job id instead of re-validating the spec on every transition."""
    with _PLANS_LOCK:
        hit = _PLANS.get(job.job_id)
    if hit is not None:
        return hit
    topology = JobSpec.from_dict(job.spec).topology
    if topology is None:
        raise ValueError(f"job {job.job_id} has no topology")
    made = JobPlan(topology=topology, units=plan(topology))
    with _PLANS_LOCK:
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        _PLANS[job.job_id] = made
    return made


def create_units(session: Session, job: Job, topology: Relay | MultiNode, now: datetime) -> None:
    """Add the units of a new job (the caller commits): those waiting on nothing are queued."""
    assert job.id is not None
    for unit in plan(topology):
        ready = not unit.after
        session.add(
            JobUnit(
                job_id=job.id,
                index=unit.index,
                kind=unit.kind,
                rank=unit.rank,
                status="queued" if ready else "blocked",
                # A node's attempts is its cluster attempt, the same on every node.
                attempts=1 if unit.kind == "node" else 0,
                inputs=[] if ready else None,
                created_at=now,
                updated_at=now,
            )
        )


def job_units(session: Session, job: Job) -> list[JobUnit]:
    """The job's units in index order, read fresh (the caller holds the job lock)."""
    return list(
        session.exec(
            select(JobUnit)
            .where(JobUnit.job_id == job.id)
            .order_by(col(JobUnit.index))
            .execution_options(populate_existing=True)
        ).all()
    )


# --- claiming ---------------------------------------------------------------------------


def offered_gpus(provider_id: int, config: ApiConfig, now: datetime) -> Any:
    """How many of the provider's GPUs could run the job (correlated to Job): those offered
    (`gpu_challenges.offered_clause`: checked, never failed) with at least its memory."""
    return (
        select(func.count(col(ProviderGpu.id)))
        .where(
            ProviderGpu.provider_id == provider_id,
            col(ProviderGpu.memory_mb) >= col(Job.gpu_memory_mb),
            offered_clause(config, now),
        )
        .correlate(Job)
        .scalar_subquery()
    )


def egress_claimable(accepts_egress: bool) -> Any:
    """The jobs a worker may be handed: without `accepts_egress` (its provider allows no
    network egress), none whose spec asks for it (`egress: true`)."""
    if accepts_egress:
        return true()
    return func.coalesce(col(Job.spec)["egress"].as_boolean(), False).is_(False)


def fitting_gpus(provider_id: int, config: ApiConfig, now: datetime) -> Any:
    """How many of the provider's GPUs are free for the job now (correlated to Job): the
    `offered_gpus` less the GPUs its open leases hold. A GPU holds one lease at a time; a
    lease holds its job's `gpu_count` GPUs. Counting (not naming) the held GPUs is
    conservative on a machine with GPUs of mixed memory: a held small GPU still counts
    against the large ones. The claim locks the provider's row first, so two concurrent
    claims of one provider count each other's leases (`api.services.leases.claim`)."""
    held_job = aliased(Job)
    held = (
        select(func.coalesce(func.sum(held_job.gpu_count), 0))
        .select_from(Lease)
        .join(held_job, col(held_job.id) == col(Lease.job_id))
        .where(col(Lease.provider_id) == provider_id, col(Lease.ended_at).is_(None))
        .scalar_subquery()
    )
    return offered_gpus(provider_id, config, now) - held


def claimable_unit(
    config: ApiConfig,
    provider_id: int,
    now: datetime,
    *,
    accepts_cluster: bool = True,
    accepts_egress: bool = True,
) -> Any:
    """The oldest queued unit (oldest job first, then unit index) this provider fits, with
    its job. A provider never holds two nodes of one cluster: they must be separate hosts;
    and gets none unless it `accepts_cluster` (its runtime can network them)."""
    holds_a_node = (
        exists()
        .where(
            col(Lease.job_id) == col(Job.id),
            col(Lease.provider_id) == provider_id,
            col(Lease.unit_id).is_not(None),
            col(Lease.ended_at).is_(None),
        )
        .correlate(Job)
    )
    stmt = (
        select(JobUnit, Job)
        .join(Job, col(Job.id) == col(JobUnit.job_id))
        .where(
            JobUnit.status == "queued",
            Job.status == "running",
            col(Job.gpu_count) <= fitting_gpus(provider_id, config, now),
            or_(col(JobUnit.not_before).is_(None), col(JobUnit.not_before) <= now),
            or_(col(JobUnit.kind) != "node", not_(holds_a_node)),
        )
        .order_by(col(Job.created_at), col(Job.id), col(JobUnit.index))
        .limit(1)
        # The rows as locked now, not as this session may have loaded them before.
        .execution_options(populate_existing=True)
    )
    if config.claim_requires_escrow:
        stmt = stmt.where(exists().where(col(JobEscrow.job_id) == col(Job.id)))
    if not accepts_cluster:
        stmt = stmt.where(col(JobUnit.kind) != "node")
    return stmt.where(egress_claimable(accepts_egress))


def lease_unit(
    session: Session,
    job: Job,
    unit: JobUnit,
    provider: Provider,
    *,
    token_hash: str,
    nonce: str,
    expires_at: datetime,
    now: datetime,
) -> Lease:
    """Lease a queued unit (the caller holds the job lock and commits)."""
    assert job.id is not None and unit.id is not None and provider.id is not None
    if unit.status != "queued" or job.status != "running":  # pragma: no cover - lock holds
        # Unreachable while the row locks hold; refuse rather than hand out a shared unit.
        session.rollback()
        raise Conflict("unit was claimed concurrently; claim again")
    if unit.kind != "node":
        unit.attempts += 1
    lease = Lease(
        job_id=job.id,
        unit_id=unit.id,
        provider_id=provider.id,
        token_hash=token_hash,
        nonce=nonce,
        attempt=unit.attempts,
        created_at=now,
        expires_at=expires_at,
    )
    session.add(lease)
    session.flush()
    unit.status = "leased"
    unit.current_lease_id = lease.id
    unit.progress, unit.progress_message = 0.0, ""  # the new lease has reported nothing yet
    touch_unit(unit, now)
    job.attempts += 1
    touch_job(job, now)
    session.add_all([unit, job])
    return lease


# --- what a claim hands out -------------------------------------------------------------


# The claim's unit and cluster are the wire messages themselves, built here and served as
# they are (proofnet/messages/claim.py); the names stay for the services that pass them on.
UnitClaim = ClaimUnit
ClusterView = ClusterState


def unit_inputs(unit: JobUnit) -> tuple[UnitInput, ...]:
    return tuple(
        UnitInput(unit=int(i["unit"]), sha256=str(i["sha256"]), size=int(i["size"]))
        for i in unit.inputs or []
    )


def claim_view(job: Job, unit: JobUnit, cluster: ClusterView | None) -> UnitClaim:
    planned = plan_of(job).units[unit.index]
    return UnitClaim(
        index=unit.index,
        kind=cast(UnitKind, unit.kind),
        inputs=unit_inputs(unit),
        shards=planned.shards,
        amount=planned.amount,
        evaluates=planned.evaluates,
        rank=planned.rank,
        cluster=cluster,
    )


# --- reading ----------------------------------------------------------------------------


@dataclass(frozen=True)
class UnitRow:
    """A unit as the job status shows it."""

    index: int
    kind: str
    status: str
    attempts: int
    provider: str | None  # key id of the provider running or having completed it
    output: str | None
    metrics: dict[str, Any] | None
    heartbeat_at: datetime | None
    rank: int | None
    # What its lease last reported while it runs; 1.0 once completed, else 0.0 and "".
    progress: float = 0.0
    progress_message: str = ""


def shown_progress(status: str, progress: float, message: str) -> tuple[float, str]:
    """A unit's progress and message as shown: a lease's report stands only while it runs
    (a unit requeued with its cluster attempt keeps the last report until leased again)."""
    if status == "completed":
        return 1.0, message
    if status == "leased":
        return progress, message
    return 0.0, ""


def unit_rows(session: Session | Connection, job_pk: int) -> list[UnitRow]:
    """The units of job row `job_pk` with their provider, in index order (works on a plain
    connection: the status path reads without the ORM). One query, however many units."""
    lease_id = case(
        (col(JobUnit.current_lease_id).is_not(None), col(JobUnit.current_lease_id)),
        else_=col(JobUnit.completed_lease_id),
    )
    stmt = (
        sa_select(
            col(JobUnit.index),
            col(JobUnit.kind),
            col(JobUnit.status),
            col(JobUnit.attempts),
            col(Provider.key_id),
            col(JobUnit.output),
            col(JobUnit.metrics),
            col(Lease.heartbeat_at),
            col(JobUnit.rank),
            col(JobUnit.current_lease_id),
            col(JobUnit.progress),
            col(JobUnit.progress_message),
        )
        .select_from(JobUnit)
        .outerjoin(Lease, col(Lease.id) == lease_id)
        .outerjoin(Provider, col(Provider.id) == col(Lease.provider_id))
        .where(col(JobUnit.job_id) == job_pk)
        .order_by(col(JobUnit.index))
    )
    return [_unit_row(r) for r in session.execute(stmt).all()]


def _unit_row(r: Any) -> UnitRow:
    progress, message = shown_progress(r[2], r[10], r[11])
    return UnitRow(
        index=r[0],
        kind=r[1],
        status=r[2],
        attempts=r[3],
        provider=r[4],
        output=r[5],
        metrics=r[6],
        heartbeat_at=r[7] if r[9] is not None else None,
        rank=r[8],
        progress=progress,
        progress_message=message,
    )


def job_progress(units: Sequence[JobUnit]) -> float:
    """A topology job's progress: (completed units + the reported progress of the units
    that run) / units. Every unit counts alike, whatever its size: the units are what the
    job is paid and scheduled by."""
    if not units:
        return 0.0
    done = sum(
        1.0 if u.status == "completed" else u.progress if u.status == "leased" else 0.0
        for u in units
    )
    return min(1.0, done / len(units))


def report_progress(
    session: Session,
    job: Job,
    unit: JobUnit,
    progress: float | None,
    message: str | None,
    now: datetime,
) -> None:
    """Record what a unit's lease reported by heartbeat, and the job's progress with it (the
    caller holds the job lock and commits). Nothing is written when nothing changed: a
    waiting cluster node heartbeats twice a second."""
    changed = False
    if progress is not None and progress != unit.progress:
        unit.progress, changed = progress, True
    if message is not None and message[:500] != unit.progress_message:
        unit.progress_message, changed = message[:500], True
    if not changed:
        return
    touch_unit(unit, now)
    session.add(unit)
    session.flush()
    job.progress = job_progress(job_units(session, job))
    touch_job(job, now)
    session.add(job)


# --- bookkeeping ------------------------------------------------------------------------


def touch_unit(unit: JobUnit, now: datetime) -> None:
    unit.updated_at = now
    unit.version += 1


def touch_job(job: Job, now: datetime) -> None:
    job.updated_at = now
    job.version += 1
