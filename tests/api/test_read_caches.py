"""The caches behind the polled reads (job status, balances): what they may serve stale,
for how long at most, and what they never weaken (sign-out, expiry, who may read what)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from api_support import FakeClock, Wallet, Worker, job_spec, sign_in
from fastapi.testclient import TestClient
from movement_support import add_movement
from sqlalchemy import update
from sqlmodel import Session, col, select

from api.models import ApiToken, Job
from api.services.auth import TOKEN_CACHE_TTL_S, TokenCache
from api.services.balances import (
    BALANCE_CACHE_TTL_S,
    BalanceCache,
    BalanceSources,
    CachedLookups,
    Holdings,
    clear_caches,
)
from api.services.jobs import MATCHING_CACHE_TTL_S, MatchingCache
from api.services.tokens import secret_hash


class Tick:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Chain:
    def holdings(self, address: str) -> Holdings:
        return Holdings(7, None)

    def output_unspent(self, tx_id: str, index: int) -> bool:
        return True


def _post(client: TestClient, headers: dict[str, str], **spec: int) -> str:
    posted = client.post("/api/v1/jobs", json={"spec": job_spec(**spec)}, headers=headers)
    assert posted.status_code == 201, posted.text
    return str(posted.json()["job_id"])


def _token(headers: dict[str, str]) -> str:
    return headers["Authorization"].split(" ", 1)[1]


def test_logout_stops_cached_reads_at_once(
    client: TestClient, approved: tuple[Wallet, dict[str, str]]
) -> None:
    wallet, headers = approved
    client.app.state.token_cache = TokenCache(clock=Tick())  # type: ignore[attr-defined]
    job_id = _post(client, headers)
    status = f"/api/v1/jobs/{job_id}/status"
    balance = f"/api/v1/balances/{wallet.address}"
    assert client.get(status, headers=headers).status_code == 200  # now cached
    assert client.get(balance, headers=headers).status_code == 200
    assert client.post("/api/v1/auth/logout", headers=headers).status_code == 200
    # The clock has not moved: the logout itself evicted the token from this process.
    assert client.get(status, headers=headers).status_code == 401
    assert client.get(balance, headers=headers).status_code == 401


def test_revocation_elsewhere_is_honoured_within_the_ttl(
    client: TestClient, approved: tuple[Wallet, dict[str, str]], session: Session
) -> None:
    _, headers = approved
    tick = Tick()
    client.app.state.token_cache = TokenCache(clock=tick)  # type: ignore[attr-defined]
    status = f"/api/v1/jobs/{_post(client, headers)}/status"
    assert client.get(status, headers=headers).status_code == 200
    # Another worker process signs the token out: only the database knows.
    session.execute(
        update(ApiToken)
        .where(col(ApiToken.token_hash) == secret_hash(_token(headers)))
        .values(revoked_at=datetime.now(UTC))
    )
    session.commit()
    # Routes that take CurrentUser ask the database every time ...
    assert client.get("/api/v1/users/me", headers=headers).status_code == 401
    # ... the polled reads trust this process's check for at most TOKEN_CACHE_TTL_S.
    tick.t += TOKEN_CACHE_TTL_S - 0.5
    assert client.get(status, headers=headers).status_code == 200
    tick.t += 0.5
    assert client.get(status, headers=headers).status_code == 401


def test_expiry_is_checked_on_every_cached_read(
    client: TestClient, approved: tuple[Wallet, dict[str, str]], clock: FakeClock
) -> None:
    _, headers = approved
    client.app.state.token_cache = TokenCache(clock=Tick())  # type: ignore[attr-defined]
    status = f"/api/v1/jobs/{_post(client, headers)}/status"
    assert client.get(status, headers=headers).status_code == 200
    clock.advance(24 * 3600 + 1)  # past the token's expiry; the cache entry is still fresh
    expired = client.get(status, headers=headers)
    assert expired.status_code == 401 and "expired" in expired.json()["detail"]


def test_a_cached_sign_in_never_reads_another_users_job(
    client: TestClient, approved: tuple[Wallet, dict[str, str]]
) -> None:
    _, owner = approved
    job_id = _post(client, owner)
    stranger = sign_in(client, Wallet())
    for _ in range(3):  # the first read fills the caches, the others hit them
        assert client.get(f"/api/v1/jobs/{job_id}/status", headers=owner).status_code == 200
        denied = client.get(f"/api/v1/jobs/{job_id}/status", headers=stranger)
        assert denied.status_code == 404 and "status" not in denied.json()
    assert client.get(f"/api/v1/jobs/{job_id}/status").status_code == 401
    bogus = {"Authorization": "Bearer " + "x" * 43}
    assert client.get(f"/api/v1/jobs/{job_id}/status", headers=bogus).status_code == 401


def test_revoked_token_is_not_recached_by_a_read_that_raced_the_logout() -> None:
    tick = Tick()
    cache = TokenCache(clock=tick)
    cache.evict("h")  # the logout commits and evicts ...
    values = {"id": 1, "address": "addr", "payment_key_hash": "00", "created_at": datetime.now(UTC)}
    cache.put_values(
        "h", values, datetime(2999, 1, 1, tzinfo=UTC)
    )  # ... a read from before it lands
    assert cache.get("h", datetime.now(UTC)) is None
    tick.t += TOKEN_CACHE_TTL_S
    cache.put_values("h", values, datetime(2999, 1, 1, tzinfo=UTC))
    assert cache.get("h", datetime.now(UTC)) is not None


def test_matching_count_is_reused_for_at_most_the_ttl(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    tick = Tick()
    client.app.state.matching_cache = MatchingCache(clock=tick)  # type: ignore[attr-defined]
    status = f"/api/v1/jobs/{_post(client, headers, gpus=1, gpu_memory_mb=24576)}/status"
    first = client.get(status, headers=headers).json()
    assert first["matching_providers_online"] == 0 and first["queue_position"] == 1
    worker_factory().register([("L4", 24576)])
    # A second job of the same shape: its position is exact, the shared count is cached.
    other = client.get(
        f"/api/v1/jobs/{_post(client, headers, gpus=1, gpu_memory_mb=24576)}/status",
        headers=headers,
    ).json()
    assert other["queue_position"] == 2 and other["matching_providers_online"] == 0
    tick.t += MATCHING_CACHE_TTL_S
    assert client.get(status, headers=headers).json()["matching_providers_online"] == 1


def test_balance_cache_bounds_and_authorization(
    client: TestClient, approved: tuple[Wallet, dict[str, str]], session: Session
) -> None:
    wallet, headers = approved
    tick = Tick()
    client.app.state.balance_sources = BalanceSources(  # type: ignore[attr-defined]
        CachedLookups(Chain(), None, clock=tick),
        "http://127.0.0.1:9/api/v0",
        None,
        BalanceCache(clock=tick),
    )
    path = f"/api/v1/balances/{wallet.address}"
    first = client.get(path, headers=headers).json()
    assert first["earned"]["ntx"] == 0 and first["available"]["lovelace"] == 7
    job = session.exec(select(Job).where(Job.job_id == _post(client, headers))).one()
    assert job.id is not None

    # Recorded by this process's chain watcher, which clears the caches at once.
    add_movement(session, address=wallet.address, ntx=40, tx_hash="ab" * 32, job_id=job.job_id)
    clear_caches()
    assert client.get(path, headers=headers).json()["earned"]["ntx"] == 40

    # Recorded elsewhere: shows within BALANCE_CACHE_TTL_S.
    add_movement(session, address=wallet.address, ntx=2, tx_hash="cd" * 32, job_id=job.job_id)
    assert client.get(path, headers=headers).json()["earned"]["ntx"] == 40
    tick.t += BALANCE_CACHE_TTL_S
    again = client.get(path, headers=headers).json()
    assert again["earned"]["ntx"] == 42 and len(again["payouts"]) == 2

    # A cached balance is still only the owner's to read.
    intruder = sign_in(client, Wallet())
    assert client.get(path, headers=intruder).status_code == 403


def test_token_cache_is_bounded_and_each_entry_expires_on_its_own() -> None:
    tick = Tick()
    cache = TokenCache(clock=tick, max_entries=3)
    values = {"id": 1, "address": "addr", "payment_key_hash": "00", "created_at": datetime.now(UTC)}
    far = datetime(2999, 1, 1, tzinfo=UTC)
    now = datetime.now(UTC)
    for i in range(5):  # a flood of sign-ins: memory stays at max_entries
        cache.put_values(f"h{i}", values, far)
        tick.t += 1
    assert [cache.get(f"h{i}", now) is not None for i in range(5)] == [
        False,
        False,
        True,
        True,
        True,
    ]
    # h2 was put at 1002: it expires at 1002 + TTL, while h4 (put at 1004) lives on.
    tick.t = 1002 + TOKEN_CACHE_TTL_S
    assert cache.get("h2", now) is None and cache.get("h4", now) is not None
