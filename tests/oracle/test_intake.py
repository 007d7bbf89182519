"""Intake over HTTP and the store on SQLite and PostgreSQL: accept, verify, refuse, replay."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import cbor2
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from oracle_fixtures import PRICE, World, make_world
from postgres_db import fresh_database
from sqlalchemy.exc import IntegrityError

from oracle.app import create_app
from oracle.inputs.chain import ChainUnavailable, EscrowLookup
from oracle.metrics import OracleMetrics
from oracle.models import AttestationRecord
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from proofnet.messages.attestation import EscrowRef
from proofnet.settings import Settings

COSE = {"content-type": "application/cose"}


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh database, dropped afterwards; fails (never skips) without PostgreSQL."""
    with fresh_database("proofnet_oracle") as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'oracle.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(database_url: str) -> Iterator[AttestationStore]:
    engine = make_engine(database_url)
    s = AttestationStore(engine)
    s.create_schema()
    yield s
    engine.dispose()


def oracle_client(
    world: World, store: AttestationStore, *, inline: bool = True, **kwargs: object
) -> tuple[FastAPI, TestClient]:
    world.store = store
    app = create_app(
        Settings(),
        context=world.context(store=store),
        engine=store.engine,
        inline=inline,
        sweep_interval_s=0.05,
        **kwargs,  # type: ignore[arg-type]
    )
    return app, TestClient(app)


def metric(client: TestClient, name: str) -> float:
    """The value of an unlabelled sample `name` on /metrics (0 when absent)."""
    for line in client.get("/metrics").text.splitlines():
        sample, _, value = line.partition(" ")
        if sample == name:
            return float(value)
    return 0.0


def test_honest_attestation_accepted_verified_and_visible(store: AttestationStore) -> None:
    world = make_world()
    app, client = oracle_client(world, store)
    with client:
        response = client.post("/api/v1/attestations", content=world.sign(), headers=COSE)
        assert response.status_code == 202, response.text
        body = response.json()
        assert body["status"] == "verified" and body["duplicate"] is False
        view = client.get(f"/api/v1/attestations/{body['id']}").json()
        assert view["status"] == "verified" and view["reason"] is None
        assert view["amount"] == PRICE and view["job_id"] == world.job_id
        assert view["escrow"] == {"tx_id": world.escrow.tx_id, "index": world.escrow.index}
        listed = client.get(f"/api/v1/jobs/{world.job_id}/attestations").json()["data"]
        assert [a["id"] for a in listed] == [body["id"]]
        assert metric(client, "proofnet_oracle_attestations_received_total") == 1
        assert metric(client, "proofnet_oracle_attestations_verified_total") == 1
        assert metric(client, "proofnet_oracle_attestations_pending") == 0
        records = store.verifications(body["id"])
        assert [r.outcome for r in records] == ["verified"]
        assert "escrow_on_chain" in records[0].checks
        assert client.get("/api/v1/attestations/999999").status_code == 404


def test_same_attestation_twice_is_stored_once(store: AttestationStore) -> None:
    world = make_world()
    _app, client = oracle_client(world, store)
    with client:
        cose = world.sign()
        first = client.post("/api/v1/attestations", content=cose, headers=COSE).json()
        again = client.post("/api/v1/attestations", content=cose, headers=COSE)
        assert again.status_code == 200
        assert again.json() == {"id": first["id"], "status": "verified", "duplicate": True}
        # Re-wrapped in a COSE_Sign1 tag: other bytes, same attestation, still one row.
        tagged = cbor2.dumps(cbor2.CBORTag(18, cbor2.loads(cose)))
        assert tagged != cose
        rewrapped = client.post("/api/v1/attestations", content=tagged, headers=COSE)
        assert rewrapped.status_code == 200 and rewrapped.json()["id"] == first["id"]
        assert len(store.for_job(world.job_id)) == 1
        assert metric(client, "proofnet_oracle_attestations_received_total") == 1


