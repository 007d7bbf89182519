"""The API checks the hardware claims itself: a challenge round per GPU, and what is offered.

A worker's registration says which GPUs it has; nothing in it is proof (a machine without a
GPU can write "8 x H100"). The API therefore runs its own round of the seeded matrix-multiply
challenge against each GPU (proofnet/messages/gpu_challenge.py): it issues the seed (the
worker derives the matrices untimed), then starts its own clock as it reveals the sign vector
the product depends on, stops it when the commitment to C arrives, only then draws the rows
to reveal, and checks them exactly (Freivalds over the revealed rows, integer arithmetic,
deterministic from the round's stored keys). A commitment later than the claimed model's
minimum plausible throughput allows (its band, `plausible_tflops`, plus
`gpu_challenge_overhead_s`) fails the GPU as too slow for that model, and one sooner than its
maximum plausible throughput allows (the product alone) fails it as too fast (another GPU,
or several, answered).

What is offered (`offered_clause`, `offer_state`): never a GPU whose check failed (the API's
challenge, the worker's own challenge or its container GPU runtime check); with
`gpu_challenge_required`, only GPUs whose last API challenge passed within
`gpu_challenge_interval_s` (so challenges repeat). A GPU's rate is earned only by GPUs that
passed their model's challenge, because only offered GPUs count towards a claim.

The timing is a bound, not a fingerprint: the allowance for hashing C and the round trips
dominates at the default n, so it refuses a machine without a GPU or a much slower GPU, not
a GPU passing as a faster model of the same order. That one is caught where it would be
paid: a rate-card job's GPU time is bounded by the step time a verifier with the claimed
model measures (`oracle.verification.metering`), so a slower substitute attesting its own
time is refused, and one attesting less than its time earns no more than the claimed model
would (docs/protocol.md, "GPU checks, leases and metering").
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from sqlalchemy import and_
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import BadRequest, Conflict, NotFound, TooManyRequests
from api.models import GpuChallenge, Provider, ProviderGpu
from proofnet.messages.gpu_challenge import check_revealed_rows
from proofnet.messages.registration import RevealedRowReport

CHALLENGE_DTYPE: Final = "float32"

# The plausibility band of each model's FP32 (CUDA-core, non-tensor) throughput on the
# challenge's SGEMM, TFLOP/s, from the datasheet peak of the variant the NVML name names
# (SXM, PCIe and NVL parts differ by up to a third, so each has its row): at least
# `LOWER_FRACTION` of the peak (honest large SGEMMs reach 60-90 %; half leaves room for
# power-capped clocks and a shared host) and at most `UPPER_FRACTION` of it (a GPU does not
# beat its own peak by more than boost-clock headroom: anything faster is another GPU, or
# several). The challenge multiplies in float32 without TF32 (PyTorch's default for matmul
# since 1.12), so tensor-core peaks do not apply. More specific names first ("H100 PCIe"
# before "H100", "A100" before "A10").


@dataclass(frozen=True)
class ModelPeak:
    key: str  # matched against the upper-cased NVML name
    peak_tflops: float  # datasheet FP32 peak
    source: str


_PEAKS: Final[tuple[ModelPeak, ...]] = (
    ModelPeak("GH200", 67.0, "nvidia.com/en-us/data-center/grace-hopper-superchip/ (FP32 67)"),
    ModelPeak("H200 NVL", 60.0, "nvidia.com/en-us/data-center/h200/ (H200 NVL FP32 60)"),
    ModelPeak("H200", 67.0, "nvidia.com/en-us/data-center/h200/ (H200 SXM FP32 67)"),
    ModelPeak("H100 PCIE", 51.0, "nvidia.com/en-us/data-center/h100/ (H100 PCIe FP32 51)"),
    ModelPeak("H100 NVL", 60.0, "nvidia.com/en-us/data-center/h100/ (H100 NVL FP32 60)"),
    ModelPeak("H100", 67.0, "nvidia.com/en-us/data-center/h100/ (H100 SXM FP32 67)"),
    ModelPeak(
        "A100",
        19.5,
        "nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
        "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (FP32 19.5)",
    ),
    ModelPeak("A10G", 31.2, "aws.amazon.com/ec2/instance-types/g5/ (A10G FP32 31.2)"),
    ModelPeak("A10", 31.2, "nvidia.com/en-us/data-center/products/a10-gpu/ (FP32 31.2)"),
    ModelPeak("L40S", 91.6, "nvidia.com/en-us/data-center/l40s/ (FP32 91.6)"),
    ModelPeak("L40", 90.5, "nvidia.com/en-us/data-center/l40/ (FP32 90.5)"),
    ModelPeak("L4", 30.3, "nvidia.com/en-us/data-center/l4/ (FP32 30.3)"),
    ModelPeak("RTX 4090", 82.6, "NVIDIA Ada GPU architecture whitepaper (RTX 4090 FP32 82.6)"),
    ModelPeak("RTX 3090", 35.6, "NVIDIA Ampere GA102 GPU architecture whitepaper (FP32 35.6)"),
    ModelPeak(
        "V100",
        14.0,
        "images.nvidia.com/content/technologies/volta/pdf/"
        "volta-v100-datasheet-update-us-1165301-r5.pdf (V100 PCIe FP32 14; SXM2 15.7)",
    ),
    ModelPeak(
        "T4",
        8.1,
        "nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
        "t4-tensor-core-datasheet-951643.pdf (FP32 8.1)",
    ),
)
LOWER_FRACTION: Final = 0.5
UPPER_FRACTION: Final = 1.1
# A model the table does not know: at least this (below any data-centre GPU since 2017, far
# above a CPU's share of the allowance at the default n), at most the fastest peak known.
UNKNOWN_MODEL_MIN_TFLOPS: Final = 2.0

OPEN: Final = ("issued", "started", "committed")


def model_peak(model: str) -> ModelPeak | None:
    """The datasheet row of a GPU named `model` (as NVML names it), or None."""
    upper = model.upper()
    return next((row for row in _PEAKS if row.key in upper), None)


def plausible_tflops(model: str) -> tuple[float, float]:
    """The band of TFLOP/s a GPU named `model` plausibly reaches on the challenge."""
    row = model_peak(model)
    if row is None:
        return UNKNOWN_MODEL_MIN_TFLOPS, max(r.peak_tflops for r in _PEAKS) * UPPER_FRACTION
    return row.peak_tflops * LOWER_FRACTION, row.peak_tflops * UPPER_FRACTION


def min_tflops(model: str) -> float:
    """The least TFLOP/s a GPU named `model` plausibly reaches."""
    return plausible_tflops(model)[0]


def allowed_seconds(config: ApiConfig, model: str, n: int) -> float:
    """How long, on the API's clock, a GPU of `model` may take from start to commitment."""
    return 2 * n**3 / (min_tflops(model) * 1e12) + config.gpu_challenge_overhead_s


