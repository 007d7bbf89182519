"""Measured runs: how long a workload took on a GPU model, to narrow later estimates."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase


class MeasuredRun(TableBase, table=True):
    __tablename__ = "measured_runs"
    __table_args__ = (UniqueConstraint("job_id", "gpu_model"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", ondelete="CASCADE")
    # SHA-256 over what decides the work's speed (code, image, commands, GPUs): runs of the
    # same workload predict each other, whatever their seed or price.
    workload: str = Field(max_length=64, index=True)
    gpu_model: str = Field(max_length=128)
    gpu_count: int
    # Seconds run and the fraction of the job done in them (1.0 for a completed run).
    elapsed_s: float
    progress: float
    measured_at: datetime
