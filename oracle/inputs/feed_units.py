"""The units of a topology job as the API's oracle feed reports them (`units` in
`GET /api/v1/oracle/jobs/{job_id}`), parsed into frozen values.

Each unit is `{index, kind, status, lease, inputs, output, metrics, results}`: `lease` has
the shape of the job-level lease (the lease that completed the unit, null before), `inputs`
the SHA-256 of the checkpoints it started from, `output` the one it produced, `results` its
uploads `{name: sha256}`. The units must be the ones `plan(spec.topology)` makes (same
indices and kinds): the oracle pays by the plan, so a feed that disagrees with it is refused
rather than half-read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from oracle.inputs.feed_values import FeedDataError, LeaseInfo, int_of, ms_of, str_of
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.topology import plan

_HEX64 = re.compile(r"[0-9a-f]{64}")
_STATUS = re.compile(r"[a-z_]{1,32}")
_METRIC = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")
_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")

# Job statuses after which a topology job's units can no longer change; its escrow is then
# settled once (see oracle.settlement.readiness).
JOB_OVER_STATUSES = ("completed", "stopped", "failed", "cancelled")
UNIT_COMPLETED = "completed"
# The feed's results route serves a unit's upload `name` as `units/<index>/<name>`.
UNIT_RESULTS_PREFIX = "units/"


def unit_result_name(index: int, name: str) -> str:
    """The name under which the feed serves upload `name` of unit `index`."""
    return f"{UNIT_RESULTS_PREFIX}{index}/{name}"


def split_unit_result_name(name: str) -> tuple[int, str] | None:
    """(unit index, upload name) of a `units/<index>/<name>` name; None for a job-level name."""
    if not name.startswith(UNIT_RESULTS_PREFIX):
        return None
    index, sep, rest = name[len(UNIT_RESULTS_PREFIX) :].partition("/")
    if not sep or not index.isdigit() or not rest:
        return None
    return int(index), rest


@dataclass(frozen=True)
class UnitInfo:
    """One unit of a topology job as the API reports it."""

    index: int
    kind: str
    status: str  # blocked | queued | leased | completed | failed | cancelled
    lease: LeaseInfo | None  # the lease that completed the unit
    inputs: tuple[str, ...]  # SHA-256 of the checkpoints it started from, in plan order
    output: str | None  # SHA-256 of the checkpoint it produced
    metrics: Mapping[str, int | str] = field(default_factory=lambda: MappingProxyType({}))
    # upload name (as the worker uploaded it) -> SHA-256 the API computed over its bytes
    results: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def completed(self) -> bool:
        return self.status == UNIT_COMPLETED


def parse_lease(raw: Any, what: str) -> LeaseInfo | None:
    """A lease object (`worker_key, payout_address, nonce, gpus, started_at, completed_at,
    attempt`), or None for null."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise FeedDataError(f"{what} must be an object")
    try:
        return LeaseInfo(
            worker_key=str_of(raw, "worker_key"),
            payout_address=str_of(raw, "payout_address"),
            nonce=str_of(raw, "nonce"),
            gpus=int_of(raw, "gpus"),
            started_ms=ms_of(raw.get("started_at"), "started_at"),
            completed_ms=ms_of(raw.get("completed_at"), "completed_at"),
            attempt=int_of(raw, "attempt"),
        )
    except FeedDataError as exc:
        raise FeedDataError(f"{what}.{exc}") from exc


def _results(raw: Any, what: str) -> Mapping[str, str]:
    raw = {} if raw is None else raw
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and _HEX64.fullmatch(v) for k, v in raw.items()
    ):
        raise FeedDataError(f"{what} must map names to SHA-256 hex digests")
    return MappingProxyType(dict(raw))


def _digest(value: Any, what: str) -> str:
    # The claim's wire shape gives inputs as {"unit", "sha256", "size"}; accept that too.
    if isinstance(value, Mapping):
        value = value.get("sha256")
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise FeedDataError(f"{what} must be a SHA-256 hex digest")
    return value


def _metrics(raw: Any, what: str) -> Mapping[str, int | str]:
    raw = {} if raw is None else raw
    if not isinstance(raw, Mapping):
        raise FeedDataError(f"{what} must be an object")
    for name, value in raw.items():
        if not isinstance(name, str) or not _METRIC.fullmatch(name):
            raise FeedDataError(f"{what}: metric name {str(name)[:80]!r} is invalid")
        number = isinstance(value, int) and not isinstance(value, bool)
        if not number and not (isinstance(value, str) and _DECIMAL.fullmatch(value)):
            raise FeedDataError(f"{what}.{name} must be an integer or a decimal string")
    return MappingProxyType(dict(raw))


def parse_units(raw: Any, spec: JobSpec) -> tuple[UnitInfo, ...]:
    """The feed's `units` of a job with `spec`, in index order (empty without a topology)."""
    if spec.topology is None:
        if raw:
            raise FeedDataError("a job without a topology has no units")
        return ()
    planned = {u.index: u for u in plan(spec.topology)}
    if not isinstance(raw, list):
        raise FeedDataError("a job with a topology must list its units")
    units: dict[int, UnitInfo] = {}
    for position, item in enumerate(raw):
        what = f"units[{position}]"
        if not isinstance(item, Mapping):
            raise FeedDataError(f"{what} must be an object")
        try:
            index, kind, status = (
                int_of(item, "index"),
                str_of(item, "kind"),
                str_of(item, "status"),
            )
        except FeedDataError as exc:
            raise FeedDataError(f"{what}.{exc}") from exc
        unit = planned.get(index)
        if unit is None or unit.kind != kind:
            raise FeedDataError(f"{what}: unit {index} ({kind[:20]}) is not in the job's plan")
        if index in units:
            raise FeedDataError(f"{what}: unit {index} is listed twice")
        if not _STATUS.fullmatch(status):
            raise FeedDataError(f"{what}.status {status[:40]!r} is not a status")
        inputs = item.get("inputs")
        inputs = [] if inputs is None else inputs
        if not isinstance(inputs, list):
            raise FeedDataError(f"{what}.inputs must be a list")
        output = item.get("output")
        info = UnitInfo(
            index=index,
            kind=kind,
            status=status,
            lease=parse_lease(item.get("lease"), f"{what}.lease"),
            inputs=tuple(_digest(v, f"{what}.inputs[{i}]") for i, v in enumerate(inputs)),
            output=None if output is None else _digest(output, f"{what}.output"),
            metrics=_metrics(item.get("metrics"), f"{what}.metrics"),
            results=_results(item.get("results"), f"{what}.results"),
        )
        if info.completed and info.lease is None:
            raise FeedDataError(f"{what}: a completed unit must name the lease that completed it")
        units[index] = info
    return tuple(units[i] for i in sorted(units))
