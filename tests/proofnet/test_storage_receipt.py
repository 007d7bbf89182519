"""Storage receipts played by the attacker: a co-signer and the audit re-verify every
challenge a receipt is paid for, so fabricated, duplicated, bunched or foreign-root
challenges pay nothing, and a receipt paying for them is refused; the honest twin pays."""

from __future__ import annotations

import hashlib
import secrets

import pytest
from nacl.signing import SigningKey
from pycardano import Address, Network, PaymentSigningKey

from proofnet.messages import storage as s
from proofnet.messages import storage_receipt as r
from tests.proofnet.storage_receipts import evidence_for, receipt

ORACLE = SigningKey(b"\x05" * 32)
ORACLE_HASH = hashlib.blake2b(bytes(ORACLE.verify_key), digest_size=28).hexdigest()
JOB = "ab" * 32
DAY = 86400
T0 = 1_000_000
PRICE = 10**9
DATA = secrets.token_bytes(10 * 1024 + 17)
WEEKLY = [T0 + 7 * DAY * k for k in range(1, 5)]  # four challenges over 28 days


def _address() -> str:
    vk = PaymentSigningKey.generate().to_verification_key()
    return str(Address(vk.hash(), network=Network.TESTNET))


PAYOUT = _address()


def _receipt(key: SigningKey = ORACLE, **over: object) -> r.StorageReceipt:
    fields: dict[str, object] = {
        "network": "devnet",
        "job_id": JOB,
        "payout_address": PAYOUT,
        "data": DATA,
        "placed_at": T0,
        "answered": WEEKLY,
        "ntx_per_gb_month": PRICE,
    }
    fields.update(over)
    return receipt(key, **fields)  # type: ignore[arg-type]


def _refusal(rec: r.StorageReceipt) -> str | None:
    return r.receipt_refusal(rec, job_id=JOB, oracle_key_hashes={ORACLE_HASH})


def _with_challenges(rec: r.StorageReceipt, challenges: object, amount: int) -> r.StorageReceipt:
    body = rec.body.model_copy(update={"challenges": challenges, "amount": amount})
    return r.sign_receipt(ORACLE, body)


WEEK_PAY = s.storage_cost(len(DATA), PRICE, 7 * DAY)
FOUR_WEEKS_PAY = s.storage_cost(len(DATA), PRICE, 28 * DAY)


def test_a_receipt_whose_challenges_verify_pays_each_period_they_cover() -> None:
    honest = _receipt()
    assert honest.body.challenges_passed == 4
    assert honest.body.amount == r.evidence_bound(honest.body) == FOUR_WEEKS_PAY
    assert _refusal(honest) is None
    assert r.storage_outputs([honest]) == ((PAYOUT, FOUR_WEEKS_PAY),)


def test_a_receipt_paying_more_than_its_challenges_cover_is_refused() -> None:
    greedy = _receipt(amount=FOUR_WEEKS_PAY + 1)
    assert f"pays {FOUR_WEEKS_PAY + 1}, over" in str(_refusal(greedy))


def test_fabricated_challenges_count_for_nothing() -> None:
    honest = _receipt()
    first, *rest = honest.body.challenges
    # A made-up chunk hash and path: it does not reach the root.
    made_up = first.model_copy(
        update={
            "leaf_hash": secrets.token_hex(32),
            "proof": tuple(secrets.token_hex(32) for _ in first.proof),
        }  # noqa: E501
    )
    forged = _with_challenges(honest, (made_up, *rest), honest.body.amount)
    assert forged.body.challenges_passed == 3
    assert "3 verified challenge(s)" in str(_refusal(forged))
    # The oracle picks an easy chunk (one the provider kept) instead of the beacon's draw.
    count = s.chunk_count(len(DATA), 1024)
    easy = (first.index + 1) % count
    picked = first.model_copy(update={"index": easy})
    assert (
        r.evidence_refusal(picked, honest.body) == f"chunk {easy} is not the one its beacon draws"
    )
    assert "3 verified" in str(
        _refusal(_with_challenges(honest, (picked, *rest), honest.body.amount))
    )
    # Its honest twin: the real challenges pay.
    assert _refusal(_with_challenges(honest, (first, *rest), honest.body.amount)) is None


def test_duplicated_challenges_count_once() -> None:
    honest = _receipt()
    last = honest.body.challenges[-1]
    copies = _with_challenges(honest, (last,) * 4, FOUR_WEEKS_PAY)
    assert copies.body.challenges_passed == 1
    assert _refusal(copies) is not None
    # One counted challenge pays one period at most, whatever it claims.
    assert _refusal(_with_challenges(honest, (last,) * 4, WEEK_PAY)) is None


def test_challenges_bunched_at_one_instant_pay_one_period_not_the_term() -> None:
    end = WEEKLY[-1]
    same = _receipt(answered=[end] * 4, amount=FOUR_WEEKS_PAY)
    assert same.body.challenges_passed == 1
    assert "1 verified" in str(_refusal(same))
    # A minute apart at the end of the term: still about one period of holding.
    bunched = _receipt(answered=[end - 180, end - 120, end - 60, end], amount=FOUR_WEEKS_PAY)
    assert bunched.body.challenges_passed == 4
    assert r.evidence_bound(bunched.body) < WEEK_PAY + 10
    assert _refusal(bunched) is not None


def test_a_proof_for_another_root_proves_nothing_about_this_copy() -> None:
    honest = _receipt()
    other = evidence_for(secrets.token_bytes(len(DATA)), 7, WEEKLY)
    foreign = _with_challenges(honest, other, honest.body.amount)
    assert foreign.body.challenges_passed == 0
    assert r.evidence_refusal(other[0], honest.body) in (
        "the chunk's audit path does not lead to the committed root",
        f"chunk {other[0].index} is not the one its beacon draws",
    )
    assert _refusal(foreign) is not None


