"""The environment a job command runs in: what the worker sets, what the job reads.

The worker (and a verifier replaying a segment) sets these before running the job's
commands and the harness; training code reads them through `JobEnv.read` (or
`ProofOfTraining.from_env`), the harness through `pot.cli`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pot.canonical import CanonicalJSONError, canonical_json
from pot.schedule import Schedule, ScheduleError
from pot.seeds import derive_data_seed

JOB_DIR = "PROOFNET_JOB_DIR"  # the job's work dir; results and pot/ go under it
JOB_SEED = "PROOFNET_JOB_SEED"  # the spec's seed, decimal
JOB_NONCE = "PROOFNET_JOB_NONCE"  # nonce revealed at claim time, hex (16-64 bytes)
POT_K = "PROOFNET_POT_K"  # steps per checkpoint, from the spec's proof params
POT_SPOT_CHECKS = "PROOFNET_POT_SPOT_CHECKS"  # optional: m, for information
# The schedule (set together, when the spec declares one): total optimiser steps (epochs
# already resolved), examples in the data set, examples per step.
POT_STEPS = "PROOFNET_POT_STEPS"
POT_DATASET_SIZE = "PROOFNET_POT_DATASET_SIZE"
POT_BATCH_SIZE = "PROOFNET_POT_BATCH_SIZE"
# The trainer the harness drives ("module:Class") and its configuration (a JSON object).
POT_TRAINER = "PROOFNET_POT_TRAINER"
POT_CONFIG = "PROOFNET_POT_CONFIG"
# Where the network's own copy of this library is, as the job sees it (first on PYTHONPATH).
PYTHON_LIB = "PROOFNET_PYTHON_LIB"

# The numeric libraries' kernel and thread settings. A replay must run with the same ones as
# the training it checks: OpenBLAS, for one, picks other kernels on another CPU type unless
# told (OPENBLAS_CORETYPE), and they round differently. Runtimes hand the host's settings on
# to the job (they hold no secrets); operators pin them the same on every machine.
DETERMINISM_VARIABLES = (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_CBWR",
    "MKL_NUM_THREADS",
    "CUBLAS_WORKSPACE_CONFIG",
)


def determinism_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The `DETERMINISM_VARIABLES` set in `environ`."""
    return {k: environ[k] for k in DETERMINISM_VARIABLES if k in environ}


_HEX = re.compile(r"(?:[0-9a-f]{2}){16,64}")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# "package.module:Class": a module importable from the job's repository, and a class in it.
TRAINER_REF = re.compile(rf"{_IDENT}(?:\.{_IDENT})*:{_IDENT}")
MAX_CONFIG_BYTES = 16 * 1024


class JobEnvError(ValueError):
    """A variable the job needs is missing or malformed."""


def check_trainer_ref(ref: str) -> str:
    if not isinstance(ref, str) or len(ref) > 200 or not TRAINER_REF.fullmatch(ref):
        raise JobEnvError(f"a trainer is named 'module:Class' (module dotted), got {ref!r:.80}")
    return ref


def encode_config(config: Mapping[str, Any]) -> bytes:
    """A trainer's configuration as canonical JSON (what the spec signs and the env carries)."""
    if not isinstance(config, Mapping):
        raise JobEnvError("a trainer's configuration is a JSON object")
    try:
        data = canonical_json(dict(config))
    except CanonicalJSONError as exc:
        raise JobEnvError(f"trainer configuration: {exc}") from exc
    if len(data) > MAX_CONFIG_BYTES:
        raise JobEnvError(f"trainer configuration exceeds {MAX_CONFIG_BYTES} bytes as JSON")
    return data


