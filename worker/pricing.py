"""How much NTX a worker claims for a job, from the spec's pricing and the metered GPU time.

Fixed pricing claims the fixed amount. Rate-card pricing names a rate card by the SHA-256 of
its document; the worker prices only against a document it holds whose bytes hash to that
digest, so neither side can change the terms after the spec was signed. A rate card document
is JSON: `{"version": 1, "ntx_per_gpu_hour": {"<GPU model as NVML names it>": <int>, ...}}`.
The claim is GPU-milliseconds x rate, rounded up, capped at the spec's `max_amount`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from proofnet.messages.jobspec import FixedPrice, JobSpec

_MS_PER_HOUR = 3_600_000


class PricingError(Exception):
    """The worker cannot price this job (unknown rate card, GPU model not on the card)."""


@dataclass(frozen=True)
class RateCard:
    digest: str  # sha256:<hex> of the document bytes
    ntx_per_gpu_hour: Mapping[str, int]

    @classmethod
    def from_bytes(cls, data: bytes) -> RateCard:
        try:
            doc = json.loads(data)
        except ValueError as e:
            raise PricingError(f"rate card is not JSON: {e}") from e
        rates = doc.get("ntx_per_gpu_hour") if isinstance(doc, dict) else None
        if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(rates, dict):
            raise PricingError('a rate card is {"version": 1, "ntx_per_gpu_hour": {model: int}}')
        for model, rate in rates.items():
            if not isinstance(rate, int) or isinstance(rate, bool) or rate < 1:
                raise PricingError(f"rate for {model!r} must be a positive integer")
        return cls(digest="sha256:" + hashlib.sha256(data).hexdigest(), ntx_per_gpu_hour=rates)

    @classmethod
    def load(cls, path: Path) -> RateCard:
        try:
            return cls.from_bytes(Path(path).read_bytes())
        except OSError as e:
            raise PricingError(f"cannot read rate card {path}: {e}") from e


def rate_cards_by_digest(cards: Iterable[RateCard]) -> dict[str, RateCard]:
    return {c.digest: c for c in cards}


def check_priceable(spec: JobSpec, gpu_model: str, cards: Mapping[str, RateCard]) -> None:
    """Raise PricingError before running a job this worker could not claim payment for."""
    if isinstance(spec.pricing, FixedPrice):
        return
    card = cards.get(spec.pricing.rate_card)
    if card is None:
        raise PricingError(f"this worker does not hold rate card {spec.pricing.rate_card}")
    if spec.resources.gpus == 0:
        raise PricingError("rate-card pricing charges GPU time, and this job asks for no GPU")
    if gpu_model not in card.ntx_per_gpu_hour:
        raise PricingError(f"rate card {card.digest} has no rate for {gpu_model!r}")


def amount_claimed(
    spec: JobSpec, gpu_milliseconds: int, gpu_model: str, cards: Mapping[str, RateCard]
) -> int:
    if isinstance(spec.pricing, FixedPrice):
        return spec.pricing.amount
    check_priceable(spec, gpu_model, cards)
    rate = cards[spec.pricing.rate_card].ntx_per_gpu_hour[gpu_model]
    owed = -(-gpu_milliseconds * rate // _MS_PER_HOUR)  # ceiling division
    return max(1, min(spec.pricing.max_amount, owed))
