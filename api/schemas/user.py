from __future__ import annotations

from datetime import datetime

from api.schemas.common import PublicBody


class UserPublic(PublicBody):
    address: str
    payment_key_hash: str
    is_senior: bool
    is_approved: bool
    created_at: datetime
    approved_at: datetime | None
