"""What a claim says about the unit of a topology job a worker leased, checked against the plan.

The API hands out a *unit* of a relay pipeline or multi-node cluster (docs/topologies.md)
as `ClaimPublic.unit`. The worker does not take the API's word for what the unit is: the
spec (which hashes to the job id) fixes every unit through `proofnet.messages.topology.plan`,
so the claimed kind, amount, shards, input units, evaluated unit and rank must be the
planned ones. What only the API knows (the hashes of the input checkpoints other workers
produced, the cluster's state) is taken as given and verified on arrival.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from proofnet.messages.jobspec import JobSpec
from proofnet.messages.topology import UNIT_KINDS, Unit, UnitKind, plan

ClusterPhase = Literal["waiting", "ready", "failed"]
CLUSTER_PHASES: tuple[str, ...] = ("waiting", "ready", "failed")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# host:port, the host a name, IPv4 address or [IPv6] address.
_ENDPOINT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253}):([0-9]{1,5})")
_RDZV_ID = re.compile(r"[A-Za-z0-9_.:-]{1,200}")


@dataclass(frozen=True)
class UnitInput:
    """Input checkpoint number `position` of a unit: the output of unit `unit`."""

    unit: int
    sha256: str
    size: int


@dataclass(frozen=True)
class ClusterState:
    """A cluster node's view of its cluster, from the claim or a lease heartbeat."""

    state: ClusterPhase
    world_size: int
    rank: int
    endpoint: str | None  # where node 0 hosts the c10d store, once it said so
    rdzv_id: str

    @property
    def ready(self) -> bool:
        return self.state == "ready" and self.endpoint is not None


@dataclass(frozen=True)
class UnitAssignment:
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


def _int(obj: Mapping[str, Any], key: str, *, optional: bool = False) -> int | None:
    value = obj.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be an integer, got {value!r}")
    return value


def _ints(obj: Mapping[str, Any], key: str) -> tuple[int, ...]:
    value = obj.get(key, [])
    if not isinstance(value, list | tuple) or any(
        isinstance(v, bool) or not isinstance(v, int) for v in value
    ):
        raise ValueError(f"{key} must be a list of integers, got {value!r}")
    return tuple(value)


def check_endpoint(endpoint: str) -> str:
    """`endpoint` when it is host:port with a port in 1..65535; ValueError otherwise."""
    match = _ENDPOINT.fullmatch(endpoint)
    if match is None or not 1 <= int(match.group(2)) <= 65535:
        raise ValueError(f"a rendezvous endpoint is host:port, got {endpoint[:120]!r}")
    return endpoint


def parse_cluster(raw: Any) -> ClusterState:
    try:
        return _parse_cluster(raw)
    except ValueError as e:
        raise ValueError(f"cluster: {e}") from e


def _parse_cluster(raw: Any) -> ClusterState:
    if not isinstance(raw, Mapping):
        raise ValueError(f"cluster must be an object, got {type(raw).__name__}")
    state = raw.get("state")
    if state not in CLUSTER_PHASES:
        raise ValueError(f"state {state!r} is not one of {CLUSTER_PHASES}")
    world_size = _int(raw, "world_size")
    rank = _int(raw, "rank")
    assert world_size is not None and rank is not None
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} does not fit world size {world_size}")
    endpoint = raw.get("endpoint")
    if endpoint is not None:
        if not isinstance(endpoint, str):
            raise ValueError(f"endpoint must be a string, got {endpoint!r}")
        check_endpoint(endpoint)
    rdzv_id = raw.get("rdzv_id")
    if not isinstance(rdzv_id, str) or not _RDZV_ID.fullmatch(rdzv_id):
        raise ValueError(f"rdzv_id must be [A-Za-z0-9_.:-]{{1,200}}, got {rdzv_id!r}")
    return ClusterState(
        state=cast(ClusterPhase, state),
        world_size=world_size,
        rank=rank,
        endpoint=endpoint,
        rdzv_id=rdzv_id,
    )


def _inputs(raw: Any) -> tuple[UnitInput, ...]:
    if not isinstance(raw, list | tuple):
        raise ValueError(f"inputs must be a list, got {raw!r}")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise ValueError(f"inputs[{i}] must be an object")
        unit, size = _int(item, "unit"), _int(item, "size")
        assert unit is not None and size is not None
        digest = item.get("sha256")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise ValueError(f"inputs[{i}].sha256 must be 64 lowercase hex digits")
        if size < 0:
            raise ValueError(f"inputs[{i}].size must be >= 0")
        out.append(UnitInput(unit=unit, sha256=digest, size=size))
    return tuple(out)


def parse_unit(raw: Any, spec: JobSpec) -> UnitAssignment:
    """The claimed unit, refused (ValueError) unless it is a unit the spec's plan holds."""
    if spec.topology is None:
        raise ValueError("the job has no topology, so it has no units")
    if not isinstance(raw, Mapping):
        raise ValueError(f"unit must be an object, got {type(raw).__name__}")
    index = _int(raw, "index")
    assert index is not None
    units = plan(spec.topology)
    if not 0 <= index < len(units):
        raise ValueError(f"the spec plans units 0..{len(units) - 1}, not {index}")
    planned = units[index]
    kind = raw.get("kind")
    if kind not in UNIT_KINDS:
        raise ValueError(f"kind {kind!r} is not one of {UNIT_KINDS}")
    inputs = _inputs(raw.get("inputs", []))
    claimed = {
        "kind": kind,
        "shards": _ints(raw, "shards"),
        "amount": _int(raw, "amount"),
        "evaluates": _int(raw, "evaluates", optional=True),
        "rank": _int(raw, "rank", optional=True),
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
    cluster = None if raw.get("cluster") is None else parse_cluster(raw["cluster"])
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
