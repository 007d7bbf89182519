"""What the oracle reads from the API: a job's spec, escrow, completing lease and uploads,
and a worker's registration. Values here; the HTTP client is `oracle.intake.feed_client`.

A job with a topology (see `proofnet.messages.topology`) also carries its `units`: per unit
its status, the lease that completed it, the checkpoints it chained and its uploads
(parsed and checked against the job's plan in `oracle.inputs.feed_units`).

The API serves these at `GET /api/v1/oracle/jobs/{job_id}` and
`GET /api/v1/oracle/workers/{worker_key}` (see `api/routes/oracle_feed.py`). Every field
the oracle relies on is re-checked on arrival: the spec must hash to the job id it is
served under, and the payout binding's signature must verify, so a confused (or hostile)
API cannot make the oracle pay a worker's job to an address the worker never signed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from oracle.inputs.feed_values import (
    FeedDataError,
    FeedError,
    LeaseInfo,
    LeaseStopInfo,
    int_of,
    ms_of,
    str_of,
)
from proofnet.messages.attestation import EscrowRef
from proofnet.messages.auction import MAX_BIDS, AuctionError, RevealedBid, parse_revealed
from proofnet.messages.binding import BindingError, PayoutBinding, verify_payout_binding
from proofnet.messages.job_fault import JobFaultError, JobFaultVerdict
from proofnet.messages.jobspec import AuctionPrice, JobSpec, JobSpecError, RateCardPrice, job_id_of
from proofnet.messages.rate_card import RateCardDocument, RateCardError, document_for_digest
from proofnet.messages.result_paths import split_attempt_result_name
from proofnet.messages.stop_evidence import MAX_VERDICTS

if TYPE_CHECKING:
    from oracle.inputs.feed_units import UnitInfo

__all__ = ["FeedDataError", "FeedError", "LeaseInfo"]  # re-exported: callers import them here

_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class AuctionRecord:
    commitments: tuple[str, ...]
    bids: tuple[RevealedBid, ...]


def _stop(raw: Any) -> LeaseStopInfo | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise FeedDataError("lease.stop must be an object")
    segments = int_of(raw, "segments")
    if segments < 1:
        raise FeedDataError("lease.stop.segments must be at least 1")
    return LeaseStopInfo(
        reason=str_of(raw, "reason"),
        segments=segments,
        stopped_ms=ms_of(raw.get("stopped_at"), "lease.stop.stopped_at"),
        verdicts=_verdicts(raw.get("verdicts", [])),
    )


def _verdicts(raw: Any) -> tuple[JobFaultVerdict, ...]:
    if not isinstance(raw, list) or len(raw) > MAX_VERDICTS:
        raise FeedDataError(f"lease.stop.verdicts must be a list of at most {MAX_VERDICTS}")
    try:
        return tuple(JobFaultVerdict.from_json(v) for v in raw)
    except JobFaultError as exc:
        raise FeedDataError(f"lease.stop.verdicts: {exc}") from exc


def _models(raw: object) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(m, str) for m in raw):
        raise FeedDataError("lease.gpu_models must be a list of strings")
    return tuple(raw)


@dataclass(frozen=True)
class AttemptInfo:
    """One whole-job attempt as the API reports it (`api.services.resume`): whose it was,
    where it resumed another (`resumed_from`, at checkpoint `resumed_at`), the segments it
    proved (`last_segment` None: to the end) and its proof uploads."""

    attempt: int
    worker_key: str
    payout_address: str
    nonce: str
    outcome: str | None
    started_ms: int
    ended_ms: int | None
    resumed_from: int | None
    resumed_at: int | None
    first_segment: int
    last_segment: int | None
    results: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    spec: JobSpec
    status: str
    escrow: EscrowRef | None
    lease: LeaseInfo | None
    # result name -> SHA-256 the API computed over the uploaded bytes
    results: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # The document a rate-card spec names (checked against its digest); None for fixed price.
    rate_card: RateCardDocument | None = None
    # An auction-priced job's commitments and signed bids (signatures checked when parsed);
    # None for other pricing.
    auction: AuctionRecord | None = None
    # A topology job's units in index order (`oracle.inputs.feed_units`); empty for a single unit.
    units: tuple[UnitInfo, ...] = ()
    # When a provider first leased the job or a unit of it (POSIX ms), None while none has;
    # `work_reported` is False when the API did not say (an older API): then it is unknown.
    work_started_ms: int | None = None
    work_reported: bool = False
    # Whether the job's uploads are sealed (the verifier needs a key grant to replay).
    sealed: bool = False
    # A single-unit job's whole-job attempts in order (empty when the API does not say).
    attempts: tuple[AttemptInfo, ...] = ()
    # Derived from the spec once (hashing the commands costs a canonical encoding).
    image_digest: str = field(init=False, compare=False)
    command_hash: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "image_digest", self.spec.image_digest)
        object.__setattr__(self, "command_hash", self.spec.command_hash)

    def unit(self, index: int) -> UnitInfo | None:
        for unit in self.units:
            if unit.index == index:
                return unit
        return None

    def attempt(self, number: int) -> AttemptInfo | None:
        for attempt in self.attempts:
            if attempt.attempt == number:
                return attempt
        return None

    def result_hash(self, name: str) -> str | None:
        """The recorded SHA-256 of upload `name`: a job-level upload, a unit's upload named
        `units/<index>/<name>`, or an attempt's proof upload `attempts/<n>/pot/<file>`."""
        from oracle.inputs.feed_units import split_unit_result_name

        attempt_scoped = split_attempt_result_name(name) if self.attempts else None
        if attempt_scoped is not None:
            found = self.attempt(attempt_scoped[0])
            return None if found is None else found.results.get(attempt_scoped[1])
        scoped = split_unit_result_name(name) if self.units else None
        if scoped is not None:
            unit = self.unit(scoped[0])
            return None if unit is None else unit.results.get(scoped[1])
        return self.results.get(name)


