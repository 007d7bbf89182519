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