def test_forged_and_malformed_are_refused_and_not_stored(store: AttestationStore) -> None:
    world = make_world()
    _app, client = oracle_client(world, store)
    with client:
        cose = cbor2.loads(world.sign())
        cose[3] = bytes(64)
        forged = client.post("/api/v1/attestations", content=cbor2.dumps(cose), headers=COSE)
        assert forged.status_code == 400
        assert forged.json()["reason"] == "bad_signature"
        garbage = client.post("/api/v1/attestations", content=b"\x00junk", headers=COSE)
        assert garbage.status_code == 422 and garbage.json()["reason"] == "malformed"
        wrong_type = client.post(
            "/api/v1/attestations", content=world.sign(), headers={"content-type": "text/plain"}
        )
        assert wrong_type.status_code == 415
        too_big = client.post("/api/v1/attestations", content=b"\x00" * 600_000, headers=COSE)
        assert too_big.status_code == 413
        assert store.for_job(world.job_id) == []
        text_metrics = client.get("/metrics").text
        assert (
            'proofnet_oracle_attestations_refused_total{reason="bad_signature"} 1.0' in text_metrics
        )
        assert 'proofnet_oracle_attestations_refused_total{reason="malformed"} 1.0' in text_metrics


def test_rejection_is_stored_with_reason_and_counted(store: AttestationStore) -> None:
    world = make_world()
    _app, client = oracle_client(world, store)
    with client:
        inflated = world.sign(world.variant(amount=PRICE + 1))
        body = client.post("/api/v1/attestations", content=inflated, headers=COSE).json()
        assert body["status"] == "rejected"
        view = client.get(f"/api/v1/attestations/{body['id']}").json()
        assert view["reason"] == "amount_exceeds_price" and "exceeds" in view["message"]
        text_metrics = client.get("/metrics").text
        assert (
            'proofnet_oracle_attestations_rejected_total{reason="amount_exceeds_price"} 1.0'
            in text_metrics
        )
        # A rejected attestation does not block the honest one for the same escrow.
        honest = client.post("/api/v1/attestations", content=world.sign(), headers=COSE).json()
        assert honest["status"] == "verified"


def test_second_attestation_for_one_escrow_is_refused(store: AttestationStore) -> None:
    world = make_world()
    _app, client = oracle_client(world, store)
    with client:
        first = client.post("/api/v1/attestations", content=world.sign(), headers=COSE).json()
        second_cose = world.sign(world.variant(metrics={"loss": "0.5"}))
        second = client.post("/api/v1/attestations", content=second_cose, headers=COSE).json()
        assert first["status"] == "verified"
        assert second["status"] == "rejected"
        assert store.get(second["id"]).reason == "escrow_already_claimed"  # type: ignore[union-attr]


def test_database_refuses_two_payable_attestations_per_escrow(store: AttestationStore) -> None:
    """Even when two verifiers race past the pipeline's store check, the UNIQUE constraint
    lets only one attestation per escrow become payable."""
    from oracle.verification.verify import verify

    world = make_world()  # context reads an empty in-memory store: both pass the pipeline
    a, _ = store.receive(world.attestation, world.sign())
    other = world.variant(metrics={"loss": "0.75"})
    b, _ = store.receive(other, world.sign(other))
    assert a.id is not None and b.id is not None
    ra = verify(world.sign(), world.context())
    rb = verify(world.sign(other), world.context())
    assert ra.ok and rb.ok
    applied = store.apply_many([(a.id, ra, None, 1.0), (b.id, rb, None, 1.0)])
    assert [x.status for x in applied] == ["verified", "rejected"]
    assert applied[1].reason == "escrow_already_claimed"
    with store.session() as s, pytest.raises(IntegrityError):
        row = s.get(AttestationRecord, b.id)
        assert row is not None
        row.payable_escrow = a.escrow_ref
        s.add(row)
        s.commit()


