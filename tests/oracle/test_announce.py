"""The oracle tells the API each verdict it applies (oracle.intake.announce), so the API can
release a lease's results to the submitter only with it (api.services.result_release)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from oracle_fixtures import PRICE, World, make_world

from oracle.app import create_app
from oracle.inputs.feed import FeedError
from oracle.intake.announce import Announcer, Verdict
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from proofnet.settings import Settings

COSE = {"content-type": "application/cose"}


class Sink:
    """The API's verdict route as the intake sees it: records posts, fails on demand."""

    def __init__(self) -> None:
        self.posted: list[Verdict] = []
        self.down = False

    def __call__(self, verdict: Verdict) -> None:
        if self.down:
            raise FeedError("API feed unreachable (verdict): connection refused")
        self.posted.append(verdict)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AttestationStore]:
    engine = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
    s = AttestationStore(engine)
    s.create_schema()
    yield s
    engine.dispose()


def _client(world: World, store: AttestationStore, sink: Sink) -> TestClient:
    world.store = store
    world.feed.post_verdict = sink  # type: ignore[attr-defined]
    app = create_app(
        Settings(), context=world.context(store=store), engine=store.engine, inline=True
    )
    return TestClient(app)


def test_a_verified_attestation_is_announced_with_its_lease(store: AttestationStore) -> None:
    world, sink = make_world(), Sink()
    with _client(world, store, sink) as client:
        body = client.post("/api/v1/attestations", content=world.sign(), headers=COSE).json()
        assert body["status"] == "verified"
    assert sink.posted == [Verdict(world.job_id, world.nonce, "verified", None, "", "")]


def test_a_rejection_is_announced_with_whose_fault_it_is(store: AttestationStore) -> None:
    world, sink = make_world(), Sink()
    with _client(world, store, sink) as client:
        inflated = world.sign(world.variant(amount=PRICE + 1))
        assert client.post("/api/v1/attestations", content=inflated, headers=COSE).json()[
            "status"
        ] == ("rejected")
    (verdict,) = sink.posted
    assert (verdict.nonce, verdict.status, verdict.fault, verdict.reason) == (
        world.nonce,
        "rejected",
        "provider",
        "amount_exceeds_price",
    )


def test_a_verdict_the_api_did_not_take_is_posted_again() -> None:
    sink = Sink()
    announcer = Announcer(type("S", (), {"post_verdict": staticmethod(sink)})())
    verdict = Verdict("job", "a" * 64, "verified", None, "", "")
    sink.down = True
    assert not announcer.announce(verdict) and announcer.unposted == 1
    assert announcer.retry() == 0 and sink.posted == []
    sink.down = False
    assert announcer.retry() == 1 and sink.posted == [verdict] and announcer.unposted == 0
    # A postponed verification is no verdict: nothing to announce.
    assert not announcer.announce(Verdict("job", "b" * 64, "received", None, "", ""))
    assert sink.posted == [verdict]
