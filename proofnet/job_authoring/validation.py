"""`proofnet job validate`: every problem of a spec, one line each, naming its field.

First the spec must parse (`JobSpec`: types, ranges, formats, the schedule's derivation);
each of pydantic's errors becomes `field.path: message`. A spec that parses is then held to
what the network needs to pay for it, as a list of checks applied in turn, each with its
reason: a job that trains must name a trainer and declare its schedule, upload its proof
files, and carry no placeholder the template left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from proofnet.job_authoring.templates import PLACEHOLDER_COMMIT, PLACEHOLDER_DIGEST
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.topology import MultiNode


@dataclass(frozen=True)
class Problem:
    field: str
    message: str

    def line(self) -> str:
        return f"{self.field}: {self.message}"


def _field(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "spec"


def _message(error: dict[str, Any]) -> str:
    text = str(error.get("msg", "invalid"))
    return text.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def parse_problems(doc: dict[str, Any]) -> tuple[JobSpec | None, list[Problem]]:
    try:
        return JobSpec.model_validate(doc), []
    except ValidationError as exc:
        problems = [Problem(_field(tuple(e["loc"])), _message(dict(e))) for e in exc.errors()]
        return None, problems


def _trains(spec: JobSpec) -> bool:
    # Cluster nodes record their own proof and are not replayed by verifiers yet.
    return not isinstance(spec.topology, MultiNode)


def check_trainer(spec: JobSpec) -> Problem | None:
    if _trains(spec) and spec.proof.trainer is None:
        return Problem(
            "proof.trainer",
            "missing: name the trainer class ('module:Class' in the repository); without it "
            "no verifier can replay the training and no provider is paid",
        )
    return None


def check_schedule(spec: JobSpec) -> Problem | None:
    if _trains(spec) and spec.proof.schedule is None:
        return Problem(
            "proof.schedule",
            "missing: declare steps (or epochs), dataset_size and batch_size; the oracles "
            "refuse a proof that is tied to no schedule",
        )
    return None


def check_proof_uploaded(spec: JobSpec) -> Problem | None:
    if not any(r.path == "pot/**" for r in spec.results):
        return Problem(
            "results",
            "no {path: 'pot/**'} entry: the proof files would stay on the provider's machine "
            "and no oracle could verify the job",
        )
    return None


def check_repo_url(spec: JobSpec) -> Problem | None:
    host = urlsplit(spec.model.repo_url).hostname or ""
    if host.endswith(("example.org", "example.com", "example.net")):
        return Problem("model.repo_url", "still a placeholder: the URL providers clone")
    return None


def check_commit(spec: JobSpec) -> Problem | None:
    if spec.model.commit == PLACEHOLDER_COMMIT:
        return Problem(
            "model.commit", "still a placeholder: `git rev-parse HEAD` of what you pushed"
        )
    return None


def check_image(spec: JobSpec) -> Problem | None:
    if spec.image_digest == PLACEHOLDER_DIGEST:
        return Problem("image", "the digest is a placeholder: pin the digest `docker push` printed")
    return None


CHECKS: tuple[Callable[[JobSpec], Problem | None], ...] = (
    check_trainer,
    check_schedule,
    check_proof_uploaded,
    check_repo_url,
    check_commit,
    check_image,
)


def explain(doc: dict[str, Any]) -> tuple[JobSpec | None, list[Problem]]:
    """The parsed spec (None if it does not parse) and every problem found."""
    spec, problems = parse_problems(doc)
    if spec is None:
        return None, problems
    for check in CHECKS:
        problem = check(spec)
        if problem is not None:
            problems.append(problem)
    return spec, problems


def summary(spec: JobSpec) -> list[str]:
    """What a valid spec asks for, in a few lines."""
    lines = [f"job id {spec.job_id}", f"pays at most {spec.max_amount} NTX base units"]
    schedule = spec.schedule
    if schedule is not None:
        lines.append(
            f"trains {spec.proof.trainer or '(its own loop)'}: {schedule.total_steps} steps of "
            f"{schedule.batch_size} examples over {schedule.dataset_size}, "
            f"{schedule.segments} segments of {schedule.steps_per_checkpoint} steps, "
            f"{spec.proof.spot_checks} replayed at random"
        )
    return lines
