"""What a job will take (time, CPU, memory) and cost (NTX), as ranges, before and while it runs.

Three sources, best last (see notes/compute.md, "Estimating a job before it runs"):

- resources: the spec caps the run at `max_duration_s` on `gpus` GPUs; that bounds the time
  from above and nothing bounds it from below;
- static: with the model's parameter count and training tokens, FLOPs ~ 6 x params x tokens,
  and time = FLOPs / (peak FLOP/s x GPUs x utilisation) with utilisation 30-50%, for each GPU
  model the job fits on the market;
- measured: a run of the same workload (same code, image, commands and data) on some GPU
  model, completed or in progress, projects the full duration; it is carried to other GPU
  models by their peak FLOP/s with a 12% error band (5% on the same model and GPU count).

The cost comes from the job's pricing rule (`api.services.pricing`) over the GPU-seconds.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from api.errors import BadRequest
from api.models import Job, Lease, LeaseUsage, MeasuredRun, Provider, ProviderGpu, RateCard
from api.services import rate_cards
from api.services.pricing import MarketRate, PricingError, Quote, Span, rule_for
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.topology import Unit, plan

# Dense BF16/FP16 tensor peak TFLOP/s by GPU family, matched as a substring of the model name
# (longest key first, so "A100" wins over "A10" and "L40S" over "L4").
PEAK_TFLOPS: dict[str, float] = {
    "H200": 989.0,
    "H100": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "L40": 181.0,
    "L4": 121.0,
    "A10": 125.0,
    "A6000": 155.0,
    "RTX 4090": 165.0,
    "RTX 3090": 71.0,
    "V100": 125.0,
    "T4": 65.0,
}
UTILISATION = Span(0.30, 0.50)
# Adam in mixed precision: weights, gradients and two moments, ~16 bytes per parameter,
# before activations (which depend on batch and sequence length).
TRAINING_BYTES_PER_PARAM = 16
ACTIVATION_HEADROOM = 1.5
SAME_GPU_ERROR = 0.05
CROSS_GPU_ERROR = 0.12
# Below this much progress a projection is mostly start-up time (image pull, data fetch).
MIN_PROGRESS = 0.02
MAX_MEASUREMENTS = 50


@dataclass(frozen=True)
class Hints:
    """What the spec does not say but the submitter may know: model size and tokens."""

    model_params: int | None = None
    tokens: int | None = None

    def __post_init__(self) -> None:
        if (self.model_params is None) != (self.tokens is None):
            raise BadRequest("give model_params and tokens together (FLOPs need both)")
        for name, value in (("model_params", self.model_params), ("tokens", self.tokens)):
            if value is not None and value < 1:
                raise BadRequest(f"{name} must be at least 1")

    @property
    def flops(self) -> float | None:
        if self.model_params is None or self.tokens is None:
            return None
        return 6.0 * self.model_params * self.tokens


@dataclass(frozen=True)
class Measurement:
    gpu_model: str
    gpu_count: int
    # Projected seconds for the whole job on `gpu_count` GPUs of `gpu_model`.
    projected_s: float
    source: str  # "completed" | "running"


@dataclass(frozen=True)
class Estimate:
    job_id: str
    basis: str  # "measured" | "static" | "resources"
    time_s: Span
    gpu_seconds: Span
    cpu_seconds: Span
    ram_mb: int
    gpu_memory_mb: int
    # Estimated training memory (all GPUs together) when the model size is known.
    training_memory_mb: Span | None
    cost: Quote
    gpu_models: tuple[str, ...]
    measurements: tuple[Measurement, ...]
    notes: tuple[str, ...]


def peak_flops(gpu_model: str) -> float | None:
    name = gpu_model.upper()
    for family in sorted(PEAK_TFLOPS, key=len, reverse=True):
        if family in name:
            return PEAK_TFLOPS[family] * 1e12
    return None


def workload_of(spec: JobSpec | dict[str, Any]) -> str:
    """The fingerprint runs of the same work share, whatever their seed, price or limits.

    Works on the stored spec document too, so a row that does not parse as today's JobSpec
    still gets a (unique) fingerprint instead of failing the completion that records it."""
    raw = spec.model_dump(mode="json") if isinstance(spec, JobSpec) else spec
    model: dict[str, Any] = raw["model"] if isinstance(raw.get("model"), dict) else {}
    data: list[Any] = raw["data"] if isinstance(raw.get("data"), list) else []
    doc = {
        "repo": model.get("repo_url"),
        "commit": model.get("commit"),
        "image": raw.get("image"),
        "commands": raw.get("commands"),
        "data": sorted(str(d.get("sha256")) for d in data if isinstance(d, dict)),
    }
    # What the harness trains is part of the work; specs without it keep their fingerprint.
    proof: dict[str, Any] = raw["proof"] if isinstance(raw.get("proof"), dict) else {}
    for key in ("trainer", "config", "schedule"):
        if proof.get(key) is not None:
            doc[f"proof.{key}"] = proof[key]
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Market:
    gpu_models: tuple[str, ...]
    rates: tuple[MarketRate, ...]


def market_for(session: Session, spec: JobSpec) -> Market:
    """GPU models of registered providers the job fits on, and their rate cards.

    A job priced by rate card runs only at the provider whose document it names, at that
    document's rates (`api.services.rate_cards`): the market is that provider's GPUs and the
    rates are the document's, whatever the provider asks today."""
    document = rate_cards.card_for_spec(session, spec)  # 422 unless published here
    need = spec.resources.gpus
    if need == 0:
        return Market((), ())
    stmt = select(ProviderGpu.provider_id, ProviderGpu.model).where(
        col(ProviderGpu.memory_mb) >= spec.resources.gpu_memory_mb
    )
    if document is not None:
        stmt = stmt.join(Provider, col(Provider.id) == col(ProviderGpu.provider_id)).where(
            col(Provider.worker_key) == document.provider
        )
    rows = session.exec(stmt).all()
    by_provider: dict[int, Counter[str]] = {}
    for provider_id, model in rows:
        by_provider.setdefault(provider_id, Counter())[model] += 1
    fitting = {p: c for p, c in by_provider.items() if sum(c.values()) >= need}
    models = sorted({m for c in fitting.values() for m in c})
    if document is not None:
        priced = [
            MarketRate(document.provider, m, rate)
            for m, rate in sorted(document.ntx_per_gpu_hour.items())
            if m in models
        ]
        return Market(tuple(models), tuple(priced))
    rates: list[MarketRate] = []
    if fitting:
        cards = session.exec(
            select(RateCard, Provider.key_id)
            .join(Provider, col(Provider.id) == col(RateCard.provider_id))
            .where(col(RateCard.provider_id).in_(list(fitting)))
        ).all()
        for card, key_id in cards:
            if card.gpu_model in fitting[card.provider_id]:
                rates.append(MarketRate(key_id, card.gpu_model, card.ntx_per_gpu_hour))
    return Market(tuple(models), tuple(rates))


