"""A synthetic compute market, replayed under each pricing mechanism (`proofnet bench market`).

Jobs of varied size, hardware need and deadline arrive at random; providers of varied
hardware and cost serve them one job at a time. A *mechanism* decides, whenever a job waits
and providers are idle, who runs it and what the submitter pays. The same arrivals and
providers (one seed) are replayed under every mechanism, so the figures compare the rules
and nothing else:

- `submitter_cost_per_ref_gpu_hour`: what submitters paid per reference GPU-hour of work;
- `provider_earnings` and `provider_profit` (earnings minus the providers' own costs);
- `utilisation`: busy GPU time over available GPU time;
- `time_to_start_s`: mean and 90th percentile from arrival to start (windows included);
- `completed` / `unserved`: jobs that ran, and jobs that never found a provider at or
  under what the submitter would pay before their start deadline.

Plugging in a mechanism: a class with a `name` and `award(job, idle, now)` returning an
`Award` (or None to leave the job waiting), passed as `--mechanism package.module:Class`.
The auction mechanism clears with the product's own rule (`proofnet.messages.auction.clear`)
over real signed bids, so what is measured is what the API, the worker and the oracle run.
docs/pricing.md explains the model and how to read the figures.
"""

from __future__ import annotations

import heapq
import importlib
import math
import random
import secrets
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# Relative speed (reference GPU-hours per wall hour) and memory per GPU model; costs are the
# providers' own (power, amortisation) per GPU-hour in NTX, spread per provider.
GPU_MODELS: dict[str, tuple[float, int, float]] = {
    # model: (speed, memory GB, median cost per GPU-hour)
    "NVIDIA H100 80GB HBM3": (3.0, 80, 2.4),
    "NVIDIA A100 80GB": (2.0, 80, 1.5),
    "NVIDIA L4": (1.0, 24, 0.6),
    "NVIDIA T4": (0.5, 16, 0.3),
}
HOUR_S = 3600.0


@dataclass(frozen=True)
class Job:
    id: int
    arrival_s: float
    work: float  # reference GPU-hours
    memory_gb: int  # the least GPU memory it needs
    start_by_s: float  # later than this, the submitter gives up
    value: float  # the most the submitter pays (its reserve), NTX


@dataclass
class Provider:
    id: int
    model: str
    cost_per_hour: float  # NTX per GPU-hour, its own
    worker_key: str = ""
    signing_key: Any = None
    busy_until_s: float = 0.0
    busy_s: float = 0.0
    earned: float = 0.0
    spent: float = 0.0

    @property
    def speed(self) -> float:
        return GPU_MODELS[self.model][0]

    @property
    def memory_gb(self) -> int:
        return GPU_MODELS[self.model][1]

    def runtime_s(self, job: Job) -> float:
        return job.work / self.speed * HOUR_S

    def cost_of(self, job: Job) -> float:
        return self.cost_per_hour * self.runtime_s(job) / HOUR_S


@dataclass(frozen=True)
class Award:
    provider: Provider
    payment: float  # NTX the submitter pays
    delay_s: float = 0.0  # before the job can start (a bidding window)


class Mechanism(Protocol):
    name: str

    def award(self, job: Job, idle: Sequence[Provider], now: float) -> Award | None: ...


@dataclass
class FixedPrice:
    """The submitter posts one price (`share` of what it would pay at most); the first idle
    provider that fits and covers its cost at that price takes the job."""

    share: float = 0.6
    name: str = "fixed"

    def award(self, job: Job, idle: Sequence[Provider], now: float) -> Award | None:
        price = job.value * self.share
        for p in idle:
            if p.cost_of(job) <= price:
                return Award(p, price)
        return None


@dataclass
class RateCard:
    """Providers post a rate of cost x `markup` per GPU-hour; the submitter takes the idle
    provider whose posted rate makes the job cheapest, if within what it pays at most."""

    markup: float = 1.3
    name: str = "rate_card"

    def award(self, job: Job, idle: Sequence[Provider], now: float) -> Award | None:
        offers = [(p.cost_of(job) * self.markup, p.id, p) for p in idle]
        if not offers:
            return None
        price, _, p = min(offers)
        return Award(p, price) if price <= job.value else None


@dataclass
class SecondPriceAuction:
    """Sealed-bid reverse auction, cleared by `proofnet.messages.auction.clear`: every idle
    fitting provider bids its true cost (its best strategy under a second price), the
    submitter's reserve is what it pays at most; bids are integers in base units."""

    window_s: float = 60.0 + 300.0  # bidding window + reveal window
    unit: int = 1_000_000  # base units per NTX
    name: str = "auction"

    def award(self, job: Job, idle: Sequence[Provider], now: float) -> Award | None:
        from proofnet.messages.auction import clear, new_bid, sign_bid

        reserve = max(1, math.floor(job.value * self.unit))
        asks = [(p, max(1, math.ceil(p.cost_of(job) * self.unit))) for p in idle]
        if not any(amount <= reserve for _, amount in asks):
            return None  # nobody would bid under the reserve: no auction is run
        job_id = f"{job.id:064x}"
        bids = []
        for p, amount in asks:
            bid = new_bid(job_id, p.worker_key, min(amount, 2**63 - 1), secrets.token_bytes(32))
            bids.append(sign_bid(bid, p.signing_key))
        outcome = clear(
            job_id=job_id,
            reserve=reserve,
            bids=bids,
            commitments=[b.bid.commitment for b in bids],
            verify_signatures=False,  # signed just above; the product verifies on reveal
        )
        if outcome.winner is None or outcome.price is None:
            return None
        winner = next(p for p in idle if p.worker_key == outcome.winner)
        return Award(winner, outcome.price / self.unit, delay_s=self.window_s)