def fastest_seconds(model: str, n: int) -> float:
    """The least time a GPU of `model` can take for the product alone (the overhead only
    adds to it): a commitment sooner than this came from a faster GPU than claimed."""
    return 2 * n**3 / (plausible_tflops(model)[1] * 1e12)


# --- what is offered --------------------------------------------------------------------


def offered_clause(config: ApiConfig, now: datetime) -> ColumnElement[bool]:
    """SQL filter on ProviderGpu: the GPUs a claim may count."""
    if config.gpu_challenge_required:
        return and_(
            col(ProviderGpu.check_status) == "passed",
            col(ProviderGpu.verified_until).is_not(None),
            col(ProviderGpu.verified_until) > now,
        )
    return col(ProviderGpu.check_status) != "failed"


def offered_models(
    session: Session, config: ApiConfig, provider_id: int, memory_mb: int, now: datetime
) -> list[str]:
    """The models of the provider's offered GPUs with at least `memory_mb`: what a lease it
    claims now may be paid as."""
    rows = session.exec(
        select(ProviderGpu.model)
        .where(
            ProviderGpu.provider_id == provider_id,
            col(ProviderGpu.memory_mb) >= memory_mb,
            offered_clause(config, now),
        )
        .distinct()
    ).all()
    return sorted(rows)


