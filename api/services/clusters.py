"""Multi-node gangs: the N node units of a `MultiNode` job run as one torch.distributed
cluster, so they are leased, started and retried together.

Cluster attempt A: every node unit carries `attempts == A`, and the rendezvous id is
"<job_id>-<A>". A node leased while others are not is `leased`, but its cluster is
`waiting`; the cluster is `ready` once all N nodes are leased (or completed) in attempt A
and rank 0 has published the rendezvous endpoint through its lease heartbeat.

Losing a node (its lease failed, was released or expired) ends attempt A for all: every
other live node lease ends (outcome `cluster_failed`, so its next heartbeat answers 409
naming the lost rank), and all N nodes (completed ones too: the job needs N completions of
one attempt) go back to the queue as attempt A+1. A failed or expired node counts one
failure per cluster attempt against `max_attempts`; a polite release counts none.

A cluster that does not assemble holds its leased providers idle. When the oldest live node
lease of an attempt is `cluster_wait_s` old and some node is still unleased, the waiting
leases end (outcome `cluster_timeout`), the nodes are queued as the next attempt, and they
are not handed out again for `cluster_backoff_s`, so those providers take other work first.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import BadRequest, Conflict
from api.models import Job, JobUnit, Lease
from api.services.unit_outcomes import complete_unit, end_lease, fail_job
from api.services.units import ClusterView, job_units

_HOSTNAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
_PORT = re.compile(r"[0-9]{1,5}")


def check_endpoint(text: str) -> str:
    """A rendezvous endpoint "host:port" (a hostname, an IPv4 address or a bracketed IPv6
    address, and a port 1-65535) that other hosts can dial; returned unchanged."""
    host, sep, port = text.rpartition(":")
    if not sep or not _PORT.fullmatch(port) or not 1 <= int(port) <= 65535:
        raise BadRequest(f"rendezvous must be 'host:port' with a port 1-65535, got {text[:80]!r}")
    if host.startswith("[") and host.endswith("]"):
        try:
            address: Any = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise BadRequest(f"rendezvous host {host[:80]!r} is not an IPv6 address") from None
    elif _HOSTNAME.fullmatch(host):
        try:
            address = ipaddress.IPv4Address(host)
        except ValueError:
            address = None  # a host name
    else:
        raise BadRequest(
            f"rendezvous host {host[:80]!r} must be a host name, an IPv4 address or a "
            "bracketed IPv6 address"
        )
    if address is not None and address.is_unspecified:
        raise BadRequest(f"rendezvous host {host} is a wildcard address other nodes cannot dial")
    return text


def rdzv_id(job: Job, attempt: int) -> str:
    return f"{job.job_id}-{attempt}"


def cluster_view(job: Job, nodes: list[JobUnit], unit: JobUnit) -> ClusterView:
    """Where `unit`'s cluster attempt stands."""
    assert unit.rank is not None
    rank0 = next(n for n in nodes if n.rank == 0)
    assembled = all(n.status in ("leased", "completed") for n in nodes)
    return ClusterView(
        state="ready" if assembled and rank0.endpoint is not None else "waiting",
        world_size=len(nodes),
        rank=unit.rank,
        endpoint=rank0.endpoint,
        rdzv_id=rdzv_id(job, unit.attempts),
    )


def publish_rendezvous(
    session: Session, job: Job, unit: JobUnit, endpoint: str, now: datetime
) -> None:
    """Rank 0 says where it hosts the c10d store (the caller holds the job lock)."""
    if unit.kind != "node":
        raise BadRequest(f"only multi-node leases publish a rendezvous; this is a {unit.kind}")
    if unit.rank != 0:
        raise BadRequest(
            f"only node rank 0 publishes the rendezvous; this lease is rank {unit.rank}"
        )
    endpoint = check_endpoint(endpoint)
    if unit.endpoint == endpoint:
        return
    nodes = job_units(session, job)
    if unit.endpoint is not None and cluster_view(job, nodes, unit).state == "ready":
        raise Conflict(
            f"cluster attempt {unit.attempts} already runs with rendezvous {unit.endpoint}; "
            "it cannot move while the other nodes use it"
        )
    unit.endpoint = endpoint
    unit.updated_at = now
    unit.version += 1
    session.add(unit)


