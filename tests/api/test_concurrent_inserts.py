"""Concurrent duplicate inserts on PostgreSQL answer 409 (or succeed), never 500.

PostgreSQL runs requests at once, so a check-then-insert can lose the race to a concurrent
insert of the same unique key; the loser's IntegrityError must reach the client as a clear
409 (`api.errors.conflict_of`), and a first sign-in must simply succeed. Each attack fires
the same insert from several threads at the same instant (a barrier) against the served
API, in a few rounds; the honest twin is the one request that wins.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from api_support import FakeClock, Wallet, job_spec
from sqlalchemy import Engine

from api.app import create_app
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.migrate import upgrade_head
from api.services.users import add_senior
from chain.devnet.testing import serve_app

pytestmark = pytest.mark.postgres

THREADS = 6
ROUNDS = 3


@pytest.fixture
def served(postgres_url: str) -> Iterator[tuple[str, ApiConfig, Engine]]:
    config = ApiConfig(database_url=postgres_url, network="devnet", rate_limit_per_minute=10**6)
    engine = make_engine(postgres_url)
    upgrade_head(engine)
    app = create_app(config=config, engine=engine, clock=FakeClock(), run_sweeper=False)
    app.state.run_notifier = False
    with serve_app(app) as url:
        yield url, config, engine
    engine.dispose()


def at_once(calls: list[Callable[[], httpx.Response]]) -> list[int]:
    """Run `calls` in threads released together; their status codes."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], httpx.Response]) -> int:
        barrier.wait()
        return call().status_code

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def _challenge(url: str, wallet: Wallet) -> dict[str, Any]:
    response = httpx.post(f"{url}/api/v1/auth/challenge", json={"address": wallet.address})
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_first_sign_ins_of_one_address_at_once_all_succeed(
    served: tuple[str, ApiConfig, Engine],
) -> None:
    url = served[0]
    for _ in range(ROUNDS):
        wallet = Wallet()  # a new address each round: its user row does not exist yet
        challenges = [_challenge(url, wallet) for _ in range(THREADS)]

        def verify(
            challenge: dict[str, Any], wallet: Wallet = wallet
        ) -> Callable[[], httpx.Response]:
            body = {
                "address": wallet.address,
                "nonce": challenge["nonce"],
                **wallet.sign_data(challenge["message"]),
            }
            return lambda: httpx.post(f"{url}/api/v1/auth/verify", json=body, timeout=60)

        statuses = at_once([verify(c) for c in challenges])
        assert statuses == [200] * THREADS, statuses


def test_the_same_job_posted_at_once_is_created_once(
    served: tuple[str, ApiConfig, Engine], clock: FakeClock
) -> None:
    url, config, engine = served
    wallet = Wallet()
    with open_session(engine) as session:
        add_senior(session, config, wallet.address, clock())
    challenge = _challenge(url, wallet)
    token = httpx.post(
        f"{url}/api/v1/auth/verify",
        json={
            "address": wallet.address,
            "nonce": challenge["nonce"],
            **wallet.sign_data(challenge["message"]),
        },
    ).json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    for _ in range(ROUNDS):
        spec = job_spec()

        def post(spec: dict[str, Any] = spec) -> httpx.Response:
            return httpx.post(f"{url}/api/v1/jobs", json={"spec": spec}, headers=auth, timeout=60)

        statuses = at_once([post] * THREADS)
        assert sorted(statuses) == [201] + [409] * (THREADS - 1), statuses
