"""The pieces every part of the oracle's API feed is built from: its errors, the completing
lease, and the field readers that refuse what the oracle cannot trust. `oracle.inputs.feed` (jobs,
workers) and `oracle.inputs.feed_units` (a topology's units) both build on them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from proofnet.messages.job_fault import STOP_JOB_FAULT, JobFaultVerdict


class FeedError(Exception):
    """The API could not be asked (transient): verification is retried later."""


class FeedDataError(FeedError):
    """The API answered with something the oracle cannot trust or parse."""


@dataclass(frozen=True)
class LeaseInfo:
    """The lease under which the job completed."""

    worker_key: str
    payout_address: str  # from the provider's binding at completion time
    nonce: str  # revealed to the worker at claim time
    gpus: int  # GPUs leased (the spec's resources.gpus)
    started_ms: int  # claim time, POSIX ms
    completed_ms: int
    attempt: int
    # The models of the provider's checked GPUs that fit the job at claim (the API's GPU
    # challenge); None when the API does not say (older APIs, older leases).
    gpu_models: tuple[str, ...] | None = None
    # Set when the oracle quorum stopped the lease for the job's fault (the API's word on
    # its own record of our signed verdicts): its proof may be partial, paid for the
    # segments committed by the stop at most (proofnet.messages.segment_share.stopped_share).
    stop: LeaseStopInfo | None = None


@dataclass(frozen=True)
class LeaseStopInfo:
    """Why and when the lease was stopped, and the segments committed then."""

    reason: str
    segments: int
    stopped_ms: int
    # The oracles' signed job-fault verdicts that stopped it (`api.services.job_faults`):
    # published beside its paid attestation (`proofnet.messages.stop_evidence`).
    verdicts: tuple[JobFaultVerdict, ...] = ()

    @property
    def job_fault(self) -> bool:
        return self.reason == STOP_JOB_FAULT


def ms_of(value: Any, what: str) -> int:
    if not isinstance(value, str):
        raise FeedDataError(f"{what} must be an ISO 8601 time, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise FeedDataError(f"{what}: {exc}") from exc
    if parsed.tzinfo is None:
        raise FeedDataError(f"{what} must carry a time zone")
    return int(parsed.timestamp() * 1000)


def str_of(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise FeedDataError(f"{key} must be a string")
    return value


def int_of(obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FeedDataError(f"{key} must be an integer")
    return value
