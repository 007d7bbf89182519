"""Sealed-bid auctions through the API (SQLite and PostgreSQL): windows, fitting bidders,
reveals bound to commitments, clearing, the winner's exclusive claim, and the oracle's
recomputation from the feed."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import pytest
from api_support import FakeClock, Wallet, Worker, job_spec
from fastapi.testclient import TestClient
from sqlmodel import Session

from api.config import ApiConfig
from api.services.oracle_feed import job_feed
from oracle.inputs.feed import FeedDataError, parse_job
from proofnet.messages.auction import Bid, clear, new_bid, sign_bid

A100 = ("NVIDIA A100 80GB", 81920)
SMALL = ("NVIDIA T4", 16384)
WINDOW_S = 60
REVEAL_S = 120


@pytest.fixture
def config(database_url: str) -> ApiConfig:
    return ApiConfig(
        database_url=database_url,
        network="devnet",
        rate_limit_per_minute=100_000,
        auction_reveal_s=REVEAL_S,
    )


def auction_spec(reserve: int = 1_000) -> dict[str, Any]:
    spec = job_spec(gpu_memory_mb=40000)
    spec["pricing"] = {"kind": "auction", "reserve": reserve, "bid_window_s": WINDOW_S}
    return spec


def post(client: TestClient, auth: dict[str, str], spec: dict[str, Any]) -> str:
    posted = client.post("/api/v1/jobs", json={"spec": spec}, headers=auth)
    assert posted.status_code == 201, posted.text
    return str(posted.json()["job_id"])


def sealed(worker: Worker, job_id: str, amount: int) -> Bid:
    made = new_bid(job_id, worker.public_key, amount, secrets.token_bytes(32))
    answer = worker.request(
        "POST", f"/api/v1/worker/auctions/{job_id}/commit", {"commitment": made.commitment}
    )
    assert answer.status_code == 200, answer.text
    return made


def reveal(worker: Worker, job_id: str, bid: Bid) -> Any:
    signed = sign_bid(bid, worker.key)
    return worker.request(
        "POST", f"/api/v1/worker/auctions/{job_id}/reveal", signed.model_dump(mode="json")
    )


def test_the_lowest_fitting_bid_wins_pays_the_second_and_only_the_winner_claims(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    session: Session,
) -> None:
    _, auth = approved
    cheap, dear, silent, small = (worker_factory() for _ in range(4))
    for w in (cheap, dear, silent):
        w.register([A100])
    small.register([SMALL])
    job_id = post(client, auth, auction_spec(reserve=1_000))

    # Hardware that does not fit the job may not bid.
    refused = small.request(
        "POST", f"/api/v1/worker/auctions/{job_id}/commit", {"commitment": "a" * 64}
    )
    assert refused.status_code == 409 and "do not fit" in refused.json()["detail"]

    cheap_bid, dear_bid = sealed(cheap, job_id, 400), sealed(dear, job_id, 700)
    sealed(silent, job_id, 100)  # never revealed: out
    # While bidding is open the public view shows counts, not the commitments, and nobody
    # can claim the job.
    view = client.get(f"/api/v1/jobs/{job_id}/auction").json()
    assert (view["phase"], view["commitments"], view["bids"]) == ("bidding", 3, None)
    assert cheap.claim().status_code == 204
    early = reveal(cheap, job_id, cheap_bid)
    assert early.status_code == 409 and "revealed after" in early.json()["detail"]

    clock.advance(WINDOW_S)
    late = cheap.request(
        "POST", f"/api/v1/worker/auctions/{job_id}/commit", {"commitment": "b" * 64}
    )
    assert late.status_code == 409 and "closed" in late.json()["detail"]
    assert reveal(cheap, job_id, cheap_bid).status_code == 200
    assert reveal(dear, job_id, dear_bid).status_code == 200
    assert cheap.claim().status_code == 204  # not cleared before the reveals close

    clock.advance(REVEAL_S)
    view = client.get(f"/api/v1/jobs/{job_id}/auction").json()
    assert view["phase"] == "cleared"
    assert (view["winner"], view["price"]) == (cheap.public_key, 700)
    assert len(view["commitment_list"]) == 3 and len(view["bids"]) == 2

    # The losers cannot take the job; the winner does.
    assert dear.claim().status_code == 204
    assert silent.claim().status_code == 204
    claimed = cheap.claim()
    assert claimed.status_code == 200 and claimed.json()["job_id"] == job_id

    # The oracle recomputes the outcome from the signed bids the feed carries.
    record = parse_job(job_feed(session, job_id), expected_job_id=job_id).auction
    assert record is not None
    outcome = clear(job_id=job_id, reserve=1_000, bids=record.bids, commitments=record.commitments)
    assert (outcome.winner, outcome.price) == (cheap.public_key, 700)


def test_a_reveal_must_be_the_committed_bid_of_the_signing_provider(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
) -> None:
    _, auth = approved
    honest, cheat = worker_factory(), worker_factory()
    honest.register([A100])
    cheat.register([A100])
    job_id = post(client, auth, auction_spec())
    committed = sealed(cheat, job_id, 900)
    honest_bid = sealed(honest, job_id, 500)
    clock.advance(WINDOW_S)

    # A lower amount than committed (the point of sealing) is refused.
    lowered = committed.model_copy(update={"amount": 100})
    answer = reveal(cheat, job_id, lowered)
    assert answer.status_code == 400 and "commitment" in answer.json()["detail"]
    # Revealing someone else's bid under one's own request (signed by its owner, stolen).
    stolen = sign_bid(honest_bid, honest.key).model_dump(mode="json")
    answer = cheat.request("POST", f"/api/v1/worker/auctions/{job_id}/reveal", stolen)
    assert answer.status_code == 400 and "another worker key" in answer.json()["detail"]
    # A bid whose signature does not cover it.
    forged = sign_bid(committed, cheat.key).model_dump(mode="json")
    forged["bid"]["amount"] = 100
    answer = cheat.request("POST", f"/api/v1/worker/auctions/{job_id}/reveal", forged)
    assert answer.status_code == 400 and "not signed" in answer.json()["detail"]
    assert reveal(cheat, job_id, committed).status_code == 200

    clock.advance(REVEAL_S)
    # A reveal after the reveal window is refused.
    assert reveal(honest, job_id, honest_bid).status_code == 409
    view = client.get(f"/api/v1/jobs/{job_id}/auction").json()
    # Only the cheat revealed (at 900): it wins alone and is paid the reserve.
    assert (view["winner"], view["price"]) == (cheat.public_key, 1_000)


def test_an_auction_without_a_bid_under_the_reserve_fails_the_job_with_the_reason(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
) -> None:
    _, auth = approved
    dear = worker_factory()
    dear.register([A100])
    job_id = post(client, auth, auction_spec(reserve=500))
    too_dear = sealed(dear, job_id, 800)
    clock.advance(WINDOW_S)
    assert reveal(dear, job_id, too_dear).status_code == 200
    clock.advance(REVEAL_S)
    assert dear.claim().status_code == 204
    job = client.get(f"/api/v1/jobs/{job_id}", headers=auth).json()
    assert job["status"] == "failed"
    assert "reserve" in job["last_error"]


def test_the_oracle_refuses_a_feed_whose_bids_the_api_altered(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    session: Session,
) -> None:
    """A hostile API host cannot lower a bid or add one of its own making: every bid in the
    feed must carry its bidder's signature and hash to a commitment."""
    _, auth = approved
    a, b = worker_factory(), worker_factory()
    a.register([A100])
    b.register([A100])
    job_id = post(client, auth, auction_spec())
    bid_a, bid_b = sealed(a, job_id, 300), sealed(b, job_id, 600)
    clock.advance(WINDOW_S)
    assert reveal(a, job_id, bid_a).status_code == 200
    assert reveal(b, job_id, bid_b).status_code == 200
    clock.advance(REVEAL_S)
    client.get(f"/api/v1/jobs/{job_id}/auction")

    feed = job_feed(session, job_id)
    feed["auction"]["bids"][1]["bid"]["amount"] = 301  # lower the second price
    with pytest.raises(FeedDataError, match="not signed"):
        parse_job(feed, expected_job_id=job_id)
    # An invented bidder with a valid signature but no commitment in the window.
    feed = job_feed(session, job_id)
    outsider = Worker(client)
    invented = sign_bid(
        new_bid(job_id, outsider.public_key, 299, secrets.token_bytes(32)), outsider.key
    )
    feed["auction"]["bids"].append(invented.model_dump(mode="json"))
    record = parse_job(feed, expected_job_id=job_id).auction
    assert record is not None
    with pytest.raises(ValueError, match="no commitment"):
        clear(job_id=job_id, reserve=1_000, bids=record.bids, commitments=record.commitments)
    # Dropped entirely.
    feed = job_feed(session, job_id)
    feed["auction"] = None
    with pytest.raises(FeedDataError, match="no auction"):
        parse_job(feed, expected_job_id=job_id)


