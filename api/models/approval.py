"""Submitter applications and the senior members' signed endorsements of them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase


class Application(TableBase, table=True):
    __tablename__ = "applications"

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="users.id", unique=True, ondelete="CASCADE")
    statement: str = Field(default="", max_length=2000)
    created_at: datetime
    approved_at: datetime | None = None


class Endorsement(TableBase, table=True):
    __tablename__ = "endorsements"
    # One endorsement per endorser per application: duplicates can never count twice.
    __table_args__ = (UniqueConstraint("application_id", "endorser_id"),)

    id: int | None = Field(default=None, primary_key=True)
    application_id: int = Field(foreign_key="applications.id", index=True, ondelete="CASCADE")
    endorser_id: int = Field(foreign_key="users.id", ondelete="CASCADE")
    message: str = Field(max_length=1024)
    # The CIP-30 signData result, kept so anyone can re-verify the endorsement.
    signature: str = Field(max_length=4096)
    key: str = Field(max_length=512)
    created_at: datetime
