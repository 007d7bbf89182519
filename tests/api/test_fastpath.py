"""The lean read path (api.fastpath): the same answers as the FastAPI routes it stands in
front of, the same refusals, the same limits; and, across processes on PostgreSQL, changes
made elsewhere show within the stated bounds."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from api_support import FakeClock, Wallet, Worker, job_spec, sign_in, wait_for
from fastapi import FastAPI
from fastapi.testclient import TestClient
from httpx import Response
from movement_support import add_movement
from sqlalchemy import Engine, Executable, text, update
from sqlmodel import Session, col, select

from api.app import create_app
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.migrate import upgrade_head
from api.models import ApiToken, Job, User
from api.reads._change_feed import Subscriber
from api.reads._status_cache import STATUS_CACHE_TTL_S, StatusCache
from api.services.balances import BalanceCache, BalanceSources, CachedLookups, Holdings
from api.services.tokens import secret_hash
from api.services.users import add_senior

# Changes announced by another process must show within this (they normally take a few
# milliseconds; the bound leaves room for a loaded test machine, well below the 5 s TTLs).
ANNOUNCED_S = 2.0


class Chain:
    def holdings(self, address: str) -> Holdings:
        return Holdings(7, None)

    def output_unspent(self, tx_id: str, index: int) -> bool:
        return True


class Tick:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@dataclass
class Pair:
    """Two apps on one database: `lean` as served, `plain` with the lean path off."""

    lean: TestClient
    plain: TestClient
    engine: Engine
    config: ApiConfig
    clock: FakeClock


def _apps(
    url: str, clock: FakeClock, *, rate_limit_per_minute: int = 100_000
) -> tuple[FastAPI, FastAPI, Engine, ApiConfig]:
    cfg = ApiConfig(database_url=url, network="devnet", rate_limit_per_minute=rate_limit_per_minute)
    engine = make_engine(url)
    lean = create_app(config=cfg, engine=engine, clock=clock, run_sweeper=False)
    plain = create_app(config=cfg, engine=engine, clock=clock, run_sweeper=False, lean_reads=False)
    # One balance source for both, with a chain that answers: same figures on both paths.
    sources = BalanceSources(
        CachedLookups(Chain(), None), "http://127.0.0.1:9/api/v0", None, BalanceCache()
    )
    for app in (lean, plain):
        app.state.run_notifier = False
        app.state.balance_sources = sources
    return lean, plain, engine, cfg


@pytest.fixture
def pair(database_url: str, clock: FakeClock) -> Iterator[Pair]:
    lean, plain, engine, config = _apps(database_url, clock)
    with TestClient(lean) as a, TestClient(plain) as b:
        yield Pair(a, b, engine, config, clock)
    engine.dispose()


def _submitter(pair: Pair) -> tuple[Wallet, dict[str, str]]:
    wallet = Wallet()
    with open_session(pair.engine) as session:
        add_senior(session, pair.config, wallet.address, pair.clock())
    return wallet, sign_in(pair.lean, wallet)


def _post(client: TestClient, headers: dict[str, str], **spec: int) -> str:
    posted = client.post("/api/v1/jobs", json={"spec": job_spec(**spec)}, headers=headers)
    assert posted.status_code == 201, posted.text
    return str(posted.json()["job_id"])


def _same(a: Response, b: Response) -> None:
    assert (a.status_code, a.content, dict(a.headers)) == (
        b.status_code,
        b.content,
        dict(b.headers),
    )


def _both(pair: Pair, method: str, path: str, **kwargs: object) -> Response:
    lean = pair.lean.request(method, path, **kwargs)  # type: ignore[arg-type]
    plain = pair.plain.request(method, path, **kwargs)  # type: ignore[arg-type]
    _same(lean, plain)
    return lean


def test_lean_reads_answer_exactly_as_the_routes(pair: Pair) -> None:
    wallet, headers = _submitter(pair)
    queued = _post(pair.lean, headers, gpus=1, gpu_memory_mb=24576)
    leased = _post(pair.lean, headers, gpus=1, gpu_memory_mb=16384)
    worker = Worker(pair.lean, clock=pair.clock)
    worker.register([("NVIDIA L4", 16384)])
    claimed = worker.claim()
    assert claimed.status_code == 200, claimed.text
    # The worker could take only the smaller job: one job queued, one leased.
    for job_id, status in ((queued, "queued"), (leased, "leased")):
        body = _both(pair, "GET", f"/api/v1/jobs/{job_id}/status", headers=headers).json()
        assert body["status"] == status, body
    balance = _both(pair, "GET", f"/api/v1/balances/{wallet.address}", headers=headers)
    assert balance.json()["available"]["lovelace"] == 7
    # Served twice (the second time from the caches): still the same bytes.
    _both(pair, "GET", f"/api/v1/balances/{wallet.address}", headers=headers)
    _both(pair, "GET", f"/api/v1/jobs/{queued}/status", headers=headers)


def test_lean_reads_refuse_what_the_routes_refuse(pair: Pair) -> None:
    wallet, headers = _submitter(pair)
    job_id = _post(pair.lean, headers)
    status = f"/api/v1/jobs/{job_id}/status"
    balance = f"/api/v1/balances/{wallet.address}"
    token = headers["Authorization"].split(" ", 1)[1]
    refused = [
        {},
        {"Authorization": ""},
        {"Authorization": f"Basic {token}"},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer    "},
        {"Authorization": "Bearer " + "x" * 43},
    ]
    for path in (status, balance):
        for bad in refused:
            answer = _both(pair, "GET", path, headers=bad)
            assert answer.status_code == 401, (path, bad, answer.text)
        # The scheme in any case, and spaces around the token, as HTTPBearer takes them.
        assert _both(pair, "GET", path, headers={"Authorization": f"bEaReR  {token} "}).is_success

    # Someone else: another user's job reads as missing, another address's balance is
    # forbidden, on cached and uncached sign-ins alike.
    stranger = sign_in(pair.lean, Wallet())
    for _ in range(2):
        missing = _both(pair, "GET", status, headers=stranger)
        assert missing.status_code == 404 and "status" not in missing.json()
        assert _both(pair, "GET", balance, headers=stranger).status_code == 403
    assert _both(pair, "GET", f"/api/v1/jobs/{'0' * 64}/status", headers=headers).status_code == 404
    not_an_address = "addr_test1" + "q" * 50
    assert _both(pair, "GET", f"/api/v1/balances/{not_an_address}", headers=headers).json() == {
        "detail": "not a bech32 Cardano address or stake address"
    }

    # Expired, then revoked: refused on both paths though the sign-in is cached.
    pair.clock.advance(pair.config.token_ttl_s + 1)
    expired = _both(pair, "GET", status, headers=headers)
    assert expired.status_code == 401 and "expired" in expired.json()["detail"]
    pair.clock.advance(-(pair.config.token_ttl_s + 1))
    assert pair.lean.post("/api/v1/auth/logout", headers=headers).status_code == 200
    for path in (status, balance):
        assert _both(pair, "GET", path, headers=headers).status_code == 401


def test_what_the_lean_path_does_not_match_goes_to_fastapi(pair: Pair) -> None:
    wallet, headers = _submitter(pair)
    job_id = _post(pair.lean, headers)
    # FastAPI's own answers: its validation body, its redirect, its 405.
    short = _both(pair, "GET", "/api/v1/balances/addr_test1", headers=headers)
    assert short.status_code == 422
    assert _both(pair, "GET", "/api/v1/balances/" + "a" * 201, headers=headers).status_code == 422
    slash = _both(
        pair, "GET", f"/api/v1/jobs/{job_id}/status/", headers=headers, follow_redirects=False
    )
    assert slash.status_code == 307
    for method in ("POST", "HEAD", "DELETE"):
        assert (
            _both(pair, method, f"/api/v1/jobs/{job_id}/status", headers=headers).status_code == 405
        )
    assert _both(pair, "GET", "/api/v1/jobs//status", headers=headers).status_code == 404
    assert (
        _both(pair, "GET", f"/api/v1/balances/{wallet.address}/x", headers=headers).status_code
        == 404
    )


def test_both_reads_stay_in_the_openapi_schema(pair: Pair) -> None:
    paths = pair.lean.get("/api/v1/openapi.json").json()["paths"]
    for path in ("/api/v1/jobs/{job_id}/status", "/api/v1/balances/{address}"):
        operation = paths[path]["get"]
        assert operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert operation.get("security"), operation  # bearer sign-in documented


def test_rate_limit_and_body_limit_apply_to_lean_reads(sqlite_url: str, clock: FakeClock) -> None:
    lean, plain, engine, config = _apps(sqlite_url, clock, rate_limit_per_minute=6)
    try:
        with TestClient(lean) as client:
            wallet = Wallet()
            with open_session(engine) as session:
                add_senior(session, config, wallet.address, clock())
            headers = sign_in(client, wallet)  # two requests
            job_id = _post(client, headers)  # a third
            status = f"/api/v1/jobs/{job_id}/status"
            too_big = {**headers, "Content-Length": str(config.max_body_bytes + 1)}
            assert client.request("GET", status, headers=too_big).status_code == 413
            assert client.get(status, headers=headers).status_code == 200
            assert client.get(f"/api/v1/balances/{wallet.address}", headers=headers).is_success
            limited = client.get(status, headers=headers)
            assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
            assert (
                client.get(f"/api/v1/balances/{wallet.address}", headers=headers).status_code == 429
            )
    finally:
        engine.dispose()


# --- across processes (PostgreSQL) ---------------------------------------------------------


@pytest.fixture
def served(postgres_url: str, clock: FakeClock) -> Iterator[Pair]:
    """The lean app as served, and `engine`: another process's connection to its database."""
    lean, plain, engine, config = _apps(postgres_url, clock)
    other = make_engine(postgres_url)
    with TestClient(lean) as a, TestClient(plain) as b:
        assert lean.state.change_feed.wait_live(5), "the change feed did not start"
        yield Pair(a, b, other, config, clock)
    other.dispose()
    engine.dispose()