@dataclass(frozen=True)
class WorkerInfo:
    worker_key: str
    payout_address: str
    binding: PayoutBinding
    network: str


class ApiFeed(Protocol):
    """The oracle's view of the API. Implementations may cache."""

    def job(self, job_id: str) -> JobInfo | None:
        """The job, or None when the API does not know it. Raises FeedError when unreachable."""
        ...

    def worker(self, worker_key: str) -> WorkerInfo | None:
        """The registered worker, or None. Raises FeedError when unreachable."""
        ...

    def artifact(self, job_id: str, name: str) -> bytes:
        """The uploaded bytes of a small result `name` (a manifest), checked against its
        recorded hash; FeedDataError when it is larger than a manifest can be."""
        ...

    def save_artifact(self, job_id: str, name: str, dest: Path) -> int:
        """Stream upload `name` into the file `dest` (never whole in memory), checked against
        its recorded hash; its size. Nothing is left at `dest` when the check fails."""
        ...


def parse_job(obj: Any, *, expected_job_id: str) -> JobInfo:
    """Parse `GET /api/v1/oracle/jobs/{job_id}`; the spec must hash to `expected_job_id`."""
    from oracle.inputs.feed_units import parse_units

    if not isinstance(obj, Mapping):
        raise FeedDataError("job feed must be a JSON object")
    spec_text = str_of(obj, "spec")
    canonical = spec_text.encode("utf-8")
    if job_id_of(canonical) != expected_job_id or obj.get("job_id") != expected_job_id:
        raise FeedDataError(f"the API served a spec that does not hash to job {expected_job_id}")
    try:
        spec = JobSpec.from_canonical(canonical)
    except JobSpecError as exc:
        raise FeedDataError(str(exc)) from exc
    escrow = None
    if obj.get("escrow") is not None:
        raw = obj["escrow"]
        if not isinstance(raw, Mapping):
            raise FeedDataError("escrow must be an object")
        try:
            escrow = EscrowRef(tx_id=str_of(raw, "tx_id"), index=int_of(raw, "index"))
        except ValueError as exc:
            raise FeedDataError(f"escrow: {exc}") from exc
    lease = None
    if obj.get("lease") is not None:
        raw = obj["lease"]
        if not isinstance(raw, Mapping):
            raise FeedDataError("lease must be an object")
        lease = LeaseInfo(
            worker_key=str_of(raw, "worker_key"),
            payout_address=str_of(raw, "payout_address"),
            nonce=str_of(raw, "nonce"),
            gpus=int_of(raw, "gpus"),
            started_ms=ms_of(raw.get("started_at"), "lease.started_at"),
            completed_ms=ms_of(raw.get("completed_at"), "lease.completed_at"),
            attempt=int_of(raw, "attempt"),
            gpu_models=_models(raw.get("gpu_models")),
            stop=_stop(raw.get("stop")),
        )
    results_raw = obj.get("results") or {}
    if not isinstance(results_raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and _HEX64.fullmatch(v)
        for k, v in results_raw.items()
    ):
        raise FeedDataError("results must map names to SHA-256 hex digests")
    return JobInfo(
        job_id=expected_job_id,
        spec=spec,
        status=str_of(obj, "status"),
        escrow=escrow,
        lease=lease,
        results=MappingProxyType(dict(results_raw)),
        rate_card=parse_rate_card(obj.get("rate_card"), spec),
        auction=parse_auction(obj.get("auction"), spec),
        units=parse_units(obj.get("units"), spec),
        work_started_ms=(
            None
            if obj.get("work_started_at") is None
            else ms_of(obj.get("work_started_at"), "work_started_at")
        ),
        work_reported="work_started_at" in obj,
        sealed=obj.get("sealed") is True,
        attempts=parse_attempts(obj.get("attempts")),
    )


