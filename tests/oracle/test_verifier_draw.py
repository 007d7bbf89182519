"""The verifier draw is stable across retries (oracle/verification/verifiers.py).

An oracle retries a postponed verification every few seconds; each retry asks the API who
is online. A verifier mid-replay asks for no new tasks, so it drops off that list: were the
draw taken again from it on every retry, its replay would be orphaned (a task nobody reads
any more, unpaid work) by a second verifier drawn for the same segments. Round r's verifier
is kept until its answer period is over; only then is round r + 1 drawn, and a superseded
verifier's late, honest report is still used (and its fee evidence names it).

The API's relay is a fake of the oracle's desk: it keeps the posted tasks by digest (the
same task twice is one unit, as the API does) with when each was first posted, and reports
signed by a verifier's own key come in when the test says so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey

from oracle.verification.spotcheck import SpotCheckUnavailable
from oracle.verification.verifiers import Candidate, Subject, VerifierSpotChecker
from proofnet.messages.key_grant import KeyRequest
from proofnet.messages.verification import VerificationReport, VerificationTask

ORACLE = SigningKey(b"\x01" * 32)
PROVIDER = bytes(SigningKey(b"\x02" * 32).verify_key).hex()
VERIFIERS = {bytes(k.verify_key).hex(): k for k in (SigningKey(bytes([i]) * 32) for i in (3, 4, 5))}
ANSWER_S = 600.0


@dataclass(frozen=True)
class Job:
    job_id: str = "ab" * 32
    sealed: bool = False


@dataclass
class Desk:
    clock: list[datetime]
    online: set[str] = field(default_factory=lambda: set(VERIFIERS))
    units: dict[str, dict[str, Any]] = field(default_factory=dict)  # digest -> state
    payouts: dict[str, str] = field(default_factory=dict)  # re-registered payout addresses

    def artifact(self, job_id: str, name: str) -> bytes:
        raise AssertionError("await_report reads no artifact")

    def worker_payout(self, worker_key: str) -> str | None:
        return self.payouts.get(worker_key, f"addr-{worker_key[:8]}")

    def verifier_candidates(self, device_class: str, exclude: str) -> list[Candidate]:
        return [
            Candidate(k, self.worker_payout(k) or "") for k in sorted(self.online) if k != exclude
        ]

    def post_verification(self, task: VerificationTask) -> dict[str, Any]:
        unit = self.units.setdefault(
            task.digest, {"task": task, "report": None, "created_at": self.clock[0].isoformat()}
        )
        return {"report": unit["report"], "created_at": unit["created_at"]}

    def request_keys(self, request: KeyRequest) -> int:
        raise AssertionError("the job is not sealed")

    def tasks(self) -> list[VerificationTask]:
        return [u["task"] for u in self.units.values()]

    def report(self, task: VerificationTask, verifier: str | None = None) -> None:
        """`verifier` (the task's own by default) answers `task`."""
        key = VERIFIERS[verifier or task.verifier]
        signed = VerificationReport.sign(
            key, task, status="passed", payout_address=f"addr-{task.verifier[:8]}"
        )
        self.units[task.digest]["report"] = signed.to_json()


@pytest.fixture
def world() -> tuple[VerifierSpotChecker, Desk, list[datetime]]:
    clock = [datetime(2026, 12, 2, tzinfo=UTC)]
    desk = Desk(clock)
    checker = VerifierSpotChecker(desk, ORACLE, answer_within_s=ANSWER_S, now=lambda: clock[0])
    return checker, desk, clock


SUBJECT = Subject("0f" * 16, PROVIDER, None, "cd" * 32, "ef" * 32, "cpu")
SIGNATURE = ORACLE.sign(b"draw").signature


def ask(checker: VerifierSpotChecker) -> tuple[VerificationTask, VerificationReport, str]:
    return checker.await_report(
        SUBJECT,
        Job(),  # type: ignore[arg-type]
        "replay",
        (1, 3),
        ("pot/manifest.json",),
        (),
        SIGNATURE,
        b"seed",
    )


def test_a_verifier_that_drops_offline_mid_replay_keeps_its_task(world: Any) -> None:
    checker, desk, clock = world
    with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
        ask(checker)
    (first,) = desk.tasks()
    # Replaying, it stops polling for tasks: no longer online. Retries within its time ask
    # it again, and draw nobody else.
    desk.online.discard(first.verifier)
    for _ in range(3):
        clock[0] += timedelta(seconds=60)
        with pytest.raises(SpotCheckUnavailable, match=first.verifier[:16]):
            ask(checker)
    assert desk.tasks() == [first]
    desk.report(first)
    task, report, payout = ask(checker)
    assert task == first and report.verifier == first.verifier
    assert payout == f"addr-{first.verifier[:8]}"


def test_the_next_round_is_drawn_only_after_the_answer_period(world: Any) -> None:
    checker, desk, clock = world
    with pytest.raises(SpotCheckUnavailable):
        ask(checker)
    (first,) = desk.tasks()
    clock[0] += timedelta(seconds=ANSWER_S - 1)
    with pytest.raises(SpotCheckUnavailable, match="waiting"):
        ask(checker)
    assert len(desk.tasks()) == 1
    clock[0] += timedelta(seconds=2)
    with pytest.raises(SpotCheckUnavailable, match=r"\(round 1\)"):
        ask(checker)
    first_again, second = desk.tasks()
    assert first_again == first and second.round == 1 and second.verifier != first.verifier


def test_a_late_report_of_a_superseded_round_is_used_and_paid_to_its_verifier(
    world: Any,
) -> None:
    """Round 0's verifier answers after round 1 was drawn: its work is not wasted. Its
    report is the one used (the fee evidence names it); round 1's task, unanswered, earns
    nothing."""
    checker, desk, clock = world
    with pytest.raises(SpotCheckUnavailable):
        ask(checker)
    clock[0] += timedelta(seconds=ANSWER_S + 1)
    with pytest.raises(SpotCheckUnavailable, match=r"\(round 1\)"):
        ask(checker)
    first, second = desk.tasks()
    desk.report(first)
    task, report, payout = ask(checker)
    assert task == first and report.verifier == first.verifier != second.verifier
    assert payout == f"addr-{first.verifier[:8]}"


def test_a_report_signed_by_another_verifier_than_the_drawn_one_is_not_used(
    world: Any,
) -> None:
    """Attack: the superseded task answered with a key other than its drawn verifier's
    (the API, or a verifier claiming another's task to earn its fee)."""
    checker, desk, clock = world
    with pytest.raises(SpotCheckUnavailable):
        ask(checker)
    (first,) = desk.tasks()
    other = next(k for k in VERIFIERS if k != first.verifier)
    desk.report(first, verifier=other)
    with pytest.raises(SpotCheckUnavailable, match="does not hold"):
        ask(checker)


def test_the_draw_is_kept_per_subject_and_segments(world: Any) -> None:
    """Another attestation (or other segments) is drawn afresh, not given the first one's."""
    checker, desk, _clock = world
    with pytest.raises(SpotCheckUnavailable):
        ask(checker)
    other = Subject("0f" * 16, PROVIDER, None, "aa" * 32, "ef" * 32, "cpu")
    with pytest.raises(SpotCheckUnavailable):
        checker.await_report(
            other,
            Job(),  # type: ignore[arg-type]
            "replay",
            (1, 3),
            ("pot/manifest.json",),
            (),
            SIGNATURE,
            b"other seed",
        )
    assert len(desk.tasks()) == 2
    assert {t.attestation for t in desk.tasks()} == {"cd" * 32, "aa" * 32}


def test_a_kept_verifier_now_paid_to_the_providers_address_is_dropped(world: Any) -> None:
    """Attack: the provider re-registers the drawn verifier's payout to its own address
    (a sybil it controls). Kept draws are asked again only while still eligible: the round
    is drawn afresh among the others."""
    checker, desk, clock = world
    with pytest.raises(SpotCheckUnavailable):
        ask(checker)
    (first,) = desk.tasks()
    desk.payouts[first.verifier] = desk.worker_payout(PROVIDER) or ""
    clock[0] += timedelta(seconds=60)
    with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
        ask(checker)
    redrawn = desk.tasks()[-1]
    assert redrawn.verifier != first.verifier and redrawn.round == 0


def test_the_served_oracles_answer_window_is_its_setting(tmp_path: Path) -> None:
    """PROOFNET_ORACLE_VERIFIER_ANSWER_WITHIN_S (and _DISPUTE_WITHIN_S) reach the served
    oracle's checker: with a short window an unanswered draw moves on to the next round as
    soon as it passes, not after the default hour."""
    from oracle.keys import write_key
    from oracle.metrics import OracleMetrics
    from oracle.service import context_from_settings
    from proofnet.settings import build_settings

    write_key(tmp_path / "oracle.skey")
    settings = build_settings(
        oracle_key_file=tmp_path / "oracle.skey",
        data_dir=tmp_path,
        network="preprod",
        oracle_verifier_answer_within_s=5,
        oracle_dispute_within_s=7,
    )
    served = context_from_settings(settings, None, OracleMetrics())  # type: ignore[arg-type]
    assert isinstance(served.spot_checker, VerifierSpotChecker)
    assert served.spot_checker.dispute_within_s == 7
    clock = [datetime(2026, 12, 2, tzinfo=UTC)]
    desk = Desk(clock)
    checker = dataclasses.replace(served.spot_checker, desk=desk, now=lambda: clock[0])
    with pytest.raises(SpotCheckUnavailable, match="waiting"):
        ask(checker)
    (first,) = desk.tasks()
    clock[0] += timedelta(seconds=6)
    with pytest.raises(SpotCheckUnavailable, match=r"\(round 1\)"):
        ask(checker)
    assert [t.round for t in desk.tasks()] == [0, 1]
    # The default hour would still be waiting on round 0 then.
    other = Desk(clock)
    default = dataclasses.replace(checker, answer_within_s=3600.0, desk=other)
    with pytest.raises(SpotCheckUnavailable):
        ask(default)
    clock[0] += timedelta(seconds=6)
    with pytest.raises(SpotCheckUnavailable, match="waiting for verifier") as waited:
        ask(default)
    assert "round" not in str(waited.value) and len(other.tasks()) == 1