def stored_measurements(session: Session, workload: str) -> list[Measurement]:
    rows = session.exec(
        select(MeasuredRun)
        .where(MeasuredRun.workload == workload, col(MeasuredRun.progress) >= MIN_PROGRESS)
        .order_by(col(MeasuredRun.measured_at).desc())
        .limit(MAX_MEASUREMENTS)
    ).all()
    return [
        Measurement(
            r.gpu_model,
            r.gpu_count,
            r.elapsed_s / r.progress,
            "completed" if r.progress >= 1.0 else "running",
        )
        for r in rows
    ]


def _lease_gpu_model(session: Session, job: Job, provider_id: int) -> str:
    """The GPU model a lease ran on: the provider's most common GPU that fits the job."""
    if job.gpu_count == 0:
        return "cpu"
    models = session.exec(
        select(ProviderGpu.model).where(
            ProviderGpu.provider_id == provider_id,
            col(ProviderGpu.memory_mb) >= job.gpu_memory_mb,
        )
    ).all()
    return Counter(models).most_common(1)[0][0] if models else "unknown"


def live_measurement(session: Session, job: Job) -> Measurement | None:
    """Project a running job's duration from its metered time and reported progress."""
    if job.status != "leased" or job.current_lease_id is None or job.progress < MIN_PROGRESS:
        return None
    lease = session.get(Lease, job.current_lease_id)
    usage = session.exec(
        select(LeaseUsage).where(LeaseUsage.lease_id == job.current_lease_id)
    ).first()
    if lease is None or usage is None:
        return None
    elapsed = float(usage.usage.get("duration_s") or 0.0)
    if elapsed <= 0:
        return None
    model = _lease_gpu_model(session, job, lease.provider_id)
    return Measurement(model, job.gpu_count, elapsed / job.progress, "running")