def _hashes(raw: object, what: str) -> Mapping[str, str]:
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and _HEX64.fullmatch(v) for k, v in raw.items()
    ):
        raise FeedDataError(f"{what} must map names to SHA-256 hex digests")
    return MappingProxyType(dict(raw))


def _opt_int(obj: Mapping[str, Any], key: str) -> int | None:
    return None if obj.get(key) is None else int_of(obj, key)


def parse_attempts(raw: Any) -> tuple[AttemptInfo, ...]:
    """A single-unit job's attempts; their order and resume links must be consistent (each
    resumes an earlier attempt), so a confused API cannot chain a proof to a later one."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise FeedDataError("attempts must be a list")
    out: list[AttemptInfo] = []
    for item in raw:
        if not isinstance(item, Mapping):
            raise FeedDataError("an attempt must be an object")
        ended = item.get("ended_at")
        outcome = item.get("outcome")
        if outcome is not None and not isinstance(outcome, str):
            raise FeedDataError("attempt.outcome must be a string or null")
        attempt = AttemptInfo(
            attempt=int_of(item, "attempt"),
            worker_key=str_of(item, "worker_key"),
            payout_address=str_of(item, "payout_address"),
            nonce=str_of(item, "nonce"),
            outcome=outcome,
            started_ms=ms_of(item.get("started_at"), "attempt.started_at"),
            ended_ms=None if ended is None else ms_of(ended, "attempt.ended_at"),
            resumed_from=_opt_int(item, "resumed_from_attempt"),
            resumed_at=_opt_int(item, "resumed_at"),
            first_segment=int_of(item, "first_segment"),
            last_segment=_opt_int(item, "last_segment"),
            results=_hashes(item.get("results") or {}, "attempt.results"),
        )
        seen = {a.attempt for a in out}
        if attempt.attempt in seen:
            raise FeedDataError(f"attempt {attempt.attempt} is listed twice")
        if (attempt.resumed_from is None) != (attempt.resumed_at is None) or (
            attempt.resumed_from is not None and attempt.resumed_from not in seen
        ):
            raise FeedDataError(
                f"attempt {attempt.attempt} resumes {attempt.resumed_from}, not an earlier attempt"
            )
        out.append(attempt)
    return tuple(out)


def parse_worker(obj: Any, *, expected_key: str, network: str) -> WorkerInfo:
    """Parse `GET /api/v1/oracle/workers/{key}` and re-verify the payout binding."""
    if not isinstance(obj, Mapping) or obj.get("worker_key") != expected_key:
        raise FeedDataError(f"worker feed is not about worker {expected_key}")
    try:
        binding = PayoutBinding.model_validate(obj.get("binding"))
        verify_payout_binding(
            binding,
            network=network,
            nonce=binding.nonce,
            payout_address=str_of(obj, "payout_address"),
            worker_pubkey=expected_key,
        )
    except (ValueError, BindingError) as exc:
        raise FeedDataError(
            f"worker {expected_key}: payout binding does not verify: {exc}"
        ) from exc
    return WorkerInfo(
        worker_key=expected_key,
        payout_address=binding.payout_address,
        binding=binding,
        network=network,
    )


def parse_rate_card(raw: Any, spec: JobSpec) -> RateCardDocument | None:
    """The rate card document the feed carries, refused unless it is the one the spec names:
    the oracle recomputes the metered price itself instead of trusting the API's figure."""
    if not isinstance(spec.pricing, RateCardPrice):
        return None
    if not isinstance(raw, str):
        raise FeedDataError(
            f"the job is priced by rate card {spec.pricing.rate_card}, "
            "but the feed carries no rate card document"
        )
    try:
        return document_for_digest(raw.encode("utf-8"), spec.pricing.rate_card)
    except RateCardError as exc:
        raise FeedDataError(f"rate card: {exc}") from exc