@dataclass(frozen=True)
class GpuState:
    gpu: ProviderGpu
    offered: bool
    why: str  # why not offered, or what stands behind the offer


def offer_state(gpu: ProviderGpu, config: ApiConfig, now: datetime) -> GpuState:
    """Whether `gpu` is offered now, and why (what the provider sees)."""
    if gpu.check_status == "failed":
        return GpuState(gpu, False, gpu.check_reason or "its check failed")
    if gpu.check_status == "passed" and gpu.verified_until is not None:
        if _aware(gpu.verified_until) > now:
            return GpuState(gpu, True, gpu.check_reason)
        if config.gpu_challenge_required:
            return GpuState(
                gpu, False, "its last API challenge is older than the interval: challenge again"
            )
    if config.gpu_challenge_required:
        return GpuState(gpu, False, "not yet challenged by the API: run `proofnet worker onboard`")
    return GpuState(gpu, True, "offered unchecked (this API does not require the challenge)")


def gpu_states(
    session: Session, config: ApiConfig, provider: Provider, now: datetime
) -> list[GpuState]:
    rows = session.exec(
        select(ProviderGpu)
        .where(ProviderGpu.provider_id == provider.id)
        .order_by(col(ProviderGpu.index))
    ).all()
    return [offer_state(g, config, now) for g in rows]


def _aware(when: datetime) -> datetime:
    # SQLite returns naive datetimes for timezone-aware columns.
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


# --- registration evidence ----------------------------------------------------------------


def registration_refusals(capabilities: dict[str, Any]) -> tuple[str | None, dict[str, str]]:
    """What the worker's own onboarding report says against its GPUs: a failed container
    runtime check (all GPUs), and per GPU uuid a failed self-check, a challenge run on the
    CPU or one timed implausibly. Only ever refuses: a report saying all is well proves
    nothing, which is why the API runs its own challenge."""
    runtime = capabilities.get("runtime_check") or {}
    all_gpus = None
    if runtime.get("status") == "failed":
        all_gpus = f"the container GPU runtime check failed: {runtime.get('diagnosis', '')}"
    per_gpu: dict[str, str] = {}
    for report in capabilities.get("challenges") or []:
        uuid = report.get("gpu_uuid")
        if not uuid:
            continue
        if not str(report.get("self_check", "")).endswith("passed"):
            per_gpu[uuid] = f"the worker's own challenge failed: {report.get('self_check')}"
        elif report.get("backend") == "numpy":
            per_gpu[uuid] = "the worker's own challenge ran on the CPU, not on this GPU"
        elif report.get("plausibility") == "too-fast":
            per_gpu[uuid] = f"implausible challenge timing: {report.get('plausibility_detail')}"
    return all_gpus, per_gpu


def apply_registration(
    gpus: Sequence[ProviderGpu],
    capabilities: dict[str, Any],
    previous: dict[str, ProviderGpu],
) -> None:
    """Set each new GPU row's check from the report, keeping a passed API check of the same
    GPU (uuid and model) across a re-registration."""
    all_gpus, per_gpu = registration_refusals(capabilities)
    for gpu in gpus:
        why = all_gpus or per_gpu.get(gpu.uuid)
        if why is not None:
            gpu.check_status, gpu.check_reason, gpu.verified_until = "failed", why[:2000], None
            continue
        before = previous.get(gpu.uuid)
        if before is not None and before.model == gpu.model and before.check_status == "passed":
            gpu.check_status = "passed"
            gpu.check_reason = before.check_reason
            gpu.verified_until = before.verified_until


# --- the round ------------------------------------------------------------------------------


