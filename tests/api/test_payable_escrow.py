"""The API accepts only escrows that can pay: every condition the batch script and the oracle
will check, read on chain before a job can be claimed and again when a lease starts; and
once a worker started, the recorded escrow cannot be swapped.

Each attack records (or keeps) an escrow the oracle would refuse to pay from; its honest
twin is the same escrow with the one fact put right.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from api_support import FakeClock, Wallet, Worker, job_spec, sign_in
from escrow_chain import FakeChainContext, deployment, escrow_datum, escrow_output
from fastapi.testclient import TestClient
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.models import Job, JobEscrow, Lease
from api.models.job import NOT_STARTED
from api.services.users import add_senior

PRICE = 1_000_000
RUN_S = 3600
WINDOW_S = 24 * 3600
DEPLOYED = deployment()


@pytest.fixture
def config(make_config: Callable[..., ApiConfig]) -> ApiConfig:
    return make_config(claim_requires_escrow=True, settlement_window_s=WINDOW_S)


@pytest.fixture
def chain(client: TestClient) -> FakeChainContext:
    context = FakeChainContext()
    client.app.state.chain_context = context  # type: ignore[attr-defined]
    client.app.state.deployment = DEPLOYED  # type: ignore[attr-defined]
    return context


@pytest.fixture
def submitter(client: TestClient, session: Session, config: ApiConfig, clock: FakeClock) -> Any:
    wallet = Wallet()
    add_senior(session, config, wallet.address, clock())
    return wallet, sign_in(client, wallet)


def _pkh(wallet: Wallet) -> str:
    return wallet.signing_key.to_verification_key().hash().payload.hex()


def _now_ms(clock: FakeClock) -> int:
    return int(clock().timestamp() * 1000)


def _honest_deadline(clock: FakeClock) -> int:
    # What the API's own escrow builder would choose: three attempts, then the window.
    return _now_ms(clock) + (3 * RUN_S + WINDOW_S) * 1000


def _post_job(client: TestClient, auth: dict[str, str]) -> str:
    created = client.post("/api/v1/jobs", json={"spec": job_spec(gpus=0)}, headers=auth)
    assert created.status_code == 201, created.text
    return str(created.json()["job_id"])


def _record(client: TestClient, auth: dict[str, str], job_id: str, ref: tuple[str, int]) -> Any:
    return client.post(
        f"/api/v1/jobs/{job_id}/escrow", json={"tx_id": ref[0], "index": ref[1]}, headers=auth
    )


def _honest(job_id: str, wallet: Wallet, clock: FakeClock, **datum: Any) -> Any:
    values: dict[str, Any] = {"budget": PRICE, "deadline_ms": _honest_deadline(clock)}
    values.update(datum)
    return escrow_datum(DEPLOYED, job_id, _pkh(wallet), **values)


def test_an_escrow_that_cannot_pay_is_never_recorded(
    client: TestClient, chain: FakeChainContext, submitter: Any, clock: FakeClock
) -> None:
    wallet, auth = submitter
    job_id = _post_job(client, auth)
    honest = _honest(job_id, wallet, clock)
    other = Wallet()
    attacks: dict[str, dict[str, Any]] = {
        "amount_exceeds_budget": escrow_output(
            DEPLOYED, _honest(job_id, wallet, clock, budget=PRICE - 1)
        ),
        "no NTX locked": escrow_output(DEPLOYED, honest, ntx=0),
        "escrow_wrong_unit": escrow_output(
            DEPLOYED, _honest(job_id, wallet, clock, ntx_policy=b"\xcd" * 28)
        ),
        "escrow_expired": escrow_output(
            DEPLOYED, _honest(job_id, wallet, clock, deadline_ms=_now_ms(clock) - 1)
        ),
        "escrow_deadline_too_near": escrow_output(
            DEPLOYED,
            _honest(
                job_id, wallet, clock, deadline_ms=_now_ms(clock) + (RUN_S + WINDOW_S) * 1000 - 1
            ),
        ),
        "escrow_wrong_batch": escrow_output(
            DEPLOYED, _honest(job_id, wallet, clock, batch_credential=b"\x44" * 28)
        ),
        "escrow_wrong_config": escrow_output(
            DEPLOYED, _honest(job_id, wallet, clock, config_policy=b"\x55" * 28)
        ),
        "escrow_stray_tokens": escrow_output(DEPLOYED, honest, assets={"ef" * 28 + "01": 1}),
        "escrow_datum_invalid": escrow_output(DEPLOYED, "d87980"),
        "escrow_job_mismatch": escrow_output(DEPLOYED, _honest("34" * 32, wallet, clock)),
        "escrow_submitter_mismatch": escrow_output(
            DEPLOYED,
            escrow_datum(
                DEPLOYED, job_id, _pkh(other), budget=PRICE, deadline_ms=_honest_deadline(clock)
            ),
        ),
        "escrow_spent": escrow_output(DEPLOYED, honest, spent_by="ee" * 32),
        "escrow_wrong_address": escrow_output(DEPLOYED, honest, script="12" * 28),
    }
    attacks["escrow_datum_invalid: out of range"] = escrow_output(
        DEPLOYED, _honest(job_id, wallet, clock, budget=2**64), ntx=PRICE
    )
    for expected, out in attacks.items():
        expected = expected.split(":")[0]
        response = _record(client, auth, job_id, chain.put(out))
        assert response.status_code == 400, (expected, response.text)
        detail = response.json()["detail"]
        assert expected in detail or (expected == "no NTX locked" and "locked 0" in detail), detail
    assert _record(client, auth, job_id, ("ab" * 32, 0)).status_code == 400  # not on chain
    # Nothing was recorded, so no worker is handed the job.
    status = client.get(f"/api/v1/jobs/{job_id}/status", headers=auth).json()
    assert status["reason"].startswith("waiting for its escrow")

    recorded = _record(client, auth, job_id, chain.put(escrow_output(DEPLOYED, honest)))
    assert recorded.status_code == 200, recorded.text
    assert recorded.json()["budget"] == PRICE


def test_without_a_deployment_no_escrow_is_recorded(
    client: TestClient, submitter: Any, clock: FakeClock
) -> None:
    wallet, auth = submitter
    context = FakeChainContext()
    client.app.state.chain_context = context  # type: ignore[attr-defined]
    job_id = _post_job(client, auth)
    ref = context.put(escrow_output(DEPLOYED, _honest(job_id, wallet, clock)))
    response = _record(client, auth, job_id, ref)
    assert response.status_code == 503 and "deployment" in response.json()["detail"]


def _recorded_job(
    client: TestClient, chain: FakeChainContext, submitter: Any, clock: FakeClock
) -> tuple[str, str]:
    wallet, auth = submitter
    job_id = _post_job(client, auth)
    ref = chain.put(escrow_output(DEPLOYED, _honest(job_id, wallet, clock)))
    assert _record(client, auth, job_id, ref).status_code == 200
    return job_id, ref[0]


def test_an_escrow_spent_before_the_first_lease_is_dropped(
    client: TestClient,
    chain: FakeChainContext,
    submitter: Any,
    clock: FakeClock,
    session: Session,
    worker_factory: Callable[[], Worker],
) -> None:
    """The attack: record a good escrow, then refund it (spend it) before a worker claims.
    At the lease's start the chain says spent: the lease is taken back before the worker
    hears of it, and the job waits for an escrow that can pay."""
    _, auth = submitter
    worker = worker_factory()
    worker.register([])
    job_id, tx_id = _recorded_job(client, chain, submitter, clock)
    chain.replace(tx_id, consumed_by_tx="ee" * 32)
    assert worker.claim().status_code == 204
    session.rollback()
    job = session.exec(select(Job).where(Job.job_id == job_id)).one()
    assert job.status == "queued" and job.attempts == 0
    assert "escrow_spent" in job.last_error
    (lease,) = session.exec(select(Lease).where(Lease.job_id == job.id)).all()
    assert lease.outcome == NOT_STARTED
    assert session.exec(select(JobEscrow).where(JobEscrow.job_id == job.id)).first() is None
    session.rollback()  # SQLite transactions take the write lock: don't hold it
    status = client.get(f"/api/v1/jobs/{job_id}/status", headers=auth).json()
    assert status["reason"].startswith("waiting for its escrow")


def test_a_lease_starts_only_while_the_deadline_leaves_its_run_and_the_window(
    client: TestClient,
    chain: FakeChainContext,
    submitter: Any,
    clock: FakeClock,
    session: Session,
    worker_factory: Callable[[], Worker],
) -> None:
    """Honest twin first: a fresh escrow is claimed. The job is given back; time passes
    until the deadline no longer leaves a full run plus the settlement window: the next
    lease would run work the oracle cannot settle in time, so the job fails instead (a
    worker started on it: its escrow cannot be swapped)."""
    worker = worker_factory()
    worker.register([])
    job_id, _ = _recorded_job(client, chain, submitter, clock)
    claimed = worker.claim()
    assert claimed.status_code == 200, claimed.text
    released = worker.request(
        "POST", f"/api/v1/worker/leases/{claimed.json()['lease_token']}/release", {"reason": "x"}
    )
    assert released.status_code == 200, released.text
    clock.advance(2 * RUN_S + 1)  # past the point where one more run fits before the window
    assert worker.claim().status_code == 204
    session.rollback()
    job = session.exec(select(Job).where(Job.job_id == job_id)).one()
    assert job.status == "failed" and "escrow_deadline_too_near" in job.last_error
    outcomes = session.exec(
        select(Lease.outcome).where(Lease.job_id == job.id).order_by(col(Lease.id))
    ).all()
    assert outcomes == ["released", NOT_STARTED]
    session.rollback()


def test_an_unreadable_chain_hands_out_no_lease(
    client: TestClient,
    chain: FakeChainContext,
    submitter: Any,
    clock: FakeClock,
    session: Session,
    worker_factory: Callable[[], Worker],
) -> None:
    worker = worker_factory()
    worker.register([])
    job_id, _ = _recorded_job(client, chain, submitter, clock)
    chain.api.down = True
    assert worker.claim().status_code == 503
    session.rollback()
    job = session.exec(select(Job).where(Job.job_id == job_id)).one()
    assert job.status == "queued" and job.attempts == 0
    session.rollback()
    # The escrow still backs the job: once the chain answers, the job is handed out.
    chain.api.down = False
    assert worker.claim().status_code == 200


def test_the_escrow_cannot_be_swapped_once_a_worker_started(
    client: TestClient,
    chain: FakeChainContext,
    submitter: Any,
    clock: FakeClock,
    worker_factory: Callable[[], Worker],
) -> None:
    """The attack: swap the recorded escrow mid-job, so the worker's attestation names an
    escrow that is no longer the job's (`escrow_mismatch`). Honest twin: before any lease
    the submitter may still replace it."""
    wallet, auth = submitter
    job_id = _post_job(client, auth)
    first = chain.put(escrow_output(DEPLOYED, _honest(job_id, wallet, clock)))
    second = chain.put(escrow_output(DEPLOYED, _honest(job_id, wallet, clock, nonce=1)))
    third = chain.put(escrow_output(DEPLOYED, _honest(job_id, wallet, clock, nonce=2)))
    assert _record(client, auth, job_id, first).status_code == 200
    assert _record(client, auth, job_id, second).status_code == 200  # no lease yet
    worker = worker_factory()
    worker.register([])
    claim = worker.claim().json()
    assert claim["escrow"]["tx_id"] == second[0]
    swapped = _record(client, auth, job_id, third)
    assert swapped.status_code == 409 and "can no longer be replaced" in swapped.text
    assert _record(client, auth, job_id, second).status_code == 200  # the same one: a no-op
