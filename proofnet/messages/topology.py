"""Jobs that span providers: relay pipelines over data shards, and multi-node clusters.

A job spec may carry a `topology`. Without one, a job is one unit of work run by one worker
(the original shape). With one, the job is split into *units*, each leased, run, attested and
paid on its own, all from the job's single escrow:

* `Relay`: stages train one after another (or in parallel branches), each from the
  checkpoints of the stages it names in `after`, on its own shards of `spec.data`. An
  evaluation unit runs after every `evaluation.every`-th stage of a chain and on the final
  model; the stages after it wait for it, and a failed evaluation stops the pipeline (the
  settlement then pays the verified units and refunds the rest). With `aggregation="average"`
  the final checkpoints of parallel branches are combined by an aggregation unit.
* `MultiNode`: `nodes` workers form one torch.distributed cluster (torchrun, c10d
  rendezvous on node 0); the job starts only when every node is leased.

`plan_units(spec)` is the one place that turns a topology into units; the API schedules by
it, the worker runs by it and the oracle pays by it, so the three cannot disagree.

Unit indices: relay stages keep their stage index (0..S-1); the aggregation unit, if any, is
S; evaluation units follow in the order of the unit they evaluate. Multi-node units are the
node ranks 0..N-1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from proofnet.messages.fields import DecimalStr, Frozen, NonNegInt, PosInt, TupleOf
from proofnet.messages.shards import DataShard

UnitKind = Literal["stage", "eval", "aggregate", "node"]
UNIT_KINDS: tuple[str, ...] = ("stage", "eval", "aggregate", "node")
MAX_STAGES = 1000
MAX_NODES = 64
# How far a provider's evaluation metric may be from a verifier's recomputation (absolute).
DEFAULT_EVAL_TOLERANCE = "0.001"

_METRIC = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")
_FILE = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def _metric(value: str) -> str:
    if not _METRIC.fullmatch(value):
        raise ValueError(f"metric name must match [A-Za-z0-9_.:/-]{{1,64}}, got {value[:80]!r}")
    return value


def _file_name(value: str) -> str:
    # A plain file name in the work dir: the worker writes and reads it at a fixed place.
    if not _FILE.fullmatch(value) or value in (".", ".."):
        raise ValueError(
            f"checkpoint must be a plain file name ([A-Za-z0-9_.-], no '/'), got {value[:80]!r}"
        )
    return value


def _argv(value: tuple[str, ...]) -> tuple[str, ...]:
    if not value:
        raise ValueError("a command must be a non-empty argv list")
    if any("\x00" in arg for arg in value):
        raise ValueError("command arguments cannot contain NUL bytes")
    return value


MetricName = Annotated[str, AfterValidator(_metric)]
FileName = Annotated[str, AfterValidator(_file_name)]
Command = Annotated[TupleOf[str], AfterValidator(_argv)]


class RelayStage(Frozen):
    """One stage: trains on `shards` (indices into `spec.data`, in this order) starting from
    the final checkpoints of the stages in `after` (earlier stage indices, in this order), or
    from the model's own initialisation when `after` is empty (the start of a branch)."""

    shards: Annotated[TupleOf[NonNegInt], Field(min_length=1, max_length=10_000)]
    after: Annotated[TupleOf[NonNegInt], Field(max_length=64)] = ()


