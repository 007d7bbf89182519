"""The bundle route, the quorum route's refusals, the proposer lease and one scheduler run."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from settlement_fixtures import FakeChain, add_verified, make_engine_for, oracle_engine, statuses
from sqlmodel import Session

from oracle.app import create_app
from oracle.settlement.batcher import ProposerLeaseGuard, SettlementScheduler
from oracle.settlement.models import SettlementBundle
from oracle.settlement.service import settlement_extensions
from oracle.verification.verify import VerificationContext
from proofnet.settings import build_settings


class _NoFeed:
    def job(self, job_id: str) -> None:
        return None

    def worker(self, worker_key: str) -> None:
        return None

    def artifact(self, job_id: str, name: str) -> bytes:
        raise KeyError(name)


def test_bundle_route_serves_exact_bytes(tmp_path: Path) -> None:
    db = oracle_engine(tmp_path)
    ctx = VerificationContext(
        network="devnet",
        escrow_script_hash="00" * 28,
        chain=None,
        feed=_NoFeed(),
        store=None,  # type: ignore[arg-type]
    )
    settings = build_settings()
    hooks, routers = settlement_extensions(settings, None, None)  # type: ignore[arg-type]
    app = create_app(settings, context=ctx, engine=db, lifespan_hooks=hooks, routers=routers)
    body = b'{"attestations":[],"merkle_root":"00","version":1}'
    digest = hashlib.sha256(body).hexdigest()
    with Session(db) as session:
        session.add(SettlementBundle(sha256=digest, merkle_root="00" * 32, body=body))
        session.commit()
    with TestClient(app) as client:
        response = client.get(f"/api/v1/bundles/{digest}")
        assert response.status_code == 200
        assert response.content == body
        assert hashlib.sha256(response.content).hexdigest() == digest
        assert client.get(f"/api/v1/bundles/{'ab' * 32}").status_code == 404
        assert client.get("/api/v1/bundles/not-a-hash").status_code == 400
        # Settlement is not enabled here: this oracle does not co-sign.
        sign = client.post("/api/v1/quorum/sign", json={"tx_cbor": "00", "bundle": "{}"})
        assert sign.status_code == 503
    db.dispose()


def test_one_proposer_at_a_time_and_takeover_after_expiry(tmp_path: Path) -> None:
    db = oracle_engine(tmp_path)
    a = ProposerLeaseGuard(db, "a", ttl_s=60)
    b = ProposerLeaseGuard(db, "b", ttl_s=60)
    assert a.acquire()
    assert not b.acquire()
    assert a.acquire()  # renewal
    a.release()
    assert b.acquire()
    assert not a.acquire()
    short = ProposerLeaseGuard(db, "c", ttl_s=0.01)
    b.release()
    assert short.acquire()
    import time

    time.sleep(0.05)
    assert a.acquire()  # c stopped renewing: its lease expired
    with pytest.raises(ValueError):
        ProposerLeaseGuard(db, "d", ttl_s=0)


def test_scheduler_run_only_settles_under_the_lease(tmp_path: Path) -> None:
    db = oracle_engine(tmp_path)
    chain = FakeChain()
    att = add_verified(db, chain.add_escrow())
    engine = make_engine_for(db, chain, batch_size=1, depth=1)
    other = ProposerLeaseGuard(db, "other", ttl_s=60)
    assert other.acquire()
    scheduler = SettlementScheduler(engine, ProposerLeaseGuard(db, "me", ttl_s=60), 0.1)
    assert scheduler.run_once() is None  # another process holds the lease
    assert chain.submissions == []
    other.release()
    assert scheduler.run_once() is not None
    chain.produce_block()
    scheduler.run_once()
    assert statuses(db)[att] == "settled"
    # Started for real: the interval job runs on its own and stops cleanly.
    scheduler.start()
    scheduler.stop()
    assert not scheduler.lease.held


class _SignsEverything:
    """A co-signer whose review passes (the review itself is tested in test_quorum_devnet)."""

    def review(self, tx_cbor: bytes, bundle_body: bytes) -> bytes:
        return b"\x01" * 8


def test_a_cosigner_serves_the_bundles_it_signed_for(tmp_path: Path) -> None:
    """The proposer may vanish after settling: every co-signer serves the bundle too."""
    import cbor2

    from oracle.settlement.bundle import make_bundle
    from oracle.settlement.ports import Claim, OutRef
    from proofnet.messages import merkle

    payload = b'{"a": 1}'
    cose = cbor2.dumps([b"p", {}, payload, bytes(64)])
    claim = Claim(1, OutRef("ab" * 32, 0), merkle.leaf_hash(payload), cose, 100, "provider")
    bundle = make_bundle([claim])
    db = oracle_engine(tmp_path)
    ctx = VerificationContext(
        network="devnet",
        escrow_script_hash="00" * 28,
        chain=None,
        feed=_NoFeed(),
        store=None,  # type: ignore[arg-type]
    )
    settings = build_settings()
    hooks, routers = settlement_extensions(settings, None, None)  # type: ignore[arg-type]
    app = create_app(settings, context=ctx, engine=db, lifespan_hooks=hooks, routers=routers)
    with TestClient(app) as client:
        assert client.get(f"/api/v1/bundles/{bundle.sha256}").status_code == 404
        app.state.settlement_cosigner = _SignsEverything()
        for _ in range(2):  # signing the same batch twice stores it once
            body = {"tx_cbor": "00", "bundle": bundle.body.decode()}
            assert client.post("/api/v1/quorum/sign", json=body).status_code == 200
        served = client.get(f"/api/v1/bundles/{bundle.sha256}")
        assert served.status_code == 200 and served.content == bundle.body
    db.dispose()
