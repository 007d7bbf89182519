"""Accounts: one per Cardano wallet address."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from api.models.base import TableBase


class User(TableBase, table=True):
    __tablename__ = "users"

    id: int | None = Field(default=None, primary_key=True)
    address: str = Field(max_length=128, unique=True)
    # Blake2b-224 of the payment verification key, hex: what wallet signatures must match.
    payment_key_hash: str = Field(max_length=56, index=True)
    is_senior: bool = Field(default=False)
    # Only approved submitters may post jobs.
    is_approved: bool = Field(default=False)
    created_at: datetime
    approved_at: datetime | None = None