def test_an_auction_spec_is_estimated_up_to_its_reserve(
    client: TestClient, approved: tuple[Wallet, dict[str, str]]
) -> None:
    _, auth = approved
    est = client.post("/api/v1/estimates", json={"spec": auction_spec(777)}, headers=auth)
    assert est.status_code == 200, est.text
    cost = est.json()["cost"]
    assert cost["rule"] == "auction" and cost["high"] == cost["cap"] == 777
    bad = auction_spec()
    bad["pricing"]["bid_window_s"] = 5
    assert client.post("/api/v1/jobs", json={"spec": bad}, headers=auth).status_code == 422


def test_a_resumed_auction_job_goes_to_another_bidder_only_after_the_winner_lost_it(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    session: Session,
) -> None:
    _, auth = approved
    cheap, dear, silent, stranger = (worker_factory() for _ in range(4))
    for w in (cheap, dear, silent, stranger):
        w.register([A100])
    job_id = post(client, auth, auction_spec(reserve=1_000))
    cheap_bid, dear_bid = sealed(cheap, job_id, 400), sealed(dear, job_id, 700)
    sealed(silent, job_id, 100)  # never revealed
    clock.advance(WINDOW_S)
    assert reveal(cheap, job_id, cheap_bid).status_code == 200
    assert reveal(dear, job_id, dear_bid).status_code == 200
    clock.advance(REVEAL_S)
    claimed = cheap.claim()
    assert claimed.status_code == 200
    # While the winner runs it, the job is nobody else's (nor would the oracle pay another).
    assert _fallback_refusal(session, job_id, dear) == "the winner lost no attempt before this one"
    token = claimed.json()["lease_token"]
    released = cheap.request("POST", f"/api/v1/worker/leases/{token}/release", {"reason": "gone"})
    assert released.status_code == 200, released.text
    # The winner lost it: a provider that never bid, or never revealed, still may not ...
    assert stranger.claim().status_code == 204
    assert silent.claim().status_code == 204
    # ... a revealed bidder may, at the same clearing price (the oracle re-checks it).
    resumed = dear.claim()
    assert resumed.status_code == 200 and resumed.json()["job_id"] == job_id
    view = client.get(f"/api/v1/jobs/{job_id}/auction").json()
    assert (view["winner"], view["price"]) == (cheap.public_key, 700)
    # The oracle pays the bidder that stood in, and nobody outside the ranking.
    assert _fallback_refusal(session, job_id, dear) is None
    assert _fallback_refusal(session, job_id, stranger) == "it made no bid at or under the reserve"


