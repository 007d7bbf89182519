"""The verification fee (proofnet/messages/verification_fee.py) played by those who would
game it: a verifier whose report does not match, a verifier paid on another attestation's
task, a task drawn by an oracle that does not sign the settlement, a report changed after
signing, the provider naming itself as its verifier, one verifier claiming twice, and a
fee that would push the payouts past the attested amount (and so the escrow's budget)."""

from __future__ import annotations

from typing import Any

import pytest
from nacl.signing import SigningKey

from proofnet.messages.verification import VerificationError, VerificationTask
from proofnet.messages.verification_fee import (
    FEE_PPM,
    MAX_FEES_PER_ATTESTATION,
    FeeError,
    FeeEvidence,
    bundle_fees,
    fee_for,
    fee_payouts,
    fee_refusal,
    oracle_key_hash,
)
from tests.proofnet.test_verification_messages import (
    ORACLE,
    OTHER,
    PROVIDER,
    VERIFIER,
    _hex,
    report,
    task_fields,
)

LEAF = "c" * 64
JOB = "a" * 64
VERIFIER_PAYOUT = "addr_test1verifier0000"
PROVIDER_PAYOUT = "addr_test1provider0000"
SIGNERS = {oracle_key_hash(_hex(ORACLE))}


def evidence(
    key: SigningKey = VERIFIER, oracle: SigningKey = ORACLE, **report_changes: Any
) -> FeeEvidence:
    task = VerificationTask.sign(oracle, **task_fields(segments=[1], verifier=_hex(key)))
    changes = {"payout_address": VERIFIER_PAYOUT} | report_changes
    return FeeEvidence(task, report(task, key, **changes))


def refusal(e: FeeEvidence, **where: Any) -> str | None:
    args: dict[str, Any] = {
        "leaf_hash": LEAF,
        "provider": _hex(PROVIDER),
        "job_id": JOB,
        "oracle_key_hashes": SIGNERS,
    }
    return fee_refusal(e, **(args | where))


def test_a_matching_report_earns_its_share_out_of_the_attested_amount() -> None:
    honest = evidence()
    assert refusal(honest) is None
    paid = fee_payouts(PROVIDER_PAYOUT, 1_000_000, [honest])
    assert paid.fees == ((VERIFIER_PAYOUT, 1_000_000 * FEE_PPM // 1_000_000),)
    assert paid.provider == (PROVIDER_PAYOUT, 1_000_000 - paid.fee_total)
    assert paid.outputs == (paid.provider, *paid.fees)
    assert FeeEvidence.from_json(honest.to_json()) == honest


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"status": "failed"}, "says 'failed'"),
        ({"status": "error"}, "says 'error'"),
        ({"status": "withheld"}, "says 'withheld'"),
        ({"payout_address": None}, "names no payout address"),
        # The first segment's two replays disagree: the job's code is not deterministic.
        (
            {
                "repeat": {
                    "segment": 1,
                    "weights_hash": "2" * 64,
                    "update_norm": "0.5",
                    "distance": "0",
                }
            },
            "does not answer every segment",
        ),
        ({"results": []}, "does not answer every segment"),
    ],
)
def test_a_report_that_does_not_match_earns_nothing(changes: dict[str, Any], why: str) -> None:
    refused = refusal(evidence(**changes))
    assert refused is not None and why in refused


def test_a_task_for_another_attestation_job_or_provider_earns_nothing() -> None:
    honest = evidence()
    assert "another attestation" in (refusal(honest, leaf_hash="9" * 64) or "")
    assert "another job" in (refusal(honest, job_id="8" * 64) or "")
    assert "another provider" in (refusal(honest, provider=_hex(OTHER)) or "")


def test_a_task_no_signer_of_the_settlement_drew_earns_nothing() -> None:
    """Anyone can sign a task with their own key and answer it themselves."""
    forged = evidence(oracle=OTHER)
    assert "not signed by an oracle that signs" in (refusal(forged) or "")
    # And a task whose signer is one, but whose signature was made by someone else.
    honest = evidence()
    moved = VerificationTask.model_construct(
        **{**dict(honest.task), "verifier": _hex(OTHER), "signature": honest.task.signature}
    )
    assert refusal(FeeEvidence(moved, honest.report)) is not None