class Evaluation(Frozen):
    """Evaluate after every `every`-th stage of a chain (by depth) and on the final model.

    The evaluation unit runs `command` with the checkpoint under evaluation and the held-out
    `data`, and reports `metric` (see the worker's unit environment). The pipeline continues
    when the metric is at most `threshold` (goal "min", e.g. a loss) or at least it (goal
    "max", e.g. an accuracy); otherwise it stops.

    A drawn verifier recomputes every evaluation (docs/topologies.md, "Checked units"): the
    provider's reported metric is paid only when it is within `tolerance` (absolute, in
    the metric's own units; unset: `DEFAULT_EVAL_TOLERANCE`) of the verifier's.
    """

    every: Annotated[int, Field(ge=1, le=MAX_STAGES)]
    metric: MetricName
    goal: Literal["min", "max"]
    threshold: DecimalStr
    command: Command
    data: Annotated[TupleOf[DataShard], Field(min_length=1, max_length=1000)]
    amount: PosInt  # NTX base units paid for each evaluation
    # None: DEFAULT_EVAL_TOLERANCE (and the spec keeps the encoding and job id it had
    # before the field existed).
    tolerance: DecimalStr | None = None

    @property
    def metric_tolerance(self) -> str:
        return DEFAULT_EVAL_TOLERANCE if self.tolerance is None else self.tolerance

    @model_validator(mode="after")
    def _tolerance(self) -> Evaluation:
        if self.tolerance is not None and self.tolerance.startswith("-"):
            raise ValueError("evaluation.tolerance is an absolute difference, never negative")
        return self

    def within_tolerance(self, claimed: int | str, recomputed: int | str) -> bool:
        """Whether a provider's `claimed` metric is within `tolerance` of a verifier's
        `recomputed` one (both integers or decimal strings)."""
        from decimal import Decimal, InvalidOperation

        try:
            a, b = Decimal(str(claimed)), Decimal(str(recomputed))
        except InvalidOperation:
            return False
        if not (a.is_finite() and b.is_finite()):
            return False
        return abs(a - b) <= Decimal(self.metric_tolerance)

    def passes(self, value: int | str) -> bool:
        """Whether a reported metric value (an integer or a decimal string) passes."""
        from decimal import Decimal, InvalidOperation

        try:
            got = Decimal(str(value))
        except InvalidOperation:
            return False
        if not got.is_finite():
            return False
        limit = Decimal(self.threshold)
        return got <= limit if self.goal == "min" else got >= limit


class Relay(Frozen):
    kind: Literal["relay"] = "relay"
    stages: Annotated[TupleOf[RelayStage], Field(min_length=1, max_length=MAX_STAGES)]
    # The file each stage (and the aggregation) writes its final model to, in the work dir.
    checkpoint: FileName
    stage_amount: PosInt  # NTX base units paid for each verified stage
    evaluation: Evaluation | None = None
    # "final": the pipeline's model is its one last stage's checkpoint. "average": the last
    # stages of parallel branches are combined by `aggregate_command` into the final model.
    aggregation: Literal["final", "average"] = "final"
    aggregate_command: Command | None = None
    aggregate_amount: NonNegInt = 0

    @model_validator(mode="after")
    def _shape(self) -> Relay:
        for i, stage in enumerate(self.stages):
            if any(j >= i for j in stage.after):
                raise ValueError(f"stages[{i}].after may only name earlier stages (< {i})")
            if len(set(stage.after)) != len(stage.after):
                raise ValueError(f"stages[{i}].after names a stage twice")
        sinks = _sinks(self.stages)
        if self.aggregation == "final":
            if len(sinks) != 1:
                raise ValueError(
                    f"aggregation 'final' needs exactly one last stage, found {len(sinks)} "
                    f"({list(sinks)}); use aggregation 'average' for parallel branches"
                )
            if self.aggregate_command is not None or self.aggregate_amount:
                raise ValueError("aggregate_command/aggregate_amount need aggregation 'average'")
        else:
            if len(sinks) < 2:
                raise ValueError("aggregation 'average' needs at least two parallel branches")
            if self.aggregate_command is None or self.aggregate_amount < 1:
                raise ValueError(
                    "aggregation 'average' needs aggregate_command and a positive aggregate_amount"
                )
        return self


class MultiNode(Frozen):
    """`nodes` workers, each with `spec.resources`, run the job's last command under torchrun
    (c10d rendezvous hosted by node 0); earlier commands run on every node first."""

    kind: Literal["multi_node"] = "multi_node"
    nodes: Annotated[int, Field(ge=2, le=MAX_NODES)]
    nproc_per_node: Annotated[int, Field(ge=1, le=64)] = 1
    node_amount: PosInt  # NTX base units paid to each node for a completed run
    # Optional file (written by rank 0's node) whose hash every node attests as its output.
    checkpoint: FileName | None = None