def issue(
    session: Session, config: ApiConfig, provider: Provider, gpu_uuid: str, now: datetime
) -> GpuChallenge:
    """Open a round for one of the provider's GPUs: a fresh seed (the clock starts only at
    `start`). An open round of the same GPU is closed (it can no longer pass)."""
    gpu = session.exec(
        select(ProviderGpu).where(
            ProviderGpu.provider_id == provider.id, ProviderGpu.uuid == gpu_uuid
        )
    ).first()
    if gpu is None:
        raise NotFound(f"GPU {gpu_uuid} is not registered by this worker")
    all_gpus, _ = registration_refusals(provider.capabilities)
    if all_gpus is not None:
        raise Conflict(f"{all_gpus}; fix it and onboard again before a challenge")
    assert provider.id is not None
    _refuse_early_retry(session, config, provider.id, gpu_uuid, now)
    for old in session.exec(
        select(GpuChallenge).where(
            GpuChallenge.provider_id == provider.id,
            GpuChallenge.gpu_uuid == gpu_uuid,
            col(GpuChallenge.status).in_(OPEN),
        )
    ).all():
        old.status, old.reason, old.finished_at = "failed", "superseded by a new round", now
        session.add(old)
    row = GpuChallenge(
        provider_id=provider.id,
        gpu_uuid=gpu_uuid,
        gpu_model=gpu.model,
        seed=secrets.randbelow(2**63),
        n=config.gpu_challenge_n,
        dtype=CHALLENGE_DTYPE,
        key=secrets.token_hex(32),
        status="issued",
        issued_at=now,
    )
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def _refuse_early_retry(
    session: Session, config: ApiConfig, provider_id: int, gpu_uuid: str, now: datetime
) -> None:
    """A GPU whose last round started and did not pass within `gpu_challenge_retry_s` gets
    no new round yet. Started is what counts: the sign vector was out and the clock ran, so
    a worker that sees its answer will be late and abandons the round (or lets it fail) must
    not simply ask again until the timing is lucky. A round never started revealed nothing
    and blocks nothing."""
    since = now - timedelta(seconds=config.gpu_challenge_retry_s)
    last = session.exec(
        select(GpuChallenge)
        .where(
            GpuChallenge.provider_id == provider_id,
            GpuChallenge.gpu_uuid == gpu_uuid,
            col(GpuChallenge.started_at).is_not(None),
            col(GpuChallenge.started_at) > since,
            GpuChallenge.status != "passed",
        )
        .order_by(col(GpuChallenge.started_at).desc())
    ).first()
    if last is None or last.started_at is None:
        return
    again = _aware(last.started_at) + timedelta(seconds=config.gpu_challenge_retry_s)
    what = f"failed: {last.reason}" if last.status == "failed" else "was left unanswered"
    raise TooManyRequests(
        f"GPU {gpu_uuid}'s round {last.id}, started at "
        f"{_aware(last.started_at).isoformat(timespec='seconds')}, {what[:300]}; its next "
        f"round from {again.isoformat(timespec='seconds')} "
        f"(gpu_challenge_retry_s={config.gpu_challenge_retry_s})"
    )


def _locked(session: Session, provider: Provider, challenge_id: int) -> GpuChallenge:
    row = session.exec(
        select(GpuChallenge).where(GpuChallenge.id == challenge_id).with_for_update()
    ).first()
    if row is None or row.provider_id != provider.id:
        raise NotFound("no such GPU challenge for this worker")
    return row


