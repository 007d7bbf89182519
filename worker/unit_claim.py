"""What a claim says about the unit of a topology job a worker leased, checked against the plan.

The API hands out a *unit* of a relay pipeline or multi-node cluster (docs/topologies.md)
as the claim's `unit` (`proofnet.messages.claim.ClaimUnit`, which fixes its shape). The worker does not take the API's word for what the unit is: the
spec (which hashes to the job id) fixes every unit through `proofnet.messages.topology.plan`,
so the claimed kind, amount, shards, input units, evaluated unit and rank must be the
planned ones. What only the API knows (the hashes of the input checkpoints other workers
produced, the cluster's state) is taken as given and verified on arrival.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from proofnet.messages.claim import (
    ClaimUnit,
    ClusterPhase,
    ClusterState,
    UnitInput,
    check_endpoint,
)
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.topology import Unit, UnitKind, plan

__all__ = [
    "ClusterPhase",
    "ClusterState",
    "UnitAssignment",
    "UnitInput",
    "check_endpoint",
    "parse_cluster",
    "parse_unit",
]


@dataclass(frozen=True)
class UnitAssignment:
    """A claimed unit once checked against the spec's plan (`planned`)."""

    index: int
    kind: UnitKind
    inputs: tuple[UnitInput, ...]
    shards: tuple[int, ...]
    amount: int
    evaluates: int | None
    rank: int | None
    cluster: ClusterState | None
    planned: Unit

    @property
    def input_hashes(self) -> tuple[str, ...]:
        return tuple(i.sha256 for i in self.inputs)


def parse_cluster(raw: Any) -> ClusterState:
    """A cluster object from the API (claim or lease answer); ValueError when malformed."""
    try:
        return ClusterState.model_validate(raw)
    except ValidationError as e:
        raise ValueError(f"cluster: {_errors(e)}") from e


def _errors(e: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in e.errors()
    )


def parse_unit(raw: ClaimUnit, spec: JobSpec) -> UnitAssignment:
    """The claimed unit, refused (ValueError) unless it is a unit the spec's plan holds."""
    if spec.topology is None:
        raise ValueError("the job has no topology, so it has no units")
    index = raw.index
    units = plan(spec.topology)
    if not 0 <= index < len(units):
        raise ValueError(f"the spec plans units 0..{len(units) - 1}, not {index}")
    planned = units[index]
    inputs = raw.inputs
    claimed: dict[str, Any] = {
        "kind": raw.kind,
        "shards": raw.shards,
        "amount": raw.amount,
        "evaluates": raw.evaluates,
        "rank": raw.rank,
        "inputs": tuple(i.unit for i in inputs),
    }
    expected = {
        "kind": planned.kind,
        "shards": planned.shards,
        "amount": planned.amount,
        "evaluates": planned.evaluates,
        "rank": planned.rank,
        "inputs": planned.inputs,
    }
    for field, value in expected.items():
        if claimed[field] != value:
            raise ValueError(
                f"unit {index}: the claim says {field} {claimed[field]!r}, the spec's plan "
                f"says {value!r}"
            )
    cluster = raw.cluster
    if planned.kind == "node":
        if cluster is None:
            raise ValueError(f"unit {index} is a cluster node but the claim has no cluster")
        if cluster.rank != planned.rank or cluster.world_size != len(units):
            raise ValueError(
                f"unit {index}: the cluster says rank {cluster.rank} of {cluster.world_size}, "
                f"the plan says rank {planned.rank} of {len(units)}"
            )
    elif cluster is not None:
        raise ValueError(f"unit {index} is a {planned.kind}, not a node, yet has a cluster")
    return UnitAssignment(
        index=index,
        kind=planned.kind,
        inputs=inputs,
        shards=planned.shards,
        amount=planned.amount,
        evaluates=planned.evaluates,
        rank=planned.rank,
        cluster=cluster,
        planned=planned,
    )