def _elsewhere(engine: Engine, statement: Executable, *, announced: bool = True) -> None:
    with Session(engine) as session:
        if not announced:
            # What a writer the triggers miss would do (superuser only: the test server's).
            session.execute(text("SET LOCAL session_replication_role = replica"))
        session.execute(statement)
        session.commit()


def _caught_up(pair: Pair) -> None:
    """Wait until the app's feed has delivered every announcement committed so far: those
    of one listener arrive in commit order, so once a marker sent now arrives, they have."""
    feed = pair.lean.app.state.change_feed  # type: ignore[attr-defined]
    marker = f"marker-{uuid.uuid4().hex}"
    seen: list[str] = []
    feed.subscribe(Subscriber(lambda kind, key: seen.append(key), lambda: None))
    with pair.engine.connect() as conn:
        conn.execute(text("SELECT pg_notify('proofnet_reads', :p)"), {"p": f"j:{marker}"})
        conn.commit()
    wait_for(lambda: marker in seen, ANNOUNCED_S)


def _frozen_cache(pair: Pair) -> tuple[StatusCache, Tick]:
    """The app's status cache replaced by one on a clock that moves only when told: what
    it stops keeping, an announcement dropped."""
    state = pair.lean.app.state  # type: ignore[attr-defined]
    tick = Tick()
    cache = StatusCache(state.change_feed, clock=tick)
    state.change_feed.subscribe(Subscriber(cache.changed, cache.reset))
    state.status_cache = cache
    return cache, tick


