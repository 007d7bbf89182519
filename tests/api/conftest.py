"""Fixtures for the API tests: databases (SQLite file, PostgreSQL per test), app, clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from api_support import RELEASE_ORACLE, FakeClock, Wallet, Worker, sign_in
from fastapi.testclient import TestClient
from postgres_db import fresh_database
from sqlalchemy import Engine
from sqlmodel import Session

from api.app import create_app
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.services.users import add_senior
from api.storage import LocalBlobStore


@pytest.fixture
def sqlite_url(tmp_path: Any) -> str:
    return f"sqlite:///{tmp_path / 'api.db'}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh database on the test server, dropped afterwards. Fails (never skips) when
    PostgreSQL is unreachable: the tests marked `postgres` must really run."""
    with fresh_database("proofnet_api") as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """Each test using this runs on both databases."""
    fixture = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(fixture))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_config(sqlite_url: str) -> Callable[..., ApiConfig]:
    def make(**overrides: Any) -> ApiConfig:
        values: dict[str, Any] = {
            "database_url": sqlite_url,
            "network": "devnet",
            "rate_limit_per_minute": 100_000,
            # The oracle whose verdicts release results (api_support.release_results).
            "oracle_keys": (bytes(RELEASE_ORACLE.verify_key).hex(),),
        }
        values.update(overrides)
        return ApiConfig(**values)

    return make


@pytest.fixture
def config(make_config: Callable[..., ApiConfig]) -> ApiConfig:
    return make_config()


@pytest.fixture
def engine(config: ApiConfig) -> Iterator[Engine]:
    engine = make_engine(config.database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def client(config: ApiConfig, engine: Engine, clock: FakeClock) -> Iterator[TestClient]:
    app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def session(client: TestClient, engine: Engine) -> Iterator[Session]:
    """A session on the migrated database the client uses."""
    with open_session(engine) as s:
        yield s


@pytest.fixture
def seniors(session: Session, config: ApiConfig, clock: FakeClock) -> list[Wallet]:
    wallets = [Wallet() for _ in range(6)]
    for w in wallets:
        add_senior(session, config, w.address, clock())
    return wallets


@pytest.fixture
def approved(
    client: TestClient, session: Session, config: ApiConfig, clock: FakeClock
) -> tuple[Wallet, dict[str, str]]:
    """An approved submitter (seeded as senior, which implies approval) and its auth header."""
    wallet = Wallet()
    add_senior(session, config, wallet.address, clock())
    return wallet, sign_in(client, wallet)


@pytest.fixture
def worker_factory(client: TestClient, clock: FakeClock) -> Callable[[], Worker]:
    return lambda: Worker(client, clock=clock)


@pytest.fixture
def store(client: TestClient, tmp_path: Any) -> LocalBlobStore:
    """A local content-addressed store the app writes results and checkpoints to."""
    blobs = LocalBlobStore(tmp_path / "blobs")
    client.app.state.blob_store = blobs  # type: ignore[attr-defined]
    return blobs
