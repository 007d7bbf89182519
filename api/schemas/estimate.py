from __future__ import annotations

from typing import Annotated

from pydantic import Field

from api.schemas.common import PublicBody, RequestBody
from api.services.estimates import Estimate
from api.services.pricing import Span
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.verification_fee import FEE_PPM

# Up to a quadrillion: beyond any model or dataset, and FLOPs stay exact enough in a float.
HintInt = Annotated[int, Field(ge=1, le=10**15)]


class EstimateCreate(RequestBody):
    spec: JobSpec
    model_params: HintInt | None = None
    tokens: HintInt | None = None


class RangePublic(PublicBody):
    low: float
    high: float

    @classmethod
    def of(cls, span: Span) -> RangePublic:
        return cls(low=span.low, high=span.high)


class VerificationFeePublic(PublicBody):
    # NTX base units, for the low and high cost.
    low: int
    high: int
    # Parts per million of the attested amount.
    ppm: int
    basis: str


class CostPublic(PublicBody):
    rule: str
    # NTX base units.
    low: int
    high: int
    # The most the job can cost: what its escrow locks.
    cap: int
    basis: str
    # The part of the cost paid to the verifiers whose replay matched, out of the
    # provider's pay (not on top of the cost): proofnet.messages.verification_fee.
    verification_fee: VerificationFeePublic


class MemoryPublic(PublicBody):
    ram_mb: int
    gpu_memory_mb: int
    training_memory_mb: RangePublic | None


class MeasurementPublic(PublicBody):
    gpu_model: str
    gpu_count: int
    projected_s: float
    source: str


class EstimatePublic(PublicBody):
    job_id: str
    # measured | static | resources: what the ranges rest on.
    basis: str
    time_s: RangePublic
    gpu_seconds: RangePublic
    cpu_seconds: RangePublic
    memory: MemoryPublic
    cost: CostPublic
    gpu_models: list[str]
    measurements: list[MeasurementPublic]
    notes: list[str]

    @classmethod
    def of(cls, e: Estimate) -> EstimatePublic:
        return cls(
            job_id=e.job_id,
            basis=e.basis,
            time_s=RangePublic.of(e.time_s),
            gpu_seconds=RangePublic.of(e.gpu_seconds),
            cpu_seconds=RangePublic.of(e.cpu_seconds),
            memory=MemoryPublic(
                ram_mb=e.ram_mb,
                gpu_memory_mb=e.gpu_memory_mb,
                training_memory_mb=(
                    RangePublic.of(e.training_memory_mb) if e.training_memory_mb else None
                ),
            ),
            cost=CostPublic(
                rule=e.cost.rule,
                low=e.cost.low,
                high=e.cost.high,
                cap=e.cost.cap,
                basis=e.cost.basis,
                verification_fee=VerificationFeePublic(
                    low=e.cost.verification_fee[0],
                    high=e.cost.verification_fee[1],
                    ppm=FEE_PPM,
                    basis=(
                        f"{FEE_PPM / 10_000:g} % of what the provider is paid, shared by the "
                        "verifiers whose replay matched its proof; part of the cost, not on top"
                    ),
                ),
            ),
            gpu_models=list(e.gpu_models),
            measurements=[
                MeasurementPublic(
                    gpu_model=m.gpu_model,
                    gpu_count=m.gpu_count,
                    projected_s=m.projected_s,
                    source=m.source,
                )
                for m in e.measurements
            ],
            notes=list(e.notes),
        )