@dataclass(frozen=True)
class JobEnv:
    job_dir: Path
    job_seed: int
    nonce: bytes
    steps_per_checkpoint: int
    # Declared by the spec (None for a job that records its proof with its own loop).
    schedule: Schedule | None = None
    trainer: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.schedule is not None and (
            self.schedule.steps_per_checkpoint != self.steps_per_checkpoint
        ):
            raise JobEnvError("the schedule's checkpoint interval is not steps_per_checkpoint")
        if self.trainer is not None:
            check_trainer_ref(self.trainer)
        encode_config(self.config)

    @property
    def data_seed(self) -> int:
        return derive_data_seed(self.job_seed, self.nonce)

    def to_environ(self) -> dict[str, str]:
        """What the worker passes to the container."""
        out = {
            JOB_DIR: str(self.job_dir),
            JOB_SEED: str(self.job_seed),
            JOB_NONCE: self.nonce.hex(),
            POT_K: str(self.steps_per_checkpoint),
        }
        if self.schedule is not None:
            out[POT_STEPS] = str(self.schedule.total_steps)
            out[POT_DATASET_SIZE] = str(self.schedule.dataset_size)
            out[POT_BATCH_SIZE] = str(self.schedule.batch_size)
        if self.trainer is not None:
            out[POT_TRAINER] = self.trainer
        if self.config:
            out[POT_CONFIG] = encode_config(self.config).decode("utf-8")
        return out

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> JobEnv:
        missing = [v for v in (JOB_DIR, JOB_SEED, JOB_NONCE, POT_K) if not environ.get(v)]
        if missing:
            raise JobEnvError(f"job environment lacks {', '.join(missing)}")
        seed_text, nonce_text, k_text = environ[JOB_SEED], environ[JOB_NONCE], environ[POT_K]
        if not seed_text.isdigit() or int(seed_text) >= 2**64:
            raise JobEnvError(f"{JOB_SEED} must be a decimal integer below 2**64")
        if not _HEX.fullmatch(nonce_text):
            raise JobEnvError(f"{JOB_NONCE} must be 16-64 bytes of lowercase hex")
        if not k_text.isdigit() or int(k_text) < 1:
            raise JobEnvError(f"{POT_K} must be a positive integer")
        return cls(
            job_dir=Path(environ[JOB_DIR]),
            job_seed=int(seed_text),
            nonce=bytes.fromhex(nonce_text),
            steps_per_checkpoint=int(k_text),
            schedule=_read_schedule(environ, int(k_text)),
            trainer=check_trainer_ref(environ[POT_TRAINER]) if environ.get(POT_TRAINER) else None,
            config=_read_config(environ.get(POT_CONFIG, "")),
        )


def _read_schedule(environ: Mapping[str, str], k: int) -> Schedule | None:
    names = (POT_STEPS, POT_DATASET_SIZE, POT_BATCH_SIZE)
    given = [n for n in names if environ.get(n)]
    if not given:
        return None
    if len(given) != len(names):
        missing = sorted(set(names) - set(given))
        raise JobEnvError(f"a schedule needs all of {', '.join(names)}; missing {missing}")
    values = {}
    for name in names:
        text = environ[name]
        if not text.isdigit():
            raise JobEnvError(f"{name} must be a decimal integer, got {text[:40]!r}")
        values[name] = int(text)
    try:
        return Schedule(
            total_steps=values[POT_STEPS],
            steps_per_checkpoint=k,
            dataset_size=values[POT_DATASET_SIZE],
            batch_size=values[POT_BATCH_SIZE],
        )
    except ScheduleError as exc:
        raise JobEnvError(f"schedule: {exc}") from exc