def test_challenges_outside_the_paid_period_or_answered_before_asked_count_nothing() -> None:
    honest = _receipt()
    c = honest.body.challenges[0]
    assert r.evidence_refusal(c.model_copy(update={"issued_at": c.answered_at + 1}), honest.body)
    early = c.model_copy(update={"issued_at": T0 - 1, "answered_at": T0 - 1})
    assert r.evidence_refusal(early, honest.body) == "outside the period the receipt pays"


def test_beacon_indexes_cover_the_object_and_depend_on_the_beacon_and_copy() -> None:
    root = "ef" * 32
    beacons = [secrets.token_hex(32) for _ in range(400)]
    assert {r.beacon_index(b, 7, root, 7) for b in beacons} == set(range(7))
    # Another copy (placement) or object draws other chunks from the same block.
    assert [r.beacon_index(b, 7, root, 1000) for b in beacons] != [
        r.beacon_index(b, 8, root, 1000) for b in beacons
    ]
    with pytest.raises(s.StorageError):
        r.beacon_index(beacons[0], 7, root, 0)


def test_thinning_keeps_the_credit_of_frequent_challenges() -> None:
    hourly = [T0 + 3600 * k for k in range(1, 24 * 21 + 1)]  # three weeks, every hour
    full = evidence_for(DATA, 7, hourly)
    kept = r.thin(full, T0)
    assert len(kept) <= 2 * 3 + 1
    assert r.credits(T0, [e.answered_at for e in kept]) == (7 * DAY,) * 3
    assert sum(r.credits(T0, hourly)) == 21 * DAY


def test_a_receipt_for_another_job_network_or_oracle_is_refused() -> None:
    rec = _receipt()
    assert "another job" in str(
        r.receipt_refusal(rec, job_id="00" * 32, oracle_key_hashes={ORACLE_HASH})
    )
    assert "network" in str(
        r.receipt_refusal(rec, job_id=JOB, oracle_key_hashes={ORACLE_HASH}, network="mainnet")
    )
    stranger = _receipt(SigningKey.generate())
    assert "not signed by an oracle of this batch" in str(_refusal(stranger))


def test_a_receipt_altered_after_signing_does_not_verify() -> None:
    rec = _receipt()
    redirected = rec.model_copy(
        update={"body": rec.body.model_copy(update={"payout_address": _address()})}
    )
    assert "signature does not verify" in str(_refusal(redirected))
    with pytest.raises(s.StorageError, match="signed by the oracle it names"):
        r.sign_receipt(SigningKey.generate(), rec.body)


def test_bundle_receipts_are_read_per_attestation_and_misplaced_ones_refused() -> None:
    rec = _receipt()
    obj = {"storage": [{"attestation": 1, "receipt": rec.to_json()}]}
    assert r.bundle_receipts(obj, 2) == ((), (rec,))
    assert r.bundle_receipts({}, 2) == ((), ())
    with pytest.raises(s.StorageError, match="attestation 2 of 2"):
        r.bundle_receipts({"storage": [{"attestation": 2, "receipt": rec.to_json()}]}, 2)
    with pytest.raises(s.StorageError, match="malformed storage receipt"):
        r.bundle_receipts({"storage": [{"attestation": 0, "receipt": {"body": {}}}]}, 1)


def test_a_beacon_counts_only_as_a_block_made_shortly_before_its_challenge() -> None:
    """`beacon_refusal`: the block must exist, be no later than the challenge (clock skew
    aside) and no older than `BEACON_MAX_AGE_S` then; the honest twin is a block 20 s old."""
    (evidence,) = evidence_for(b"x" * 4096, 1, [1_000_000])
    assert r.beacon_refusal(evidence, 1_000_000 - 20) is None
    assert r.beacon_refusal(evidence, 1_000_000 + r.BEACON_CLOCK_SKEW_S) is None
    assert "no block" in str(r.beacon_refusal(evidence, None))
    assert "after the challenge" in str(
        r.beacon_refusal(evidence, 1_000_000 + r.BEACON_CLOCK_SKEW_S + 1)
    )
    assert "older than" in str(r.beacon_refusal(evidence, 1_000_000 - r.BEACON_MAX_AGE_S - 1))


def test_a_receipts_terms_must_be_the_placements() -> None:
    """`terms_refusal`: each term the API recorded for the placement, changed alone."""
    signed = receipt(
        SigningKey.generate(), network="devnet", job_id="aa" * 32,
        payout_address="addr_test1qqqqqqqqqq", data=b"y" * 4096, placed_at=1_000,
        answered=[2_000],
    )  # fmt: skip
    body = signed.body
    terms = {
        "job_id": body.job_id,
        "provider_key": body.provider_key,
        "content_root": body.content_root,
        "size": body.size,
        "chunk_size": body.chunk_size,
        "ntx_per_gb_month": body.ntx_per_gb_month,
        "placed_at": body.placed_at,
    }
    assert r.terms_refusal(body, **terms) is None  # type: ignore[arg-type]
    changed = {
        "job_id": "bb" * 32,
        "provider_key": "ee" * 32,
        "content_root": "ff" * 32,
        "size": body.size + 1,
        "chunk_size": body.chunk_size * 2,
        "ntx_per_gb_month": body.ntx_per_gb_month + 1,
        "placed_at": body.placed_at + 1,
    }
    for name, value in changed.items():
        assert r.terms_refusal(body, **{**terms, name: value}) is not None, name  # type: ignore[arg-type]