def _fallback_refusal(session: Session, job_id: str, worker: Worker) -> str | None:
    import dataclasses
    from types import SimpleNamespace

    from oracle.verification.resume_checks import auction_fallback_refusal

    session.expire_all()
    job = parse_job(job_feed(session, job_id), expected_job_id=job_id)
    session.rollback()  # end the read: SQLite's write lock is the API's next
    assert job.auction is not None
    outcome = clear(
        job_id=job_id, reserve=1_000, bids=job.auction.bids, commitments=job.auction.commitments
    )
    assert outcome.winner is not None
    # As the oracle reads it once the attempt running now completed (its lease completes).
    latest = max(a.attempt for a in job.attempts)
    job = dataclasses.replace(job, lease=SimpleNamespace(attempt=latest))
    att = SimpleNamespace(worker_key=worker.public_key, unit=None)
    return auction_fallback_refusal(att, job, outcome.winner, outcome.ranking)  # type: ignore[arg-type]


def test_a_bidder_above_the_reserve_cannot_stand_in_for_a_winner_that_lost_the_job(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    session: Session,
) -> None:
    """The attack: a provider reveals a bid over the reserve (it cannot win), waits for the
    winner to lose the job and claims it; the oracle would never pay it, so the API must not
    hand it the job. Its honest twin, a bidder at or under the reserve, may."""
    _, auth = approved
    cheap, dear, fair = (worker_factory() for _ in range(3))
    for w in (cheap, dear, fair):
        w.register([A100])
    job_id = post(client, auth, auction_spec(reserve=1_000))
    bids = {
        w.public_key: sealed(w, job_id, n) for w, n in ((cheap, 400), (dear, 1_500), (fair, 900))
    }
    clock.advance(WINDOW_S)
    for w in (cheap, dear, fair):
        assert reveal(w, job_id, bids[w.public_key]).status_code == 200
    clock.advance(REVEAL_S)
    claimed = cheap.claim()
    assert claimed.status_code == 200
    token = claimed.json()["lease_token"]
    released = cheap.request("POST", f"/api/v1/worker/leases/{token}/release", {"reason": "gone"})
    assert released.status_code == 200, released.text
    assert dear.claim().status_code == 204
    resumed = fair.claim()
    assert resumed.status_code == 200 and resumed.json()["job_id"] == job_id