def parse_auction(raw: Any, spec: JobSpec) -> AuctionRecord | None:
    """The auction record the feed carries for an auction-priced job, every bid's signature
    verified: an API cannot invent a bid (it could only drop one; docs/pricing.md)."""
    if not isinstance(spec.pricing, AuctionPrice):
        return None
    if not isinstance(raw, Mapping):
        raise FeedDataError("the job is priced by auction, but the feed carries no auction")
    commitments = raw.get("commitments")
    bids = raw.get("bids")
    if not isinstance(commitments, list) or not all(
        isinstance(c, str) and _HEX64.fullmatch(c) for c in commitments
    ):
        raise FeedDataError("auction.commitments must be a list of SHA-256 hex digests")
    if not isinstance(bids, list) or len(bids) > MAX_BIDS or len(commitments) > MAX_BIDS:
        raise FeedDataError(f"auction.bids must be a list of at most {MAX_BIDS} bids")
    try:
        parsed = tuple(parse_revealed(b) for b in bids)
    except AuctionError as exc:
        raise FeedDataError(f"auction: {exc}") from exc
    return AuctionRecord(commitments=tuple(commitments), bids=parsed)


class ArtifactMissing(Exception):
    """The API has no upload of that name for the job (a fact about the job, not transient)."""


@dataclass
class StaticApiFeed:
    """A feed over known values: what the HTTP feed's cache holds after a prefetch, and what
    the benchmark uses to keep the API's latency out of the pipeline's measurement."""

    jobs: dict[str, JobInfo] = field(default_factory=dict)
    workers: dict[str, WorkerInfo] = field(default_factory=dict)
    artifacts: dict[tuple[str, str], bytes] = field(default_factory=dict)

    def job(self, job_id: str) -> JobInfo | None:
        return self.jobs.get(job_id)

    def worker(self, worker_key: str) -> WorkerInfo | None:
        return self.workers.get(worker_key)

    def artifact(self, job_id: str, name: str) -> bytes:
        try:
            return self.artifacts[(job_id, name)]
        except KeyError:
            raise ArtifactMissing(f"job {job_id} has no upload {name!r}") from None

    def save_artifact(self, job_id: str, name: str, dest: Path) -> int:
        data = self.artifact(job_id, name)
        Path(dest).write_bytes(data)
        return len(data)
