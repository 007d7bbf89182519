"""How long an escrow must last: every attempt of the job's run, its storage term, then the
settlement window.

After its last possible attempt a job still needs time for the oracles to settle it; past
the deadline the submitter may take the escrow back. Pure arithmetic over the spec.
"""

from __future__ import annotations

from proofnet.messages.jobspec import JobSpec
from proofnet.messages.topology import plan


def escrow_deadline_ms(
    chain_now_ms: int, spec: JobSpec, max_attempts: int, settlement_window_s: int
) -> int:
    """Room for every attempt at the job's full duration, then the settlement window. A job
    with a topology has room for every attempt of each unit on its longest chain of units
    that run one after another (`sequential_units`). A job that keeps storage also has room
    for its storage term: its copies are paid from this escrow once the term is over."""
    attempts_ms = spec.resources.max_duration_s * 1000 * max_attempts
    term_ms = 0 if spec.storage is None else spec.storage.term_s * 1000
    return (
        chain_now_ms + attempts_ms * sequential_units(spec) + term_ms + settlement_window_s * 1000
    )


def sequential_units(spec: JobSpec) -> int:
    """How many units of the job must run one after another: 1 without a topology or for a
    cluster (its nodes run together), else the longest chain of waits in the plan."""
    if spec.topology is None:
        return 1
    units = {u.index: u for u in plan(spec.topology)}
    depth: dict[int, int] = {}
    # Waits may name a higher index (a stage waits for an evaluation numbered after it), so
    # depths are filled in dependency order rather than index order.
    pending = sorted(units)
    while pending:
        waiting = []
        for i in pending:
            if all(a in depth for a in units[i].after):
                depth[i] = 1 + max((depth[a] for a in units[i].after), default=0)
            else:
                waiting.append(i)
        if len(waiting) == len(pending):  # pragma: no cover - plan() builds acyclic waits
            raise ValueError("the topology's units wait on each other in a cycle")
        pending = waiting
    return max(depth.values())