BUILT_IN: dict[str, type] = {
    "fixed": FixedPrice,
    "rate_card": RateCard,
    "auction": SecondPriceAuction,
}


def mechanism_of(name: str) -> Mechanism:
    """A built-in mechanism by name, or `package.module:Class` for one of your own."""
    if name in BUILT_IN:
        return BUILT_IN[name]()  # type: ignore[no-any-return]
    module, sep, attr = name.partition(":")
    if not sep:
        known = ", ".join(sorted(BUILT_IN))
        raise ValueError(f"unknown mechanism {name!r}: use one of {known} or module:Class")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load mechanism {name!r}: {exc}") from None
    made: Mechanism = cls()
    return made


@dataclass(frozen=True)
class MarketShape:
    jobs: int = 400
    providers: int = 40
    hours: float = 48.0  # arrivals spread over this long
    seed: int = 7


def synthesise(shape: MarketShape) -> tuple[list[Job], list[Provider]]:
    """Arrivals, job sizes, deadlines, values and providers, all from `shape.seed`."""
    rng = random.Random(shape.seed)
    models = list(GPU_MODELS)
    providers = [
        Provider(
            id=i,
            model=rng.choices(models, weights=[2, 3, 4, 3])[0],
            cost_per_hour=0.0,
        )
        for i in range(shape.providers)
    ]
    for p in providers:
        p.cost_per_hour = GPU_MODELS[p.model][2] * rng.uniform(0.75, 1.35)
    jobs = []
    t = 0.0
    rate = shape.jobs / (shape.hours * HOUR_S)
    for i in range(shape.jobs):
        t += rng.expovariate(rate)
        work = min(40.0, rng.lognormvariate(math.log(2.0), 0.9))  # reference GPU-hours
        memory = rng.choices([16, 24, 80], weights=[4, 3, 3])[0]
        patience = rng.uniform(0.5, 8.0) * HOUR_S
        # What the work is worth to its submitter per reference GPU-hour.
        value = work * rng.uniform(0.45, 1.2)
        jobs.append(Job(i, t, work, memory, t + patience, value))
    return jobs, providers


def _with_keys(providers: list[Provider]) -> list[Provider]:
    from nacl.signing import SigningKey

    for p in providers:
        seed = p.id.to_bytes(32, "big")  # deterministic keys: the same market every run
        p.signing_key = SigningKey(seed)
        p.worker_key = bytes(p.signing_key.verify_key).hex()
    return providers


def replay(mechanism: Mechanism, shape: MarketShape) -> dict[str, Any]:
    """Run one mechanism over the market `shape` describes; its figures."""
    jobs, providers = synthesise(shape)
    _with_keys(providers)
    # Events: (time, order, kind, payload); a waiting job is retried whenever a provider
    # frees up or another job arrives.
    events: list[tuple[float, int, str, int]] = [(j.arrival_s, j.id, "arrive", j.id) for j in jobs]
    # ... and once more just past its start deadline, so a job nobody took is counted then.
    events += [(j.start_by_s + 1e-6, len(jobs) + j.id, "deadline", j.id) for j in jobs]
    heapq.heapify(events)
    order = 2 * len(jobs)
    waiting: list[Job] = []
    starts: list[float] = []
    paid = 0.0
    served_work = 0.0
    unserved = 0
    end = 0.0
    while events:
        now, _, kind, _payload = heapq.heappop(events)
        end = max(end, now)
        if kind == "arrive":
            waiting.append(jobs[_payload])
        still: list[Job] = []
        for job in sorted(waiting, key=lambda j: j.arrival_s):
            if now > job.start_by_s:
                unserved += 1
                continue
            idle = [p for p in providers if p.busy_until_s <= now and p.memory_gb >= job.memory_gb]
            award = mechanism.award(job, idle, now)
            if award is None:
                still.append(job)
                continue
            p = award.provider
            start = now + award.delay_s
            run_s = p.runtime_s(job)
            p.busy_until_s = start + run_s
            p.busy_s += run_s
            p.earned += award.payment
            p.spent += p.cost_of(job)
            paid += award.payment
            served_work += job.work
            starts.append(start - job.arrival_s)
            order += 1
            heapq.heappush(events, (p.busy_until_s, order, "free", p.id))
        waiting = still
    unserved += len(waiting)
    span = max(end, max((p.busy_until_s for p in providers), default=0.0))
    capacity = span * len(providers)
    earned = sum(p.earned for p in providers)
    starts_sorted = sorted(starts)
    return {
        "completed": len(starts),
        "unserved": unserved,
        "submitter_cost": round(paid, 3),
        "submitter_cost_per_ref_gpu_hour": round(paid / served_work, 4) if served_work else None,
        "provider_earnings": round(earned, 3),
        "provider_profit": round(earned - sum(p.spent for p in providers), 3),
        "utilisation": round(sum(p.busy_s for p in providers) / capacity, 4) if capacity else 0,
        "time_to_start_s": {
            "mean": round(statistics.fmean(starts), 1) if starts else None,
            "p90": round(starts_sorted[int(0.9 * (len(starts_sorted) - 1))], 1) if starts else None,
        },
    }


@dataclass
class MarketReport:
    shape: MarketShape
    mechanisms: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "jobs": self.shape.jobs,
            "providers": self.shape.providers,
            "hours": self.shape.hours,
            "seed": self.shape.seed,
            "mechanisms": self.mechanisms,
        }


def run_market_bench(names: Sequence[str], shape: MarketShape) -> MarketReport:
    report = MarketReport(shape)
    for name in names:
        mechanism = mechanism_of(name)
        report.mechanisms[mechanism.name] = replay(mechanism, shape)
    return report
