"""The clearing rule of sealed-bid reverse auctions, as the API, the worker and the oracle all
run it, and the bids a hostile party might hand it."""

from __future__ import annotations

import secrets

import pytest
from nacl.signing import SigningKey

from proofnet.messages.auction import (
    AuctionError,
    RevealedBid,
    clear,
    new_bid,
    parse_revealed,
    sign_bid,
    tie_seed,
)

JOB = "ab" * 32


def bid(amount: int, key: SigningKey | None = None, job: str = JOB) -> RevealedBid:
    key = key or SigningKey.generate()
    sealed = new_bid(job, bytes(key.verify_key).hex(), amount, secrets.token_bytes(32))
    return sign_bid(sealed, key)


def run(bids: list[RevealedBid], reserve: int = 1_000, extra: tuple[str, ...] = ()) -> object:
    return clear(
        job_id=JOB,
        reserve=reserve,
        bids=bids,
        commitments=[b.bid.commitment for b in bids] + list(extra),
    )


def test_the_lowest_bid_wins_and_is_paid_the_second_lowest() -> None:
    low, mid, high = bid(300), bid(500), bid(900)
    outcome = clear(
        job_id=JOB,
        reserve=1_000,
        bids=[high, low, mid],
        commitments=[b.bid.commitment for b in (low, mid, high)],
    )
    assert outcome.winner == low.bid.worker_key
    assert outcome.price == 500
    assert outcome.ranking == (low.bid.worker_key, mid.bid.worker_key, high.bid.worker_key)


def test_a_lone_bid_is_paid_the_reserve_and_bids_above_it_are_out() -> None:
    alone, too_dear = bid(400), bid(1_001)
    outcome = clear(
        job_id=JOB,
        reserve=1_000,
        bids=[alone, too_dear],
        commitments=[alone.bid.commitment, too_dear.bid.commitment],
    )
    assert (outcome.winner, outcome.price) == (alone.bid.worker_key, 1_000)
    nobody = clear(
        job_id=JOB, reserve=1_000, bids=[too_dear], commitments=[too_dear.bid.commitment]
    )
    assert nobody.winner is None and nobody.price is None and "reserve" in nobody.reason


def test_ties_are_broken_by_a_seed_nobody_knew_while_bidding() -> None:
    """Equal bids: the order follows SHA-256(tie seed || key), the seed hashing every
    commitment; the price is the tied amount. Recomputing gives the same winner."""
    a, b = bid(500), bid(500)
    commitments = [a.bid.commitment, b.bid.commitment]
    first = clear(job_id=JOB, reserve=1_000, bids=[a, b], commitments=commitments)
    again = clear(job_id=JOB, reserve=1_000, bids=[b, a], commitments=commitments[::-1])
    assert first == again and first.price == 500
    # Another commitment in the window (even unrevealed) changes the seed.
    assert tie_seed(commitments) != tie_seed([*commitments, "00" * 32])


def test_forged_and_replayed_bids_are_refused() -> None:
    """What a hostile API or provider could hand the rule."""
    honest = bid(500)
    # The amount changed after signing: the signature no longer covers it.
    tampered = RevealedBid(
        bid=honest.bid.model_copy(update={"amount": 100}), signature=honest.signature
    )
    with pytest.raises(AuctionError, match="not signed"):
        clear(job_id=JOB, reserve=1_000, bids=[tampered], commitments=[tampered.bid.commitment])
    # A bid no commitment of the window covers (made up after bidding closed).
    late = bid(100)
    with pytest.raises(AuctionError, match="no commitment"):
        clear(job_id=JOB, reserve=1_000, bids=[late], commitments=[honest.bid.commitment])
    # Another job's bid replayed here.
    foreign = bid(100, job="cd" * 32)
    with pytest.raises(AuctionError, match="for job"):
        clear(job_id=JOB, reserve=1_000, bids=[foreign], commitments=[foreign.bid.commitment])
    # One key bidding twice (two commitments) to set its own second price.
    key = SigningKey.generate()
    one, two = bid(300, key), bid(900, key)
    with pytest.raises(AuctionError, match="bid twice"):
        run([one, two])
    # Signed by someone else than the key the bid names.
    with pytest.raises(AuctionError, match="signed by the key it names"):
        sign_bid(honest.bid, SigningKey.generate())
    with pytest.raises(AuctionError):
        parse_revealed({"bid": honest.bid.model_dump(), "signature": "00" * 64})
    with pytest.raises(AuctionError):
        parse_revealed({"bid": {"amount": -1}, "signature": "zz"})


def test_bids_take_only_positive_amounts_within_a_cardano_quantity() -> None:
    key = bytes(SigningKey.generate().verify_key).hex()
    for amount in (0, -5, 2**63):
        with pytest.raises(AuctionError):
            new_bid(JOB, key, amount, secrets.token_bytes(32))
    with pytest.raises(AuctionError, match="32 random bytes"):
        new_bid(JOB, key, 5, b"short")
