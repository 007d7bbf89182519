"""The proof-of-training harness as this worker provides it to jobs.

A spec that names a trainer (`proof.trainer`) trains through the harness: the worker runs
the spec's commands, then `python3 -m pot train` (through `pot.launch`'s bootstrap) with
the job's environment. The library it runs is the worker's own copy of `pot`, copied once
into a content-addressed directory under the work dir and mounted read-only into the
job's container (the process runtime puts it on PYTHONPATH), never one the job's image or
repository ships.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pot import launch
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.topology import MultiNode

# The job image's interpreter: the harness needs python3 (>= 3.10) and numpy there.
PYTHON = "python3"


# Where a resumed job's lost attempt's files are put, relative to the job dir (the commands'
# working directory in every runtime).
RESUME_DIR = ".proofnet/resume"


def training_commands(spec: JobSpec, resume_at: int | None = None) -> tuple[tuple[str, ...], ...]:
    """What a training run (a single-unit job, a relay stage) executes, in order; with
    `resume_at`, the harness continues from that checkpoint of the files in RESUME_DIR."""
    commands = tuple(tuple(argv) for argv in spec.commands)
    # A multi-node job's commands train (their own loop under torchrun); its trainer is
    # only what verifiers replay its nodes' segments with.
    if spec.proof.trainer is not None and not isinstance(spec.topology, MultiNode):
        resume = () if resume_at is None else ("--resume-from", RESUME_DIR, "--resume-at")
        at = () if resume_at is None else (str(resume_at),)
        commands += (launch.harness_argv(PYTHON, "train", *resume, *at),)
    return commands


def provide_library(root: Path) -> Path:
    """The directory holding this worker's copy of `pot` (what RunSpec.python_lib mounts)."""
    return launch.install(root)


def describe(argv: Sequence[str]) -> str:
    """A command as the job's log shows it (the bootstrap's source is noise there)."""
    if len(argv) >= 3 and argv[1] == "-c" and argv[2] == launch.BOOTSTRAP:
        return f"{argv[0]} -m pot {' '.join(argv[3:])} (the network's harness)"
    return " ".join(argv)
