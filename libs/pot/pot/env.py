"""The environment a job command runs in: what the worker sets, what the job reads.

The worker sets these in the job's container before running its commands; training code
reads them through `JobEnv.read` (or `ProofOfTraining.from_env`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

JOB_DIR = "PROOFNET_JOB_DIR"  # the job's work dir; results and pot/ go under it
JOB_SEED = "PROOFNET_JOB_SEED"  # the spec's seed, decimal
JOB_NONCE = "PROOFNET_JOB_NONCE"  # nonce revealed at claim time, hex (16-64 bytes)
POT_K = "PROOFNET_POT_K"  # steps per checkpoint, from the spec's proof params
POT_SPOT_CHECKS = "PROOFNET_POT_SPOT_CHECKS"  # optional: m, for information

_HEX = re.compile(r"(?:[0-9a-f]{2}){16,64}")


class JobEnvError(ValueError):
    """A variable the job needs is missing or malformed."""


@dataclass(frozen=True)
class JobEnv:
    job_dir: Path
    job_seed: int
    nonce: bytes
    steps_per_checkpoint: int

    def to_environ(self) -> dict[str, str]:
        """What the worker passes to the container."""
        return {
            JOB_DIR: str(self.job_dir),
            JOB_SEED: str(self.job_seed),
            JOB_NONCE: self.nonce.hex(),
            POT_K: str(self.steps_per_checkpoint),
        }

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
        )


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