def record_run(
    session: Session, job: Job, lease: Lease, now: datetime, *, stage: Unit | None = None
) -> MeasuredRun | None:
    """Remember how long a completed lease took, so later runs of the workload are narrowed.

    `stage` is the planned relay stage the lease ran, if it ran one. A stage runs the job's
    commands in its image on its GPUs, over some shards of `spec.data`: a measured part of
    the same workload (the fingerprint has no topology) that a single run covers whole. So
    a stage counts per shard: as progress len(stage.shards) / len(spec.data), taking shards
    as equal in size, and elapsed / progress projects one pass over all the data, exactly
    what a single-unit run of the workload measures (and what a relay over every shard
    once adds up to). A job's stages on one GPU model add up in its one row (times and
    shares summed): their average time per shard. Evaluations, aggregations and cluster
    nodes are not recorded: they run other commands, or one run across several hosts.
    Returns None when nothing is recorded (a stage of a job without data).

    Adds to the caller's transaction (the completion path commits it)."""
    assert job.id is not None
    share = 1.0
    if stage is not None:
        data = job.spec.get("data") if isinstance(job.spec, dict) else None
        if not isinstance(data, list) or not data or not stage.shards:
            return None
        share = len(stage.shards) / len(data)
    usage = session.exec(select(LeaseUsage).where(LeaseUsage.lease_id == lease.id)).first()
    metered = float(usage.usage.get("duration_s") or 0.0) if usage is not None else 0.0
    # The metered run time excludes the image pull and queueing; fall back to the lease.
    elapsed = metered if metered > 0 else max((now - lease.created_at).total_seconds(), 0.001)
    model = _lease_gpu_model(session, job, lease.provider_id)
    workload = workload_of(job.spec)
    row = session.exec(
        select(MeasuredRun).where(MeasuredRun.job_id == job.id, MeasuredRun.gpu_model == model)
    ).first()
    if row is None:
        row = MeasuredRun(
            job_id=job.id,
            workload=workload,
            gpu_model=model,
            gpu_count=job.gpu_count,
            elapsed_s=elapsed,
            progress=share,
            measured_at=now,
        )
    elif stage is not None:
        row.elapsed_s += elapsed
        row.progress += share
        row.measured_at = now
    else:
        row.elapsed_s, row.progress, row.measured_at = elapsed, 1.0, now
    session.add(row)
    return row


def _project(m: Measurement, model: str, gpus: int) -> Span | None:
    """Carry a measurement to `gpus` GPUs of `model`, with its error band."""
    if m.gpu_model == model and m.gpu_count == gpus:
        return Span(m.projected_s * (1 - SAME_GPU_ERROR), m.projected_s * (1 + SAME_GPU_ERROR))
    measured, target = peak_flops(m.gpu_model), peak_flops(model)
    if measured is None or target is None or gpus == 0 or m.gpu_count == 0:
        return None
    t = m.projected_s * (measured * m.gpu_count) / (target * gpus)
    return Span(t * (1 - CROSS_GPU_ERROR), t * (1 + CROSS_GPU_ERROR))


def _union(spans: Iterable[Span]) -> Span | None:
    items = list(spans)
    if not items:
        return None
    return Span(min(s.low for s in items), max(s.high for s in items))


def _static(flops: float, models: Sequence[str], gpus: int) -> Span | None:
    spans = []
    for model in models:
        peak = peak_flops(model)
        if peak is not None:
            spans.append(
                Span(
                    flops / (peak * gpus * UTILISATION.high),
                    flops / (peak * gpus * UTILISATION.low),
                )
            )
    return _union(spans)


def _bounded_runs(spec: JobSpec) -> int:
    """How many runs of at most max_duration_s the estimated time spans."""
    if spec.topology is None or spec.topology.kind == "multi_node":
        return 1  # a cluster's nodes run side by side: one run of wall time
    return sum(1 for u in plan(spec.topology) if u.kind in ("stage", "aggregate"))


