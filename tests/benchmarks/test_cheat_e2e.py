"""`proofnet bench cheat --end-to-end`: every cheat played through the whole loop is caught
or does not pay.

One loop (benchmarks/cheat_e2e.py: a local devnet with the protocol deployed, the API, three
oracles settling 2-of-3 and drawing verifier workers, three verify-only honest workers, one
provider per strategy running the product's worker with its harness bent) for the whole
module. No oracle replays job code: every row's segments were replayed by drawn verifier
workers, and a disputed replay refereed. The honest provider beside the cheaters must be
verified and paid on chain (less the verifiers' fee), or a "caught" would mean nothing; a
caught cheat must be unpaid. The submitter's saboteur, in the same phase: unproven (nobody
paid, no slash), the submitter out of pocket. A cheat that still paid would be a strict
expected failure in E2E_GAPS, as in test_cheat.py.
"""

from __future__ import annotations

import os

import pytest

from benchmarks.cheat import CheatReport, Outcome, run_cheat_bench
from benchmarks.cheat_e2e_snoop import DEFAULT_IMAGE, SNOOP_STRATEGY
from benchmarks.cheat_harness import STRATEGIES

pytestmark = pytest.mark.slow

PLAYED = tuple(s for s in STRATEGIES if s != "honest_control")
# Played beside the providers by benchmarks/cheat_e2e_more.py's phases.
SPOOF = "spoofed_gpu_model_cpu_claims_h100"
IDLE = "idle_lease_on_rate_card_job_idle_100s"
FORGED = "resume_from_forged_checkpoint"
MORE = (SPOOF, IDLE, FORGED)
# Played end to end and still paying there: each names why (none now).
E2E_GAPS: dict[str, str] = {}


@pytest.fixture(scope="module")
def report() -> CheatReport:
    return run_cheat_bench(
        end_to_end=True, snoop_image=os.environ.get("PROOFNET_TEST_IMAGE") or DEFAULT_IMAGE
    )


def row(report: CheatReport, name: str) -> Outcome:
    return next(o for o in report.outcomes if o.strategy == name)


def test_every_provider_strategy_ran_through_the_loop(report: CheatReport) -> None:
    ended = {o.strategy for o in report.outcomes if o.method == "end_to_end"}
    assert {*STRATEGIES, *MORE, "submitter_code_fails_only_on_verifiers"} <= ended


def test_every_row_was_replayed_by_drawn_verifier_workers(report: CheatReport) -> None:
    """No oracle replayed job code: every end-to-end row that ran a job says so. The spoofed
    GPU never ran one: the API's challenge refused its GPU at onboarding (its own test)."""
    rows = [o for o in report.outcomes if o.method == "end_to_end" and o.strategy != SPOOF]
    assert rows and {o.observed["verification"] for o in rows} == {"drawn_verifiers"}
    assert row(report, SPOOF).observed["verification"] == "api_gpu_challenge"


def test_the_honest_provider_is_verified_and_paid_on_chain(report: CheatReport) -> None:
    """Paid its price less the fee of the verifiers its drawn replay rests on."""
    from benchmarks.cheat_e2e import PRICE
    from proofnet.messages.verification_fee import fee_for

    honest = row(report, "honest_control")
    assert not honest.caught and honest.paid_on_chain, honest.by
    assert honest.observed["oracle_status"] == "settled" and honest.observed["settlement_tx"]
    assert honest.observed["paid_ntx"] == PRICE - fee_for(PRICE), honest.by


@pytest.mark.parametrize(
    "name",
    [
        *PLAYED,
        *(
            pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=r))
            for n, r in E2E_GAPS.items()
        ),
    ],
)
def test_every_cheat_played_end_to_end_is_caught_or_loses_money(
    report: CheatReport, name: str
) -> None:
    o = row(report, name)
    assert o.method == "end_to_end"
    assert o.caught or o.expected_value < 0, (o.by, o.expected_value)


@pytest.mark.parametrize("name", PLAYED)
def test_a_caught_provider_is_not_paid(report: CheatReport, name: str) -> None:
    o = row(report, name)
    if o.caught:
        assert o.paid_on_chain is False and o.observed["paid_ntx"] == 0, o.by
        # Rejected by the proposer; or unproven, the provider's fault (two drawn verifiers
        # replayed a disputed segment alike and not to the commitment, and the cheater's
        # worker, gone after its one job, never answered the dispute); or verified by the
        # proposer (its draw missed) and refused by a co-signer whose own draw caught it:
        # never signed either way.
        if o.observed["oracle_status"] == "rejected":
            assert o.observed["fault"] == "provider", o.by
        elif o.observed["oracle_status"] == "unproven":
            assert o.observed["fault"] == "provider", o.by
            assert o.observed["oracle_reason"] == "replay_unproven", o.by
        else:
            assert o.observed["quorum_refusal"].startswith("rejected: "), o.by


def test_schedule_cheats_are_refused_by_the_oracle_for_the_reason_the_checks_give(
    report: CheatReport,
) -> None:
    for name, reason in (
        ("zero_step_proof", "pot_schedule_mismatch"),
        ("truncated_schedule", "pot_schedule_mismatch"),
        ("checkpoints_from_another_job", "pot_data_order_mismatch"),
    ):
        o = row(report, name)
        assert o.caught and o.observed["oracle_reason"] == reason, o.by


