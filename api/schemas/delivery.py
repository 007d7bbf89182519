"""A job's result destinations as its owner reads them: each one's state and answers."""

from __future__ import annotations

from typing import Any, Literal

from api.schemas.common import PublicBody

DeliveryState = Literal["pending", "acknowledged", "refused"]


class DeliveryPublic(PublicBody):
    index: int
    kind: str
    # pending: not reported yet (or by an earlier attempt); refused: the destination did
    # not acknowledge (reason says why); acknowledged: every result answered 2xx (S3: ETag).
    state: DeliveryState
    reason: str = ""
    results: list[dict[str, Any]] = []


class DeliveriesView(PublicBody):
    data: list[DeliveryPublic]
    complete: bool