Topology = Annotated[Relay | MultiNode, Field(discriminator="kind")]


@dataclass(frozen=True)
class Unit:
    """One leasable, attestable, payable piece of a job."""

    index: int
    kind: UnitKind
    # Units whose completion (and, for evaluations, whose pass) this unit waits for.
    after: tuple[int, ...]
    # Units whose output checkpoints are this unit's inputs, in order.
    inputs: tuple[int, ...]
    # Indices into spec.data (stages) or into evaluation.data (evaluations).
    shards: tuple[int, ...]
    amount: int
    # The unit an evaluation evaluates; None for others.
    evaluates: int | None = None
    # Node rank for multi-node units; None for others.
    rank: int | None = None

    @property
    def produces_checkpoint(self) -> bool:
        return self.kind in ("stage", "aggregate")


def _sinks(stages: tuple[RelayStage, ...]) -> tuple[int, ...]:
    used = {j for s in stages for j in s.after}
    return tuple(i for i in range(len(stages)) if i not in used)


def _depths(stages: tuple[RelayStage, ...]) -> list[int]:
    depth: list[int] = []
    for stage in stages:
        depth.append(1 + max((depth[j] for j in stage.after), default=0))
    return depth


def plan_relay(relay: Relay) -> tuple[Unit, ...]:
    stages = relay.stages
    n = len(stages)
    sinks = _sinks(stages)
    depth = _depths(stages)
    final = n if relay.aggregation == "average" else sinks[0]
    evaluated: list[int] = []
    if relay.evaluation is not None:
        every = relay.evaluation.every
        evaluated = [i for i in range(n) if depth[i] % every == 0 or i == final]
        if final == n:
            evaluated.append(n)
    first_eval = n + (1 if relay.aggregation == "average" else 0)
    eval_index = {u: first_eval + k for k, u in enumerate(evaluated)}

    def gate(i: int) -> tuple[int, ...]:
        # A unit waits for the stage it builds on and, when that stage is evaluated, its pass.
        return (i, eval_index[i]) if i in eval_index else (i,)

    units: list[Unit] = []
    for i, stage in enumerate(stages):
        after = tuple(u for j in stage.after for u in gate(j))
        units.append(Unit(i, "stage", after, stage.after, stage.shards, relay.stage_amount))
    if relay.aggregation == "average":
        after = tuple(u for j in sinks for u in gate(j))
        units.append(Unit(n, "aggregate", after, sinks, (), relay.aggregate_amount))
    if relay.evaluation is not None:
        ev = relay.evaluation
        shards = tuple(range(len(ev.data)))
        for target in evaluated:
            units.append(
                Unit(eval_index[target], "eval", (target,), (target,), shards, ev.amount, target)
            )
    return tuple(units)


def plan_nodes(multi: MultiNode) -> tuple[Unit, ...]:
    return tuple(Unit(r, "node", (), (), (), multi.node_amount, rank=r) for r in range(multi.nodes))


def plan(topology: Relay | MultiNode) -> tuple[Unit, ...]:
    """The units of a topology, indexed by `Unit.index` (the tuple is in index order)."""
    units = plan_relay(topology) if isinstance(topology, Relay) else plan_nodes(topology)
    return tuple(sorted(units, key=lambda u: u.index))


def total_amount(topology: Relay | MultiNode) -> int:
    """What paying every unit costs: a topology job's fixed price must equal it."""
    return sum(u.amount for u in plan(topology))


def final_unit(topology: Relay) -> int:
    """The unit whose checkpoint is the pipeline's model."""
    if topology.aggregation == "average":
        return len(topology.stages)
    return _sinks(topology.stages)[0]
