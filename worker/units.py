"""One unit of a topology job on this worker: its inputs, data, commands, environment, outputs.

The unit kinds and what each is given are in docs/topologies.md. A stage or aggregation
starts from input checkpoints that other workers produced: each is downloaded through the
lease and refused unless its SHA-256 is the one the claim pinned, so a unit never trains
from a checkpoint other than the one its attestation will name. Its own checkpoint is
uploaded as the result `checkpoint/<topology.checkpoint>` (never sealed: the next provider
must read it) and its hash is the unit's output. An evaluation runs `evaluation.command` and
reports the metrics its command wrote.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from pot.env import UnitEnv
from proofnet.messages.jobspec import DataShard, JobSpec
from proofnet.messages.topology import MultiNode, Relay
from worker import harness
from worker.api_client import ApiClient, ApiUnavailable
from worker.results import CollectedResult, sha256_file
from worker.unit_claim import UnitAssignment

log = logging.getLogger(__name__)

INPUTS_DIR = ".proofnet/inputs"
METRICS_FILE = ".proofnet/metrics.json"
CHECKPOINT_RESULT_PREFIX = "checkpoint/"
# The root of an empty Merkle tree (SHA-256 of nothing): what a unit that trains nothing
# (an evaluation, an averaging) attests as its proof-of-training root.
NO_TRAINING_POT_ROOT = hashlib.sha256(b"").hexdigest()
MAX_METRICS = 64
_METRIC = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")
_INT64 = (-(2**63), 2**63 - 1)
_DOWNLOAD_ATTEMPTS = 5


class UnitError(Exception):
    """The unit cannot run here, or what it produced breaks the contract; the unit fails."""


@dataclass(frozen=True)
class UnitOutputs:
    """What a finished unit hands back besides the spec's declared results."""

    checkpoint: CollectedResult | None
    metrics: Mapping[str, int | str]

    @property
    def output(self) -> str | None:
        return None if self.checkpoint is None else self.checkpoint.sha256


def topology_of(spec: JobSpec) -> Relay | MultiNode:
    if spec.topology is None:
        raise UnitError("the job has no topology")
    return spec.topology


def unit_data(spec: JobSpec, unit: UnitAssignment) -> list[DataShard]:
    """The data files of a unit, in order: a stage's shards of `spec.data`, an evaluation's
    held-out `evaluation.data`; other units read none."""
    topo = topology_of(spec)
    if unit.kind == "stage":
        return [spec.data[i] for i in unit.shards]
    if unit.kind == "eval":
        assert isinstance(topo, Relay) and topo.evaluation is not None
        return [topo.evaluation.data[i] for i in unit.shards]
    return []


def unit_commands(spec: JobSpec, unit: UnitAssignment) -> tuple[tuple[str, ...], ...]:
    """What a unit runs: an evaluation its command, an aggregation the aggregate command,
    a stage the spec's commands and the harness (`worker.harness`), a node the spec's
    commands (its last one under torchrun, see cluster)."""
    topo = topology_of(spec)
    if unit.kind == "eval":
        assert isinstance(topo, Relay) and topo.evaluation is not None
        return (tuple(topo.evaluation.command),)
    if unit.kind == "aggregate":
        assert isinstance(topo, Relay) and topo.aggregate_command is not None
        return (tuple(topo.aggregate_command),)
    if unit.kind == "stage":
        return harness.training_commands(spec)
    return tuple(tuple(argv) for argv in spec.commands)


def collects_declared_results(unit: UnitAssignment) -> bool:
    """Stages and nodes train and so produce the spec's declared results (and proof of
    training); an evaluation or an averaging produces only its metrics or checkpoint."""
    return unit.kind in ("stage", "node")


def checkpoint_name(spec: JobSpec) -> str | None:
    """The file a unit of this job writes its model to, in its work dir (None: no model)."""
    return topology_of(spec).checkpoint


def produces_checkpoint(spec: JobSpec, unit: UnitAssignment) -> bool:
    return unit.planned.produces_checkpoint or (
        unit.kind == "node" and checkpoint_name(spec) is not None
    )


def fetch_inputs(
    api: ApiClient,
    token: str,
    unit: UnitAssignment,
    job_dir: Path,
    *,
    pause: Callable[[float], Any],
) -> tuple[Path, ...]:
    """Download the unit's input checkpoints into `<job dir>/.proofnet/inputs/`, each
    verified against the hash the claim pinned (InputRejected otherwise)."""
    paths = []
    for position, item in enumerate(unit.inputs):
        dest = job_dir / INPUTS_DIR / f"input-{position}"
        size, _ = Retrying(
            stop=stop_after_attempt(_DOWNLOAD_ATTEMPTS),
            wait=wait_exponential(multiplier=1, max=30.0),
            retry=retry_if_exception_type(ApiUnavailable),
            sleep=pause,
            before_sleep=_warn_retry(f"input {position} download"),
            reraise=True,
        )(api.download_input, token, position, dest, item.sha256)
        if size != item.size:
            # The hash matched, so the bytes are the pinned ones; the size is only a hint.
            log.warning("input %d is %d bytes, the claim said %d", position, size, item.size)
        paths.append(dest)
    return tuple(paths)