def start(
    session: Session, config: ApiConfig, provider: Provider, challenge_id: int, now: datetime
) -> GpuChallenge:
    """The worker holds A and B: reveal the sign vector's key and start the clock."""
    row = _locked(session, provider, challenge_id)
    if row.status != "issued":
        raise Conflict(f"this challenge is {row.status}, not waiting to start")
    if (now - _aware(row.issued_at)).total_seconds() > config.challenge_ttl_s:
        _finish(session, config, row, now, "the round was started after the challenge expired")
        return row
    row.status, row.started_at, row.signs_key = "started", now, secrets.token_hex(32)
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def commit(
    session: Session,
    config: ApiConfig,
    provider: Provider,
    challenge_id: int,
    commitment: str,
    now: datetime,
) -> GpuChallenge:
    """The commitment arrived: stop the clock, judge the time against the claimed model, and
    only now draw the rows to reveal."""
    row = _locked(session, provider, challenge_id)
    if row.status != "started" or row.started_at is None:
        raise Conflict(f"this challenge is {row.status}, not waiting for a commitment")
    elapsed = max((now - _aware(row.started_at)).total_seconds(), 1e-9)
    row.committed_at, row.commitment, row.elapsed_s = now, commitment, elapsed
    row.measured_tflops = 2 * row.n**3 / elapsed / 1e12
    allowed = allowed_seconds(config, row.gpu_model, row.n)
    fastest = fastest_seconds(row.gpu_model, row.n)
    if elapsed < fastest:
        _finish(
            session,
            config,
            row,
            now,
            f"too fast for a {row.gpu_model}: the commitment came {elapsed:.3f} s after the "
            f"start on the API's clock, a {row.gpu_model} needs at least {fastest:.3f} s for "
            f"the product (n={row.n}, at most {plausible_tflops(row.gpu_model)[1]:g} TFLOP/s): "
            "another GPU, or several, answered",
        )
        return row
    if elapsed > allowed:
        _finish(
            session,
            config,
            row,
            now,
            f"too slow for a {row.gpu_model}: the commitment came {elapsed:.2f} s after the "
            f"start on the API's clock, a {row.gpu_model} needs at most {allowed:.2f} s "
            f"(n={row.n}, at least {min_tflops(row.gpu_model):g} TFLOP/s plus "
            f"{config.gpu_challenge_overhead_s:g} s)",
        )
        return row
    picks: list[int] = []
    draw = secrets.SystemRandom()
    while len(picks) < min(config.gpu_challenge_rows, row.n):
        index = draw.randrange(row.n)
        if index not in picks:
            picks.append(index)
    row.reveal, row.status = picks, "committed"
    session.add(row)
    session.commit()
    session.refresh(row)
    return row


def reveal(
    session: Session,
    config: ApiConfig,
    provider: Provider,
    challenge_id: int,
    rows: Sequence[RevealedRowReport],
    now: datetime,
) -> GpuChallenge:
    """The revealed rows: exact check, then the verdict on the GPU."""
    row = _locked(session, provider, challenge_id)
    if row.status != "committed":
        raise Conflict(f"this challenge is {row.status}, not waiting for revealed rows")
    assert row.commitment is not None and row.reveal is not None and row.signs_key is not None
    if (now - _aware(row.issued_at)).total_seconds() > config.challenge_ttl_s:
        _finish(session, config, row, now, "the rows were revealed after the challenge expired")
        return row
    if len(rows) != len(row.reveal):
        raise BadRequest(f"reveal exactly the {len(row.reveal)} rows asked: {row.reveal}")
    why = check_revealed_rows(
        row.seed, row.n, row.signs_key, row.commitment, row.reveal, rows, bytes.fromhex(row.key)
    )
    if why is not None:
        _finish(session, config, row, now, f"wrong answer to the API's challenge: {why}")
    else:
        _finish(session, config, row, now, None)
    return row


def _finish(
    session: Session, config: ApiConfig, row: GpuChallenge, now: datetime, failure: str | None
) -> None:
    row.finished_at = now
    gpu = session.exec(
        select(ProviderGpu).where(
            ProviderGpu.provider_id == row.provider_id, ProviderGpu.uuid == row.gpu_uuid
        )
    ).first()
    provider = session.get(Provider, row.provider_id)
    if failure is None:
        row.status, row.reason = "passed", ""
        # A pass clears an earlier failed round, never what the worker's own report says
        # against the GPU (that needs a new onboarding).
        all_gpus, per_gpu = registration_refusals(provider.capabilities if provider else {})
        reported = all_gpus or per_gpu.get(row.gpu_uuid)
        if gpu is not None and gpu.model == row.gpu_model and reported is None:
            gpu.check_status = "passed"
            gpu.verified_until = now + timedelta(seconds=config.gpu_challenge_interval_s)
            gpu.check_reason = (
                f"passed the API's challenge at {now.isoformat(timespec='seconds')}: "
                f"n={row.n} in {row.elapsed_s:.2f} s on the API's clock"
            )
    else:
        row.status, row.reason = "failed", failure[:2000]
        if gpu is not None and gpu.model == row.gpu_model:
            gpu.check_status, gpu.check_reason, gpu.verified_until = "failed", failure[:2000], None
    if gpu is not None:
        session.add(gpu)
    session.add(row)
    session.commit()
    session.refresh(row)
