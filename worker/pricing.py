"""How much NTX a worker claims for a job, from the spec's pricing and the metered GPU time.

Fixed pricing claims the fixed amount. Rate-card pricing names a rate card document by its
digest (`proofnet.messages.rate_card`); the worker prices only against a document whose
digest is that one and whose provider is this worker, and claims exactly what the oracle
will recompute: `min(max_amount, max(1, ceil(gpu_ms x rate / 3_600_000)))` for the GPU model
it attests. Where documents come from (local files, the API) is `worker.rate_cards`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from proofnet.messages.jobspec import FixedPrice, JobSpec, RateCardPrice
from proofnet.messages.rate_card import RateCardDocument, RateCardError, price_under

# The worker's name for the shared message.
RateCard = RateCardDocument


class PricingError(Exception):
    """The worker cannot price this job (unknown rate card, GPU model not on the card)."""


def load_rate_card(path: Path) -> RateCardDocument:
    """A rate card document from a JSON file (any formatting; its digest is over the
    canonical encoding)."""
    try:
        return RateCardDocument.from_json(Path(path).read_bytes())
    except OSError as e:
        raise PricingError(f"cannot read rate card {path}: {e}") from e
    except RateCardError as e:
        raise PricingError(f"{path}: {e}") from e


def rate_cards_by_digest(cards: Iterable[RateCardDocument]) -> dict[str, RateCardDocument]:
    return {c.digest: c for c in cards}


def _card_for(spec: JobSpec, cards: Mapping[str, RateCardDocument]) -> RateCardDocument:
    if not isinstance(spec.pricing, RateCardPrice):
        raise PricingError(f"{spec.pricing.kind!r} pricing is not priced by a rate card")
    card = cards.get(spec.pricing.rate_card)
    if card is None:
        raise PricingError(f"this worker does not hold rate card {spec.pricing.rate_card}")
    if spec.resources.gpus == 0:
        raise PricingError("rate-card pricing charges GPU time, and this job asks for no GPU")
    return card


def check_priceable(
    spec: JobSpec, gpu_model: str, cards: Mapping[str, RateCardDocument], worker_key: str
) -> None:
    """Raise PricingError before running a job this worker could not claim payment for."""
    if isinstance(spec.pricing, FixedPrice):
        return
    amount_claimed(spec, 0, gpu_model, cards, worker_key)


def amount_claimed(
    spec: JobSpec,
    gpu_milliseconds: int,
    gpu_model: str,
    cards: Mapping[str, RateCardDocument],
    worker_key: str,
) -> int:
    if isinstance(spec.pricing, FixedPrice):
        return spec.pricing.amount
    card = _card_for(spec, cards)
    try:
        return price_under(
            card,
            max_amount=spec.compute_amount,
            worker_key=worker_key,
            gpu_model=gpu_model,
            gpu_milliseconds=gpu_milliseconds,
        )
    except RateCardError as e:
        raise PricingError(str(e)) from e