def _read_config(text: str) -> dict[str, Any]:
    if not text:
        return {}
    if len(text) > MAX_CONFIG_BYTES:
        raise JobEnvError(f"{POT_CONFIG} exceeds {MAX_CONFIG_BYTES} bytes")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise JobEnvError(f"{POT_CONFIG} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise JobEnvError(f"{POT_CONFIG} must be a JSON object")
    return value


# --- units of topology jobs (docs/topologies.md) --------------------------------------------

UNIT_KIND = "PROOFNET_UNIT_KIND"  # stage, eval, aggregate or node
UNIT_INDEX = "PROOFNET_UNIT_INDEX"
INPUT_CHECKPOINTS = "PROOFNET_INPUT_CHECKPOINTS"  # ':'-separated, in order; may be empty
CHECKPOINT_OUT = "PROOFNET_CHECKPOINT_OUT"  # where a stage or aggregation writes its model
SHARDS = "PROOFNET_SHARDS"  # the unit's data files, ':'-separated, in order
METRICS_OUT = "PROOFNET_METRICS_OUT"  # where an evaluation writes {metric: int | "decimal"}
NNODES = "PROOFNET_NNODES"
NODE_RANK = "PROOFNET_NODE_RANK"
RDZV_ENDPOINT = "PROOFNET_RDZV_ENDPOINT"

_UNIT_KINDS = ("stage", "eval", "aggregate", "node")


def _join(paths: tuple[Path, ...], name: str) -> str:
    for p in paths:
        if ":" in str(p):
            raise JobEnvError(f"{name}: path {p} contains ':', the list separator")
    return ":".join(str(p) for p in paths)


def _split(text: str) -> tuple[Path, ...]:
    return tuple(Path(p) for p in text.split(":")) if text else ()


@dataclass(frozen=True)
class UnitEnv:
    """What a unit of a topology job is given; only the variables of its kind are set."""

    kind: str
    index: int
    input_checkpoints: tuple[Path, ...] = ()
    checkpoint_out: Path | None = None
    shards: tuple[Path, ...] = ()
    metrics_out: Path | None = None
    nnodes: int | None = None
    node_rank: int | None = None
    rdzv_endpoint: str | None = None

    def to_environ(self) -> dict[str, str]:
        if self.kind not in _UNIT_KINDS:
            raise JobEnvError(f"unit kind {self.kind!r} is not one of {_UNIT_KINDS}")
        out = {UNIT_KIND: self.kind, UNIT_INDEX: str(self.index)}
        if self.kind in ("stage", "aggregate", "eval"):
            out[INPUT_CHECKPOINTS] = _join(self.input_checkpoints, INPUT_CHECKPOINTS)
        if self.kind in ("stage", "eval"):
            out[SHARDS] = _join(self.shards, SHARDS)
        if self.kind in ("stage", "aggregate"):
            if self.checkpoint_out is None:
                raise JobEnvError(f"a {self.kind} unit needs {CHECKPOINT_OUT}")
            out[CHECKPOINT_OUT] = str(self.checkpoint_out)
        if self.kind == "eval":
            if self.metrics_out is None:
                raise JobEnvError(f"an eval unit needs {METRICS_OUT}")
            out[METRICS_OUT] = str(self.metrics_out)
        if self.kind == "node":
            if self.nnodes is None or self.node_rank is None or self.rdzv_endpoint is None:
                raise JobEnvError("a node unit needs its cluster size, rank and endpoint")
            out.update(
                {
                    NNODES: str(self.nnodes),
                    NODE_RANK: str(self.node_rank),
                    RDZV_ENDPOINT: self.rdzv_endpoint,
                }
            )
            if self.checkpoint_out is not None:  # the topology names a checkpoint file
                out[CHECKPOINT_OUT] = str(self.checkpoint_out)
        return out

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> UnitEnv:
        kind, index = environ.get(UNIT_KIND, ""), environ.get(UNIT_INDEX, "")
        if kind not in _UNIT_KINDS:
            raise JobEnvError(f"{UNIT_KIND} must be one of {_UNIT_KINDS}, got {kind!r}")
        if not index.isdigit():
            raise JobEnvError(f"{UNIT_INDEX} must be a decimal integer, got {index!r}")

        def number(name: str) -> int | None:
            text = environ.get(name)
            if text is None:
                return None
            if not text.isdigit():
                raise JobEnvError(f"{name} must be a decimal integer, got {text!r}")
            return int(text)

        out, metrics = environ.get(CHECKPOINT_OUT), environ.get(METRICS_OUT)
        return cls(
            kind=kind,
            index=int(index),
            input_checkpoints=_split(environ.get(INPUT_CHECKPOINTS, "")),
            checkpoint_out=Path(out) if out else None,
            shards=_split(environ.get(SHARDS, "")),
            metrics_out=Path(metrics) if metrics else None,
            nnodes=number(NNODES),
            node_rank=number(NODE_RANK),
            rdzv_endpoint=environ.get(RDZV_ENDPOINT) or None,
        )