def test_unreachable_chain_is_retried_until_it_answers(store: AttestationStore) -> None:
    world = make_world()

    class FlakyChain:
        down = True

        def escrow_output(self, ref: EscrowRef) -> EscrowLookup:
            if self.down:
                raise ChainUnavailable("backend down")
            return world.chain.escrow_output(ref)

    flaky = FlakyChain()
    metrics = OracleMetrics()
    world.store = store
    app = create_app(
        Settings(),
        context=world.context(store=store, chain=flaky),
        engine=store.engine,
        inline=True,
        metrics=metrics,
        sweep_interval_s=3600,
    )
    with TestClient(app) as client:
        body = client.post("/api/v1/attestations", content=world.sign(), headers=COSE).json()
        assert body["status"] == "received"
        row = store.get(body["id"])
        assert row is not None and row.retry_at is not None and row.attempts == 1
        assert metric(client, "proofnet_oracle_verification_retries_total") == 1
        assert metric(client, "proofnet_oracle_attestations_pending") == 1
        # Not due yet: a sweep now leaves it alone.
        assert store.due(now=datetime.now(UTC)) == []
        flaky.down = False
        due = store.due(now=datetime.now(UTC) + timedelta(seconds=10))
        assert [r.id for r in due] == [body["id"]]
        app.state.intake.verify_one(body["id"])
        assert store.get(body["id"]).status == "verified"  # type: ignore[union-attr]


def test_background_pool_and_lifespan_hooks(store: AttestationStore) -> None:
    world = make_world()
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def hook(app: FastAPI) -> AsyncIterator[None]:
        events.append("start")
        assert app.state.store.engine is store.engine
        yield
        events.append("stop")

    _app, client = oracle_client(world, store, inline=False, lifespan_hooks=[hook])
    with client:
        assert events == ["start"]
        body = client.post("/api/v1/attestations", content=world.sign(), headers=COSE).json()
        assert body["status"] == "received"
        deadline = time.monotonic() + 60  # a hang bound
        while store.get(body["id"]).status != "verified":  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "background verification did not finish"
            time.sleep(0.02)
    assert events == ["start", "stop"]


def test_settlement_transitions_only_between_payable_states(store: AttestationStore) -> None:
    world = make_world()
    _app, client = oracle_client(world, store)
    with client:
        body = client.post("/api/v1/attestations", content=world.sign(), headers=COSE).json()
    ident = body["id"]
    assert store.transition([ident], from_status="verified", to_status="batched") == 1
    assert store.transition([ident], from_status="verified", to_status="batched") == 0
    assert store.transition([ident], from_status="batched", to_status="settled") == 1
    assert store.get(ident).status == "settled"  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        store.transition([ident], from_status="settled", to_status="rejected")
    # Settled: the same job's attestation cannot be verified again on the same escrow.
    again = world.sign(world.variant(metrics={"loss": "0.1"}))
    _app, client = oracle_client(world, store)
    with client:
        later = client.post("/api/v1/attestations", content=again, headers=COSE).json()
    assert later["status"] == "rejected"
    assert store.get(later["id"]).reason == "already_settled"  # type: ignore[union-attr]


def test_the_retry_backoff_stops_at_the_configured_cap(store: AttestationStore) -> None:
    """A postponed verification waits 2, 4, 8 ... seconds, never more than
    PROOFNET_ORACLE_MAX_RETRY_DELAY_S (a local loop's verifiers answer in seconds)."""
    world = make_world()

    class DownChain:
        def escrow_output(self, ref: EscrowRef) -> EscrowLookup:
            raise ChainUnavailable("backend down")

    world.store = store
    app = create_app(
        Settings(oracle_max_retry_delay_s=3),
        context=world.context(store=store, chain=DownChain()),
        engine=store.engine,
        inline=True,
        sweep_interval_s=3600,
    )
    with TestClient(app) as client:
        body = client.post("/api/v1/attestations", content=world.sign(), headers=COSE).json()
        for _ in range(4):
            app.state.intake.verify_one(body["id"])
        row = store.get(body["id"])
        assert row is not None and row.attempts == 5 and row.retry_at is not None
        waited = (row.retry_at - row.updated_at).total_seconds()
        assert 0 < waited <= 3, waited
