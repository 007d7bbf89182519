"""What workers send back while and after running a job: result files, log lines, metering.

Result bytes live in the content-addressed blob store (`api.storage`); the table only maps
(lease, name) to the blob's SHA-256, so each attempt's results stay apart and the ones served
are those of the attempt that completed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase


class JobResult(TableBase, table=True):
    __tablename__ = "job_results"
    __table_args__ = (UniqueConstraint("lease_id", "name"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True, ondelete="CASCADE")
    lease_id: int = Field(foreign_key="leases.id", ondelete="CASCADE")
    name: str = Field(max_length=512)
    sha256: str = Field(max_length=64)
    size: int = Field(sa_type=BigInteger)
    uploaded_at: datetime


class JobLogLine(TableBase, table=True):
    __tablename__ = "job_log_lines"
    __table_args__ = (Index("ix_job_log_lines_job_seq", "job_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", ondelete="CASCADE")
    lease_id: int = Field(foreign_key="leases.id", ondelete="CASCADE")
    attempt: int
    # When the worker saw the line (its clock), and when the API stored it.
    at: datetime
    received_at: datetime
    stream: str = Field(max_length=16)
    text: str = Field(max_length=4096)


class LeaseUsage(TableBase, table=True):
    """The latest metering report for one lease (GPU-seconds, energy), replaced on update."""

    __tablename__ = "lease_usage"

    id: int | None = Field(default=None, primary_key=True)
    lease_id: int = Field(foreign_key="leases.id", unique=True, ondelete="CASCADE")
    job_id: int = Field(foreign_key="jobs.id", index=True, ondelete="CASCADE")
    usage: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    updated_at: datetime
