"""Pricing rules: how a job's metered use turns into NTX, one pluggable rule per pricing kind.

A rule is looked up by the `kind` of the spec's pricing (`fixed`, `rate_card`), so adding a
pricing scheme is: a new `JobSpec` pricing variant with its own `kind`, plus a rule object
registered here under that name. No route or estimate code changes.

Auctions (`auction`) quote before any bid: between the cheapest fitting posted rate and the
reserve; what is paid is the clearing price of `proofnet.messages.auction.clear`, which the
worker and the oracle recompute from the signed bids. A spec with an unknown kind is refused
by `rule_for` with a clear error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from proofnet.messages.jobspec import AuctionPrice, FixedPrice, JobSpec, RateCardPrice
from proofnet.messages.rate_card import metered_cost
from proofnet.messages.verification_fee import fee_for


class PricingError(ValueError):
    """No rule prices this kind of job."""


@dataclass(frozen=True)
class Span:
    """A closed range of non-negative figures, low <= high."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.high:
            raise ValueError(f"invalid range [{self.low}, {self.high}]")

    def scaled(self, factor: float) -> Span:
        return Span(self.low * factor, self.high * factor)


@dataclass(frozen=True)
class MarketRate:
    """One provider's asking price for one GPU model."""

    provider: str
    gpu_model: str
    ntx_per_gpu_hour: int

    @property
    def ntx_per_gpu_second(self) -> float:
        return self.ntx_per_gpu_hour / 3600.0


@dataclass(frozen=True)
class Quote:
    """What a job would cost, in NTX base units, as a range; `cap` is what the escrow locks."""

    rule: str
    low: int
    high: int
    cap: int
    basis: str

    @property
    def verification_fee(self) -> tuple[int, int]:
        """The part of the cost (low, high) that goes to the verifiers whose replay matched,
        carved out of the provider's pay (`proofnet.messages.verification_fee`): the
        submitter pays the cost above either way."""
        return fee_for(self.low), fee_for(self.high)


class PricingRule(Protocol):
    @property
    def name(self) -> str:
        """The pricing kind this rule prices (`JobSpec.pricing.kind`)."""
        ...

    def quote(self, spec: JobSpec, gpu_seconds: Span, rates: Sequence[MarketRate]) -> Quote:
        """The cost of running `spec` for `gpu_seconds` on a market offering `rates`."""
        ...


@dataclass(frozen=True)
class FixedPriceRule:
    name: str = "fixed"

    def quote(self, spec: JobSpec, gpu_seconds: Span, rates: Sequence[MarketRate]) -> Quote:
        if not isinstance(spec.pricing, FixedPrice):
            raise PricingError(f"the fixed-price rule cannot price {spec.pricing.kind!r}")
        amount = spec.pricing.amount
        return Quote(self.name, amount, amount, amount, "fixed price: the run time does not matter")


@dataclass(frozen=True)
class RateCardRule:
    """GPU time at the rates of the rate card document the spec names, capped at the
    spec's `max_amount`.

    `rates` are that document's rates for the GPU models its provider has that fit the job
    (`api.services.estimates.market_for`): the shortest run at the cheapest rate to the
    longest at the dearest, metered as the worker and oracle meter it (GPU-milliseconds,
    rounded up; `proofnet.messages.rate_card.metered_cost`).
    """

    name: str = "rate_card"

    def quote(self, spec: JobSpec, gpu_seconds: Span, rates: Sequence[MarketRate]) -> Quote:
        if not isinstance(spec.pricing, RateCardPrice):
            raise PricingError(f"the rate-card rule cannot price {spec.pricing.kind!r}")
        cap = spec.pricing.max_amount
        digest = spec.pricing.rate_card
        if spec.resources.gpus == 0:
            return Quote(self.name, 0, cap, cap, "CPU-only job: rate cards price GPU time only")
        if not rates:
            return Quote(
                self.name,
                0,
                cap,
                cap,
                f"no fitting provider GPU is priced by rate card {digest}: up to the cap",
            )
        cheapest = min(r.ntx_per_gpu_hour for r in rates)
        dearest = max(r.ntx_per_gpu_hour for r in rates)
        low = min(cap, math.floor(gpu_seconds.low * cheapest / 3600))
        high = min(cap, metered_cost(math.ceil(gpu_seconds.high * 1000), dearest))
        basis = (
            f"rate card {digest}: {cheapest}-{dearest} NTX per GPU-hour over "
            f"{len(rates)} GPU model(s), capped at {cap}"
        )
        return Quote(self.name, low, high, cap, basis)


@dataclass(frozen=True)
class AuctionRule:
    """A sealed-bid reverse auction: the winner is paid the second-lowest bid, never more
    than the reserve. Before bids, the posted rates of fitting providers are the best guess
    of their costs (truthful bidding is their best strategy under a second price)."""

    name: str = "auction"

    def quote(self, spec: JobSpec, gpu_seconds: Span, rates: Sequence[MarketRate]) -> Quote:
        if not isinstance(spec.pricing, AuctionPrice):
            raise PricingError(f"the auction rule cannot price {spec.pricing.kind!r}")
        reserve = spec.pricing.reserve
        basis = (
            f"sealed-bid auction over {spec.pricing.bid_window_s} s: the lowest bid wins and "
            f"is paid the second-lowest, at most the reserve {reserve}"
        )
        if not rates or spec.resources.gpus == 0:
            return Quote(self.name, 0, reserve, reserve, basis)
        cheapest = min(r.ntx_per_gpu_hour for r in rates)
        low = min(reserve, math.floor(gpu_seconds.low * cheapest / 3600))
        return Quote(self.name, low, reserve, reserve, basis)


_RULES: dict[str, PricingRule] = {}


def register_rule(rule: PricingRule) -> None:
    """Make `rule` price specs whose pricing kind is `rule.name` (replacing any earlier)."""
    _RULES[rule.name] = rule


def rule_for(kind: str) -> PricingRule:
    try:
        return _RULES[kind]
    except KeyError:
        known = ", ".join(sorted(_RULES))
        raise PricingError(f"no pricing rule for {kind!r} (known: {known})") from None


def registered_rules() -> tuple[str, ...]:
    return tuple(sorted(_RULES))


register_rule(FixedPriceRule())
register_rule(RateCardRule())
register_rule(AuctionRule())