def _requeue_nodes(
    session: Session, job: Job, nodes: list[JobUnit], attempt: int, now: datetime
) -> None:
    for node in nodes:
        node.status = "queued"
        node.attempts = attempt + 1
        node.current_lease_id = None
        node.completed_lease_id = None
        node.output = None
        node.output_size = None
        node.metrics = None
        node.endpoint = None
        node.finished_at = None
        node.updated_at = now
        node.version += 1
        session.add(node)
    job.progress = 0.0
    job.updated_at = now
    job.version += 1
    session.add(job)


def break_cluster(
    session: Session,
    job: Job,
    lost: JobUnit,
    *,
    outcome: str,
    reason: str,
    counts_as_failure: bool,
    now: datetime,
) -> None:
    """Node `lost` left its cluster attempt (its lease already ended with `outcome`): end
    the attempt for every node and queue the next one, or fail the job when attempts ran
    out. The caller holds the job lock and commits."""
    nodes = job_units(session, job)
    attempt = lost.attempts
    lost_what = f"{outcome}: {reason}" if reason else outcome
    message = f"the cluster lost node {lost.rank} ({lost_what})"
    for node in nodes:
        if node.id == lost.id or node.status != "leased" or node.current_lease_id is None:
            continue
        lease = session.get(Lease, node.current_lease_id)
        if lease is not None and lease.ended_at is None:
            end_lease(lease, "cluster_failed", message, now)
            session.add(lease)
    error = f"cluster attempt {attempt} failed: {message}"
    job.last_error = error[:2000]
    if counts_as_failure:
        for node in nodes:
            node.failures += 1
        job.failures += 1
        if max(n.failures for n in nodes) >= job.max_attempts:
            gave_up = f"{error} (gave up after {job.failures} failed cluster attempts)"
            fail_job(session, job, nodes, nodes, gave_up, now)
            return
    _requeue_nodes(session, job, nodes, attempt, now)


def time_out_if_stuck(session: Session, config: ApiConfig, job: Job, now: datetime) -> bool:
    """Release a cluster attempt that has not assembled within `cluster_wait_s` (the caller
    holds the job lock and commits). Returns whether it did."""
    nodes = job_units(session, job)
    leased = [n for n in nodes if n.status == "leased" and n.current_lease_id is not None]
    if not leased or all(n.status in ("leased", "completed") for n in nodes):
        return False
    leases = session.exec(
        select(Lease).where(
            col(Lease.id).in_([n.current_lease_id for n in leased]),
            col(Lease.ended_at).is_(None),
        )
    ).all()
    if not leases:
        return False
    waited = now - min(lease.created_at for lease in leases)
    if waited < timedelta(seconds=config.cluster_wait_s):
        return False
    attempt = leased[0].attempts
    reason = (
        f"cluster attempt {attempt} did not assemble: {len(leased)} of {len(nodes)} nodes "
        f"were leased within {config.cluster_wait_s}s; the waiting nodes were released and "
        f"the cluster is offered again after {config.cluster_backoff_s}s"
    )
    for lease in leases:
        end_lease(lease, "cluster_timeout", reason, now)
        session.add(lease)
    job.last_error = reason
    _requeue_nodes(session, job, nodes, attempt, now)
    for node in nodes:
        node.not_before = now + timedelta(seconds=config.cluster_backoff_s)
    return True


def complete_node(
    session: Session,
    job: Job,
    unit: JobUnit,
    lease: Lease,
    result: dict[str, Any],
    now: datetime,
) -> None:
    """A node finished its part of a ready cluster attempt; the job completes when all N
    nodes of the attempt have."""
    nodes = job_units(session, job)
    view = cluster_view(job, nodes, unit)
    if view.state != "ready":
        raise Conflict(
            f"cluster attempt {unit.attempts} is still {view.state}: a node completes only "
            "after every node was leased and rank 0 published the rendezvous"
        )
    complete_unit(session, job, unit, lease, result, now)
