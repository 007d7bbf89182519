"""A submitter's sealing key: the X25519 key workers encrypt that submitter's results to."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field

from api.models.base import TableBase


class SealingKey(TableBase, table=True):
    __tablename__ = "sealing_keys"

    # One key per account; registering again replaces it (a key rotation).
    user_id: int = Field(foreign_key="users.id", primary_key=True, ondelete="CASCADE")
    public_key: str = Field(max_length=64)
    # The wallet's CIP-8 signature over `sealing_key_message(public_key)`: workers check it.
    signature: str = Field(max_length=4096)
    cose_key: str = Field(max_length=512)
    registered_at: datetime