def _warn_retry(what: str) -> Callable[[RetryCallState], None]:
    def warn(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        log.warning("%s failed (will retry): %s", what, error)

    return warn


def unit_env(
    spec: JobSpec,
    unit: UnitAssignment,
    *,
    job_dir: Path,
    seen_as: Path,
    inputs: tuple[Path, ...],
    shards: tuple[Path, ...],
    endpoint: str | None = None,
) -> dict[str, str]:
    """The unit's environment variables, with paths as the job sees them (`seen_as` is
    where the job dir appears to it: the container mount point, or the dir itself)."""

    def seen(path: Path) -> Path:
        return seen_as / path.relative_to(job_dir)

    name = checkpoint_name(spec)
    env = UnitEnv(
        kind=unit.kind,
        index=unit.index,
        input_checkpoints=tuple(seen(p) for p in inputs),
        checkpoint_out=seen(job_dir / name) if name is not None else None,
        shards=tuple(seen(p) for p in shards),
        metrics_out=seen(job_dir / METRICS_FILE) if unit.kind == "eval" else None,
        nnodes=None if unit.cluster is None else unit.cluster.world_size,
        node_rank=unit.rank,
        rdzv_endpoint=endpoint,
    )
    try:
        return env.to_environ()
    except ValueError as e:
        raise UnitError(f"cannot describe the unit to its commands: {e}") from e


def _collect_checkpoint(spec: JobSpec, job_dir: Path) -> CollectedResult:
    name = checkpoint_name(spec)
    assert name is not None
    path = job_dir / name
    try:
        info = path.lstat()
    except FileNotFoundError as e:
        raise UnitError(f"the unit wrote no checkpoint: {name} is missing from its work dir") from e
    if not stat.S_ISREG(info.st_mode):
        raise UnitError(f"the checkpoint {name} is not a regular file (a symbolic link?)")
    return CollectedResult(
        name=CHECKPOINT_RESULT_PREFIX + name,
        path=path,
        sha256=sha256_file(path),
        size=info.st_size,
        kind="model",
        glob=CHECKPOINT_RESULT_PREFIX + name,
    )


def parse_metrics(raw: bytes, *, required: str | None = None) -> dict[str, int | str]:
    """An evaluation's metrics: a JSON object of metric name -> integer or decimal string.

    Floats are refused rather than rounded: the value is compared with the threshold and
    attested, so it must be exactly what the evaluation meant."""
    try:
        obj = json.loads(raw)
    except ValueError as e:
        raise UnitError(f"the evaluation's metrics are not JSON: {e}") from e
    if not isinstance(obj, dict):
        raise UnitError(f"the evaluation's metrics must be a JSON object, got {type(obj).__name__}")
    if len(obj) > MAX_METRICS:
        raise UnitError(f"the evaluation reported {len(obj)} metrics; at most {MAX_METRICS}")
    metrics: dict[str, int | str] = {}
    for name, value in sorted(obj.items()):
        if not _METRIC.fullmatch(name):
            raise UnitError(f"metric name {name[:80]!r} must match [A-Za-z0-9_.:/-]{{1,64}}")
        if isinstance(value, int) and not isinstance(value, bool):
            if not _INT64[0] <= value <= _INT64[1]:
                raise UnitError(f"metric {name} = {value} does not fit 64 bits")
            metrics[name] = value
        elif isinstance(value, str) and _DECIMAL.fullmatch(value):
            metrics[name] = value
        else:
            raise UnitError(
                f"metric {name} = {value!r}: a metric is an integer or a decimal string "
                '(e.g. "0.1234"), not a float or anything else'
            )
    if required is not None and required not in metrics:
        raise UnitError(
            f"the evaluation reported {sorted(metrics) or 'no metrics'}, not {required!r}"
        )
    return metrics


def collect_outputs(spec: JobSpec, unit: UnitAssignment, job_dir: Path) -> UnitOutputs:
    """The unit's checkpoint (stage, aggregation, node with a checkpoint) or metrics (eval)."""
    checkpoint = _collect_checkpoint(spec, job_dir) if produces_checkpoint(spec, unit) else None
    metrics: dict[str, int | str] = {}
    if unit.kind == "eval":
        topo = topology_of(spec)
        assert isinstance(topo, Relay) and topo.evaluation is not None
        path = job_dir / METRICS_FILE
        try:
            if not stat.S_ISREG(path.lstat().st_mode):
                raise UnitError(f"{METRICS_FILE} is not a regular file")
            raw = path.read_bytes()
        except FileNotFoundError as e:
            raise UnitError(
                f"the evaluation wrote no metrics (PROOFNET_METRICS_OUT, {METRICS_FILE})"
            ) from e
        metrics = parse_metrics(raw, required=topo.evaluation.metric)
    return UnitOutputs(checkpoint=checkpoint, metrics=metrics)


def completion(unit: UnitAssignment, outputs: UnitOutputs) -> dict[str, Any]:
    """The `unit` entry of the lease's completion body."""
    return {"index": unit.index, "output": outputs.output, "metrics": dict(outputs.metrics)}