def estimate(
    spec: JobSpec,
    market: Market,
    measurements: Sequence[Measurement],
    hints: Hints = Hints(),
) -> Estimate:
    """The estimate itself: a pure function of the spec, the market and the measurements."""
    res = spec.resources
    # max_duration_s bounds one run; a relay runs one per stage (and aggregation), so its
    # whole pass over the data is bounded by that many.
    runs = _bounded_runs(spec)
    cap = float(res.max_duration_s) * runs
    notes: list[str] = []
    # With no fitting provider online the known GPU families stand in for the market.
    models: Sequence[str] = market.gpu_models or (sorted(PEAK_TFLOPS) if res.gpus else ())
    if res.gpus and not market.gpu_models:
        notes.append("no registered provider fits this job yet; ranges span known GPU models")

    time: Span | None = None
    basis = "resources"
    if measurements:
        if res.gpus:
            projected = [
                s
                for m in measurements
                for model in models
                if (s := _project(m, model, res.gpus)) is not None
            ]
            if not projected:  # measured on GPUs the market no longer has: take them as is
                projected = [
                    s for m in measurements if (s := _project(m, m.gpu_model, m.gpu_count))
                ]
        else:
            projected = [_project(m, m.gpu_model, m.gpu_count) or Span(0, 0) for m in measurements]
        time = _union(projected)
        if time is not None:
            basis = "measured"
            notes.append(f"narrowed by {len(measurements)} measured run(s) of this workload")
    flops = hints.flops
    if time is None and flops is not None:
        if res.gpus == 0:
            notes.append("model size and tokens give GPU time only; this job uses no GPU")
        else:
            time = _static(flops, models, res.gpus)
            if time is not None:
                basis = "static"
                notes.append(
                    f"~{flops:.3g} training FLOPs (6 x params x tokens) at "
                    f"{UTILISATION.low:.0%}-{UTILISATION.high:.0%} utilisation"
                )
    if time is None:
        time = Span(0.0, cap)
        notes.append(
            "from resources only: max_duration_s bounds the run; give model_params and tokens "
            "(or run the workload once) to narrow it"
        )
    elif time.low > cap:
        per = f" x {runs} stage runs" if runs > 1 else ""
        notes.append(
            f"likely longer than max_duration_s ({res.max_duration_s}s{per}): "
            "the run would be cut off"
        )
    time = Span(min(time.low, cap), min(time.high, cap))

    training_memory: Span | None = None
    if hints.model_params is not None:
        need_mb = hints.model_params * TRAINING_BYTES_PER_PARAM / 2**20
        training_memory = Span(need_mb, need_mb * ACTIVATION_HEADROOM)
        have_mb = res.gpu_memory_mb * res.gpus if res.gpus else res.ram_mb
        if training_memory.low > have_mb:
            notes.append(
                f"training needs at least ~{training_memory.low:,.0f} MB but the job asks for "
                f"{have_mb:,} MB: it will likely run out of memory"
            )

    gpu_seconds = time.scaled(res.gpus)
    try:
        cost = rule_for(spec.pricing.kind).quote(spec, gpu_seconds, market.rates)
    except PricingError as e:
        raise BadRequest(str(e)) from e
    return Estimate(
        job_id=spec.job_id,
        basis=basis,
        time_s=time,
        gpu_seconds=gpu_seconds,
        cpu_seconds=time.scaled(res.cpus),
        ram_mb=res.ram_mb,
        gpu_memory_mb=res.gpu_memory_mb,
        training_memory_mb=training_memory,
        cost=cost,
        gpu_models=tuple(models),
        measurements=tuple(measurements),
        notes=tuple(notes),
    )


def estimate_spec(session: Session, spec: JobSpec, hints: Hints = Hints()) -> Estimate:
    """Estimate a spec before it is posted."""
    return estimate(
        spec, market_for(session, spec), stored_measurements(session, workload_of(spec)), hints
    )


def estimate_job(session: Session, job: Job, hints: Hints = Hints()) -> Estimate:
    """Estimate a posted job, narrowed by its own progress while it runs."""
    spec = JobSpec.model_validate(job.spec)
    measured = stored_measurements(session, workload_of(spec))
    live = live_measurement(session, job)
    if live is not None:
        measured.insert(0, live)
    return estimate(spec, market_for(session, spec), measured, hints)