def _user_id(pair: Pair, wallet: Wallet) -> int:
    with Session(pair.engine) as session:
        user_id = session.exec(select(User.id).where(User.address == wallet.address)).one()
    assert user_id is not None
    return user_id


def _status(pair: Pair, job_id: str, headers: dict[str, str]) -> dict[str, object]:
    answer = pair.lean.get(f"/api/v1/jobs/{job_id}/status", headers=headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@pytest.mark.postgres
def test_a_status_changed_by_another_process_shows_within_the_bound(served: Pair) -> None:
    wallet, headers = _submitter(served)
    job_id = _post(served.lean, headers)
    _caught_up(served)
    assert _status(served, job_id, headers)["status"] == "queued"
    served_cache: StatusCache = served.lean.app.state.status_cache  # type: ignore[attr-defined]
    assert served_cache.get(_user_id(served, wallet), job_id, served.clock()) is not None
    cache, _ = _frozen_cache(served)
    for change in ({"status": "leased"}, {"status": "completed", "progress": 1.0}):
        _caught_up(served)
        assert _status(served, job_id, headers)["status"] != change["status"]  # kept now
        _elsewhere(
            served.engine,
            update(Job).where(col(Job.job_id) == job_id).values(**change, version=Job.version + 1),
        )
        started = datetime.now(UTC)
        want = change["status"]
        wait_for(lambda: _status(served, job_id, headers)["status"] == want, ANNOUNCED_S)  # noqa: B023
        assert datetime.now(UTC) - started < timedelta(seconds=ANNOUNCED_S)


@pytest.mark.postgres
def test_an_unannounced_change_shows_within_the_safety_ttl(served: Pair) -> None:
    _, headers = _submitter(served)
    job_id = _post(served.lean, headers)
    _, tick = _frozen_cache(served)
    _elsewhere(served.engine, update(Job).where(col(Job.job_id) == job_id).values(status="failed"))
    _caught_up(served)
    assert _status(served, job_id, headers)["status"] == "failed"  # read, and kept
    # A change no trigger announces: the kept body is served until the safety TTL.
    _elsewhere(
        served.engine,
        update(Job).where(col(Job.job_id) == job_id).values(status="cancelled"),
        announced=False,
    )
    assert _status(served, job_id, headers)["status"] == "failed"
    tick.t += STATUS_CACHE_TTL_S - 0.01
    assert _status(served, job_id, headers)["status"] == "failed"
    tick.t += 0.01
    assert _status(served, job_id, headers)["status"] == "cancelled"


@pytest.mark.postgres
def test_a_queue_position_follows_claims_made_elsewhere(served: Pair) -> None:
    _, headers = _submitter(served)
    first = _post(served.lean, headers)
    second = _post(served.lean, headers)
    _frozen_cache(served)  # a queued body is kept 1 s at most: here only an announcement
    _caught_up(served)
    assert _status(served, second, headers)["queue_position"] == 2
    # Another process hands the first job out: the second moves up at once.
    _elsewhere(served.engine, update(Job).where(col(Job.job_id) == first).values(status="leased"))
    wait_for(lambda: _status(served, second, headers)["queue_position"] == 1, ANNOUNCED_S)


@pytest.mark.postgres
def test_a_revocation_elsewhere_is_refused_at_once(served: Pair) -> None:
    wallet, headers = _submitter(served)
    job_id = _post(served.lean, headers)
    paths = (f"/api/v1/jobs/{job_id}/status", f"/api/v1/balances/{wallet.address}")
    for path in paths:
        assert served.lean.get(path, headers=headers).status_code == 200  # sign-in cached
    token_hash = secret_hash(headers["Authorization"].split(" ", 1)[1])
    _elsewhere(
        served.engine,
        update(ApiToken)
        .where(col(ApiToken.token_hash) == token_hash)
        .values(revoked_at=datetime.now(UTC)),
    )
    # Not after the 5 s TTL: as soon as the announcement arrives.
    wait_for(
        lambda: all(served.lean.get(p, headers=headers).status_code == 401 for p in paths),
        ANNOUNCED_S,
    )


@pytest.mark.postgres
def test_a_payout_recorded_elsewhere_shows_at_once(served: Pair) -> None:
    wallet, headers = _submitter(served)
    job_id = _post(served.lean, headers)
    path = f"/api/v1/balances/{wallet.address}"
    assert served.lean.get(path, headers=headers).json()["earned"]["ntx"] == 0  # now cached
    with Session(served.engine) as session:
        job = session.exec(select(Job).where(Job.job_id == job_id)).one()
        assert job.id is not None
        add_movement(session, address=wallet.address, ntx=40, tx_hash="ab" * 32, job_id=job_id)
    wait_for(lambda: served.lean.get(path, headers=headers).json()["earned"]["ntx"] == 40, 2)


@pytest.mark.postgres
def test_without_the_feed_nothing_is_kept_and_it_reconnects(served: Pair) -> None:
    _, headers = _submitter(served)
    job_id = _post(served.lean, headers)
    state = served.lean.app.state  # type: ignore[attr-defined]
    feed = state.change_feed
    feed.retry_s = 1.0  # long enough to look at it while it is down
    with served.engine.connect() as conn:
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query LIKE 'LISTEN%'"
            )
        )
        conn.commit()
    wait_for(lambda: not feed.live, 5)
    # Down: every read asks the database, so an unannounced change still shows at once.
    _elsewhere(
        served.engine,
        update(Job).where(col(Job.job_id) == job_id).values(status="failed"),
        announced=False,
    )
    assert _status(served, job_id, headers)["status"] == "failed"
    assert not feed.live
    wait_for(lambda: feed.live, 5)
    assert _status(served, job_id, headers)["status"] == "failed"
    _elsewhere(
        served.engine, update(Job).where(col(Job.job_id) == job_id).values(status="cancelled")
    )
    wait_for(lambda: _status(served, job_id, headers)["status"] == "cancelled", ANNOUNCED_S)


