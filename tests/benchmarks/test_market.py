"""The synthetic market behind `proofnet bench market`: the same market for every mechanism,
awards that respect what each side accepts, and mechanisms plugged in by name."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from typer.testing import CliRunner

from benchmarks.market import (
    Award,
    Job,
    MarketShape,
    Provider,
    SecondPriceAuction,
    mechanism_of,
    replay,
    run_market_bench,
    synthesise,
)
from proofnet.cli import app

SMALL = MarketShape(jobs=60, providers=8, hours=6.0, seed=3)


@dataclass
class Recording:
    """Wraps a mechanism and keeps every award with the job and the idle set it saw."""

    inner: SecondPriceAuction = field(default_factory=SecondPriceAuction)
    name: str = "recorded"
    awards: list[tuple[Job, Award, list[Provider]]] = field(default_factory=list)

    def award(self, job: Job, idle: Sequence[Provider], now: float) -> Award | None:
        got = self.inner.award(job, idle, now)
        if got is not None:
            self.awards.append((job, got, list(idle)))
        return got


def test_the_same_seed_replays_the_same_market_and_another_seed_does_not() -> None:
    assert (
        run_market_bench(["fixed", "auction"], SMALL).as_dict()
        == run_market_bench(["fixed", "auction"], SMALL).as_dict()
    )
    jobs_a, _ = synthesise(SMALL)
    jobs_b, _ = synthesise(MarketShape(jobs=60, providers=8, hours=6.0, seed=4))
    assert [j.work for j in jobs_a] != [j.work for j in jobs_b]


def test_auction_awards_go_to_the_cheapest_fitting_bidder_within_the_reserve() -> None:
    """Second price: the winner is the lowest-cost idle provider that fits, it is paid at
    least its cost (it never loses money by bidding truthfully) and never above the
    submitter's reserve, and the price is the runner-up's cost when there is one."""
    recording = Recording()
    figures = replay(recording, SMALL)
    assert figures["completed"] == len(recording.awards) > 0
    for job, award, idle in recording.awards:
        fitting = sorted(idle, key=lambda p: p.cost_of(job))
        assert all(p.memory_gb >= job.memory_gb for p in idle)
        assert award.provider.cost_of(job) == pytest.approx(fitting[0].cost_of(job), abs=1e-6)
        assert award.provider.cost_of(job) <= award.payment + 1e-6
        assert award.payment <= job.value + 1e-6
        if len(fitting) > 1 and fitting[1].cost_of(job) <= job.value:
            assert award.payment == pytest.approx(fitting[1].cost_of(job), abs=1e-5)


def test_figures_add_up() -> None:
    report = run_market_bench(["fixed", "rate_card", "auction"], SMALL).as_dict()
    for figures in report["mechanisms"].values():
        assert figures["completed"] + figures["unserved"] == SMALL.jobs
        assert 0 <= figures["utilisation"] <= 1
        assert figures["submitter_cost"] == figures["provider_earnings"]


def test_a_mechanism_is_plugged_in_by_module_and_class_and_bad_names_are_refused() -> None:
    plugged = mechanism_of("benchmarks.market:RateCard")
    assert plugged.name == "rate_card"
    with pytest.raises(ValueError, match="unknown mechanism"):
        mechanism_of("vickrey")
    with pytest.raises(ValueError, match="cannot load"):
        mechanism_of("benchmarks.market:Nope")


def test_the_command_prints_one_json_line_per_run_and_one_line_errors() -> None:
    runner = CliRunner()
    args = ["bench", "market", "--jobs", "30", "--providers", "5", "--hours", "3", "--json"]
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    body = json.loads(done.output)
    assert set(body["mechanisms"]) == {"fixed", "rate_card", "auction"}
    bad = runner.invoke(app, [*args, "--mechanism", "nope"])
    assert bad.exit_code == 2 and "unknown mechanism" in bad.output
