"""`proofnet bench cheat`: every cheat is caught or does not pay.

Each strategy is the attack itself (a forged or bent proof, a saboteur trainer, a forged GPU
answer) met by the product's own checks (`benchmarks/cheat.py`); the honest run beside them
must pass those checks, or a "caught" would mean nothing. The cheats the product does not
stop yet are strict expected failures naming the issue item that stops them: the one run
against the product's checks turns into a pass (pytest says so) when its check lands; the
model-only ones change when the bench is taught the new check.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from benchmarks.cheat import CheatReport, Outcome, run_cheat_bench
from benchmarks.cheat_model import (
    Terms,
    bond_for,
    checks_for,
    detection_probability,
    faked_segments,
    min_segments,
    padding_refusal,
    provider_ev,
    slack_for,
    verification_share,
)
from proofnet.cli import app

# Not stopped on today's main: each names what stops it (none left since the referee of a
# disputed segment, oracle/verification/referee.py).
GAPS: dict[str, str] = {}


@pytest.fixture(scope="module")
def report() -> CheatReport:
    return run_cheat_bench()


def outcome(report: CheatReport, name: str) -> Outcome:
    return next(o for o in report.outcomes if o.strategy == name)


def test_the_table_covers_every_strategy_of_the_issue(report: CheatReport) -> None:
    names = {o.strategy for o in report.outcomes}
    assert {
        "zero_step_proof",
        "truncated_schedule",
        "faked_segments_f0.1_small_norms",
        "faked_segments_f0.25_small_norms",
        "faked_segments_f0.5_small_norms",
        "wrong_learning_rate",
        "checkpoints_from_another_job",
        "smaller_model",
        "idle_lease_on_rate_card_job_padded_3x",
        "idle_lease_on_rate_card_job_within_slack",
        "spoofed_gpu_model_no_compute",
        "spoofed_gpu_model_cpu_claims_h100",
        "spoofed_gpu_model_close_substitute_rate_card",
        "submitter_code_fails_only_on_verifiers",
        "job_code_reads_verifier_or_oracle_files",
        "resume_from_forged_checkpoint",
        "cluster_node_fakes_its_shard",
    } <= names
    assert all(o.method in {"end_to_end", "check_only", "model_only"} for o in report.outcomes)


def test_the_honest_run_passes_the_checks_that_catch_the_cheats(report: CheatReport) -> None:
    honest = outcome(report, "honest_control")
    assert not honest.caught, honest.by
    assert honest.observed["replayed_segments"]


@pytest.mark.parametrize(
    "name",
    [
        "zero_step_proof",
        "truncated_schedule",
        "faked_segments_f0.1_small_norms",
        "faked_segments_f0.25_small_norms",
        "faked_segments_f0.5_small_norms",
        "faked_segments_f0.1_large_norms",
        "wrong_learning_rate",
        "checkpoints_from_another_job",
        "smaller_model",
        "spoofed_gpu_model_no_compute",
        "spoofed_gpu_model_cpu_claims_h100",
        "idle_lease_on_rate_card_job_padded_3x",
        "idle_lease_on_rate_card_job_within_slack",
        "spoofed_gpu_model_close_substitute_rate_card",
        "job_code_reads_verifier_or_oracle_files",
        "resume_from_forged_checkpoint",
        "resume_from_forged_checkpoint_keeping_handed_leaves",
        "cluster_node_fakes_its_shard",
        "submitter_code_fails_only_on_verifiers",
        "submitter_code_fails_only_on_verifiers_machine_keyed",
        *(pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=r)) for n, r in GAPS.items()),
    ],
)
def test_every_cheat_is_caught_or_loses_money(report: CheatReport, name: str) -> None:
    o = outcome(report, name)
    assert o.caught or o.expected_value < 0, (o.by, o.expected_value)


def test_schedule_cheats_are_refused_before_any_replay(report: CheatReport) -> None:
    for name, reason in (
        ("zero_step_proof", "pot_schedule_mismatch"),
        ("truncated_schedule", "pot_schedule_mismatch"),
        ("checkpoints_from_another_job", "pot_data_order_mismatch"),
    ):
        o = outcome(report, name)
        assert o.caught and f"oracle proof check ({reason})" in o.by, o.by
        assert o.observed["replayed_segments"] == []


def test_a_forged_resume_point_is_caught_whatever_the_draw(report: CheatReport) -> None:
    """A resumer that forges the checkpoint it starts from is refused before any replay
    (its leaves up to the resume point are not the lost attempt's committed prefix), or,
    keeping those leaves, by the replay of the first segment it trained, which every draw of
    a resumed proof holds. Without the first check nothing would find its forged history:
    a resumed attempt's draw covers only its own segments."""
    forged = outcome(report, "resume_from_forged_checkpoint")
    assert forged.caught and "oracle resume check (pot_resume_mismatch)" in forged.by, forged.by
    assert forged.observed["replayed_segments"] == []
    assert forged.observed["unchecked_caught_rate_over_draws"] == 0
    kept = outcome(report, "resume_from_forged_checkpoint_keeping_handed_leaves")
    assert kept.caught and kept.by.startswith("replay: segments [11]"), kept.by
    assert 11 in kept.observed["replayed_segments"]


def test_a_cluster_node_that_fakes_its_shard_is_caught_and_blamed_alone(
    report: CheatReport,
) -> None:
    o = outcome(report, "cluster_node_fakes_its_shard")
    assert o.caught and o.by.startswith("cluster replay (spot_check_failed): node 1's"), o.by
    assert o.observed["replayed_segments"]
    assert o.observed["honest_nodes_blamed"] == []
    assert o.expected_value < 0


def test_replayed_cheats_are_caught_by_the_replay(report: CheatReport) -> None:
    for name in ("wrong_learning_rate", "smaller_model", "faked_segments_f0.1_large_norms"):
        o = outcome(report, name)
        assert o.caught and o.by.startswith("replay"), o.by


def test_faked_segments_are_caught_as_often_as_the_model_says(report: CheatReport) -> None:
    """Across many oracle keys the draw lands on a fake about as often as the hypergeometric
    says for the bench job (small norms keep fakes off the top picks, so the random picks
    alone find them)."""
    for f in (0.1, 0.25, 0.5):
        o = outcome(report, f"faked_segments_f{f}_small_norms")
        rate, model = o.observed["caught_rate_over_draws"], o.observed["caught_rate_model_bench"]
        assert abs(rate - model) < 0.1, (f, rate, model)
        assert o.expected_value < 0


def test_hardware_and_metering_checks_catch_the_gross_cheats(report: CheatReport) -> None:
    assert outcome(report, "spoofed_gpu_model_no_compute").by.startswith(
        "GPU challenge (Freivalds)"
    )
    cpu = outcome(report, "spoofed_gpu_model_cpu_claims_h100")
    assert cpu.caught and cpu.by.startswith("GPU challenge timing (API)"), cpu.by
    padded = outcome(report, "idle_lease_on_rate_card_job_padded_3x")
    assert padded.caught and padded.by.startswith("metering bounded by proof"), padded.by


def test_padding_a_rate_card_lease_into_the_slack_risks_the_payment(report: CheatReport) -> None:
    """The slack is sized for honest timing noise (a same-model verifier times the steps,
    start-up taken out), so padding to the bound is refused about half the time; what
    remains is padding below the noise, worth a few per cent of the price at best."""
    o = outcome(report, "idle_lease_on_rate_card_job_within_slack")
    assert 0.4 < o.detection_probability < 0.6 and o.expected_value < 0, o.by
    terms = report.terms
    assert 0 < o.observed["best_response_ev"] < 0.05 * terms.price
    assert o.observed["design_ratio_noise"] < 0.06
    assert o.observed["measured_step_spread_here"] > 0
    # Sizing the slack for a measured spread gives back that spread's honest refusal rate;
    # a spread of a third of the time or more has no slack at all.
    a = 0.02
    assert slack_for(0.4, a) is None
    for sigma in (0.01, 0.05):
        slack = slack_for(math.sqrt(2) * sigma, a)
        assert slack is not None
        assert padding_refusal(0, slack, a, math.sqrt(2) * sigma) == pytest.approx(
            0.00135, rel=0.01
        )


def test_a_slower_gpu_claiming_a_faster_model_is_caught_in_metering(report: CheatReport) -> None:
    """An L4 passing as an H100 on a rate-card job: its challenge passes (the timing is not
    compute-bound at the default n), but a verifier with a real H100 times the steps, so its
    own GPU time is refused and guessing an H100's time pays less than honest work."""
    o = outcome(report, "spoofed_gpu_model_close_substitute_rate_card")
    assert o.caught and "gpu_time_exceeds_proof" in o.by, o.by
    assert o.expected_value < 0 and o.observed["slower"] > 2
    low, _ = o.observed["h100_band_tflops"]
    assert o.observed["l4_band_tflops"][1] < low  # the bands do not overlap


def test_job_code_that_departs_on_verifiers_gains_its_submitter_nothing(
    report: CheatReport,
) -> None:
    """The saboteur keyed on its process's history: both verifiers' replays depart alike,
    and so does the provider's own sandbox replay, so the referee finds nothing proven (no
    pay, no slash, results withheld, a refund). Keyed on the machine instead, the
    provider's sandbox reproduces its commitment: rejected and slashed, but the share
    burns. Either way the submitter gets nothing but its money back."""
    history = outcome(report, "submitter_code_fails_only_on_verifiers")
    assert history.caught and history.expected_value < 0, history.by
    assert history.observed["verdict"] == "unproven"
    assert history.observed["provider_answer"] == "concedes"
    machine = outcome(report, "submitter_code_fails_only_on_verifiers_machine_keyed")
    assert machine.caught and machine.expected_value < 0, machine.by
    assert machine.observed["verdict"] == "rejected_burnt"
    assert machine.observed["provider_answer"] == "reproduces"
    assert "never paid to the submitter" in machine.by


def test_hypergeometric_detection() -> None:
    assert detection_probability(10, 1, 1) == pytest.approx(0.1)
    assert detection_probability(10, 0, 3) == 0.0
    assert detection_probability(10, 8, 3) == 1.0
    # 1 - C(9, 3) / C(10, 3)
    assert detection_probability(10, 1, 3) == pytest.approx(1 - 84 / 120)
    # Without replacement beats with replacement.
    assert detection_probability(100, 10, 3) > 1 - 0.9**3


def test_faking_never_pays_while_cost_is_below_price_plus_slash() -> None:
    """EV = f C - p (P + s B) < 0 for every fraction, because p(f) >= f."""
    terms = Terms.defaults()
    for m in range(1, terms.segments + 1):
        f = m / terms.segments
        p = detection_probability(terms.segments, m, terms.spot_checks)
        assert provider_ev(f, p, terms) < 0, f
    # A provider paid nothing net (C = P, no bond) would break even only with no checks.
    loss_leader = replace(terms, cost=terms.price, bond=0.0)
    p = detection_probability(loss_leader.segments, 1, 1)
    assert provider_ev(1 / loss_leader.segments, p, loss_leader) == pytest.approx(0, abs=1e-9)


def test_defaults_meet_the_verification_target() -> None:
    terms = Terms.defaults()
    assert terms.spot_checks == 3 and terms.top_by_norm == 2 and terms.slash_permille == 500
    assert verification_share(terms) <= 0.05
    assert min_segments(terms) == 120
    assert verification_share(replace(terms, segments=100)) > 0.05
    assert checks_for(0.95, 0.5) == 5 and checks_for(0.27, 0.1) == 3
    assert faked_segments(0.1, 120) == 12 and faked_segments(0.001, 120) == 1
    assert math.isfinite(bond_for(terms, 0.1))


def test_cli_prints_the_table_as_json(report: CheatReport) -> None:
    result = CliRunner().invoke(app, ["bench", "cheat", "--json", "--bond", "0"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["terms"]["bond"] == 0
    names = [s["strategy"] for s in data["strategies"]]
    assert names == [o.strategy for o in report.outcomes]
    for s in data["strategies"]:
        assert {"caught", "by", "detection_probability", "expected_value"} <= set(s)
        assert {"verification_share", "method"} <= set(s)