@pytest.mark.postgres
def test_reads_survive_their_connections_being_dropped(served: Pair) -> None:
    wallet, headers = _submitter(served)
    job_id = _post(served.lean, headers)
    state = served.lean.app.state  # type: ignore[attr-defined]
    assert _status(served, job_id, headers)["status"] == "queued"
    state.status_cache.reset()
    # The server ends every connection but the feed's (a restart or failover would end
    # those too): the read threads' held connections are gone.
    with served.engine.connect() as conn:
        ended = conn.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND query NOT LIKE 'LISTEN%'"
            )
        ).scalar_one()
        conn.commit()
    assert ended >= 1
    assert _status(served, job_id, headers)["status"] == "queued"
    assert served.lean.get(f"/api/v1/balances/{wallet.address}", headers=headers).is_success


@pytest.mark.postgres
def test_a_database_that_does_not_announce_gets_no_status_cache(
    postgres_url: str, clock: FakeClock
) -> None:
    lean, _, engine, _ = _apps(postgres_url, clock)
    try:
        upgrade_head(engine)
        with engine.begin() as conn:
            conn.execute(text("DROP TRIGGER jobs_notify_reads ON jobs"))
        with TestClient(lean) as client:
            state = lean.state
            assert getattr(state, "status_cache", None) is None
            assert getattr(state, "change_feed", None) is None
            wallet = Wallet()
            with open_session(engine) as session:
                add_senior(session, lean.state.config, wallet.address, clock())
            headers = sign_in(client, wallet)
            job_id = _post(client, headers)
            path = f"/api/v1/jobs/{job_id}/status"
            assert client.get(path, headers=headers).json()["status"] == "queued"
            with engine.begin() as conn:
                conn.execute(update(Job).where(col(Job.job_id) == job_id).values(status="failed"))
            assert client.get(path, headers=headers).json()["status"] == "failed"
    finally:
        engine.dispose()