def test_the_saboteurs_job_is_refereed_by_drawn_verifiers_and_pays_nobody(
    report: CheatReport,
) -> None:
    """Two drawn verifiers depart alike and the honest provider's own sandbox replay agrees
    with them: unproven, the provider unpaid and not slashed, the submitter's EV negative."""
    o = row(report, "submitter_code_fails_only_on_verifiers")
    assert o.observed["verification"] == "drawn_verifiers", o.by
    assert o.caught and o.expected_value < 0, o.by
    assert o.observed["oracle_status"] == "unproven", o.by
    assert o.observed["oracle_reason"] == "replay_unproven", o.by
    assert "two verifiers" in o.by and o.observed["paid_ntx"] == 0, o.by
    # Its honest twin, in the same phase and verified by the same drawn workers, is paid.
    twin = o.observed["honest_twin"]
    assert twin["status"] == "settled" and twin["paid_ntx"] > 0 and twin["settlement_tx"], twin


def test_a_spoofed_gpu_fails_the_apis_challenge_and_is_never_leased(report: CheatReport) -> None:
    """A CPU worker claiming an H100 (its NVML and its challenge device faked) onboards
    through the API's own round: the API's clock fails it as too slow, the provider sees
    why, and the job asking for one GPU stays queued while its worker polls: unpaid."""
    o = row(report, SPOOF)
    assert o.method == "end_to_end" and o.observed["verification"] == "api_gpu_challenge"
    assert o.caught and o.paid_on_chain is False and o.expected_value <= 0, o.by
    assert o.observed["onboarding"]["registered"], o.observed["onboarding"]
    (gpu,) = o.observed["gpus"]
    assert gpu["model"] == o.observed["claimed_model"] and gpu["check_status"] == "failed"
    assert not gpu["offered"] and "too slow" in gpu["why"], gpu
    assert o.observed["gpu_job_status"] == "queued" and o.observed["gpu_job_attempts"] == 0


def test_an_idle_lease_on_a_rate_card_job_is_refused_by_the_metering_bound(
    report: CheatReport,
) -> None:
    """A rate-card provider holds its lease idle before training and attests that time: the
    oracle bounds the payable GPU time by the committed steps at the step time its replay
    measured, refuses the claim and nothing is paid."""
    o = row(report, IDLE)
    assert o.method == "end_to_end", o.by
    assert o.observed["oracle_status"] == "rejected", o.by
    assert o.observed["oracle_reason"] == "gpu_time_exceeds_proof", o.by
    assert o.caught and o.paid_on_chain is False and o.observed["paid_ntx"] == 0, o.by
    assert o.observed["attested_gpu_ms"] > o.observed["proof_bound_ms"], o.observed
    assert o.observed["claimed_ntx"] > o.observed["payable_ntx"], o.observed


def test_a_resume_from_a_forged_checkpoint_is_refused_by_the_resume_check(
    report: CheatReport,
) -> None:
    """A job's first provider is lost after checkpoint 10 (its worker leaves the checkpoint
    and releases); the second is handed it and resumes from a history of its own: the
    oracles refuse its attestation before any replay, and nothing is paid."""
    o = row(report, FORGED)
    assert o.method == "end_to_end", o.by
    assert o.observed["oracle_status"] == "rejected", o.by
    assert o.observed["oracle_reason"] == "pot_resume_mismatch", o.by
    assert o.caught and o.paid_on_chain is False and o.observed["paid_ntx"] == 0, o.by
    assert o.observed["attempt"] == 2, o.observed
    assert [h["attempt"] for h in o.observed["history"]] == [1, 2], o.observed
    assert o.observed["history"][0]["outcome"] == "released", o.observed


def test_job_code_that_snoops_reaches_nothing_in_the_providers_or_verifiers_container(
    report: CheatReport,
) -> None:
    """The submitter's code reads every role's key and database on this host and reaches
    every service when run there, and departs whenever it does. Trained by a Docker-runtime
    provider and replayed by the only verifier the oracles can draw, also on Docker, it
    reached none of them: the replay matched, the job settled, provider and verifier paid,
    every container of the job in its pinned image without network."""
    o = row(report, SNOOP_STRATEGY)
    if "snoop_unavailable" in o.observed:
        why = o.observed["snoop_unavailable"]
        if os.environ.get("PROOFNET_REQUIRE_DOCKER") == "1":
            pytest.fail(f"PROOFNET_REQUIRE_DOCKER=1 but {why}", pytrace=False)
        pytest.skip(f"{why} (set PROOFNET_REQUIRE_DOCKER=1 to make this a failure)")
    assert o.method == "end_to_end" and o.caught, o.by
    assert o.observed["oracle_status"] == "settled" and o.observed["settlement_tx"], o.by
    assert o.observed["paid_ntx"] > 0 and o.observed["verifier_fee_ntx"] > 0, o.observed
    assert o.expected_value < 0, o.expected_value
    # Live code: on the host it reached every key and database it looked for, and every
    # service, so only the containers stopped it.
    targets = o.observed["targets"]
    assert set(o.observed["reached_on_host"]) == {*targets["files"], *targets["endpoints"]}
    keys = [f for f in targets["files"] if f.endswith(".skey")]
    assert len(keys) >= 5, targets  # both workers' and the three oracles'
    containers = o.observed["containers"]
    assert containers["training"] >= 1 and containers["replaying"] >= 1, containers
    assert containers["networks"] == ["none"], containers
    assert containers["images"] == [o.observed["image"].split("@", 1)[1]], containers