def test_a_report_changed_after_signing_earns_nothing() -> None:
    honest = evidence()
    redirected = honest.report.model_copy(update={"payout_address": "addr_test1attacker000"})
    assert "does not verify" in (refusal(FeeEvidence(honest.task, redirected)) or "")


def test_the_provider_is_never_paid_as_its_own_verifier() -> None:
    with pytest.raises(VerificationError, match="own proof"):
        VerificationTask.sign(ORACLE, **task_fields(verifier=_hex(PROVIDER)))


def test_one_verifier_is_paid_once_and_the_shares_never_exceed_the_amount() -> None:
    second = SigningKey(b"\x05" * 32)
    twice = [evidence(), evidence(), evidence(second, payout_address="addr_test1second00000")]
    for amount in (0, 1, 19, 20, 21, 1_000, 999_999, 2**63 - 1):
        paid = fee_payouts(PROVIDER_PAYOUT, amount, twice)
        assert sum(q for _, q in paid.outputs) == amount
        assert paid.fee_total == fee_for(amount) <= amount * FEE_PPM // 1_000_000
        assert all(q > 0 for _, q in paid.fees)
        assert len(paid.fees) <= 2  # the first verifier's second report adds nothing
        if amount:
            assert paid.provider[1] > 0
    # The remainder of the division goes to the first verifier by key.
    paid = fee_payouts(PROVIDER_PAYOUT, 1_000_020, twice)
    assert [q for _, q in paid.fees] == [25_001, 25_000]


def test_an_attestation_no_verifier_checked_pays_no_fee() -> None:
    paid = fee_payouts(PROVIDER_PAYOUT, 5_000, [])
    assert paid.outputs == ((PROVIDER_PAYOUT, 5_000),)


def test_a_bundle_s_fee_entries_are_read_per_attestation_and_bad_ones_refused() -> None:
    honest = evidence().to_json()
    assert bundle_fees({"attestations": []}, 0) == ()
    per = bundle_fees({"fees": [{"attestation": 1, **honest}]}, 2)
    assert per[0] == () and len(per[1]) == 1
    for bad in (
        {"fees": {}},
        {"fees": [1]},
        {"fees": [{"attestation": 2, **honest}]},
        {"fees": [{"attestation": True, **honest}]},
        {"fees": [{"attestation": 0, "task": honest["task"]}]},
        {"fees": [{"attestation": 0, **honest}] * (MAX_FEES_PER_ATTESTATION + 1)},
    ):
        with pytest.raises(FeeError):
            bundle_fees(bad, 2)


def test_a_node_replay_earns_only_when_it_answers_every_drawn_segment() -> None:
    from nacl.signing import SigningKey

    from proofnet.messages.verification import VerificationReport, VerificationTask
    from proofnet.messages.verification_fee import FeeEvidence, fee_refusal, oracle_key_hash

    oracle, verifier = SigningKey(b"\x01" * 32), SigningKey(b"\x02" * 32)
    task = VerificationTask.sign(
        oracle,
        job_id="a" * 64,
        nonce="b" * 32,
        unit=1,
        attestation="c" * 64,
        pot_root="d" * 64,
        provider="e" * 64,
        verifier=bytes(verifier.verify_key).hex(),
        device_class="cpu",
        kind="node",
        segments=[2, 5],
        files=["units/1/pot/cluster.json"],
        draw_signature="f" * 128,
    )

    def report(segments: list[int]) -> VerificationReport:
        results = [
            {"segment": s, "shards": ["1" * 64], "steps": [], "weights_hash": "2" * 64}
            for s in segments
        ]
        return VerificationReport.sign(
            verifier, task, status="passed", node_results=results, payout_address="addr_test1v"
        )

    def refusal(r: VerificationReport) -> str | None:
        return fee_refusal(
            FeeEvidence(task, r),
            leaf_hash="c" * 64,
            provider="e" * 64,
            job_id="a" * 64,
            oracle_key_hashes={oracle_key_hash(bytes(oracle.verify_key).hex())},
        )

    assert refusal(report([2, 5])) is None
    assert refusal(report([2])) == "the report does not answer every segment the task drew"
