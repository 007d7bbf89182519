"""Property-based fuzzing of every API operation from the app's own OpenAPI schema:
whatever schemathesis sends (valid or not, signed in or not), the API never answers 5xx."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from api_support import FakeClock, Wallet, Worker, job_spec, sign_in
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chain" / "offchain"))

from protocol_fixtures import protocol_world  # noqa: E402

from api.app import create_app
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.migrate import upgrade_head
from api.services.users import add_senior
from proofnet.settings import build_settings

EXAMPLES = 50
STATUSES: list[int] = []


@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, str]]]:
    db = Path(tmp_path_factory.mktemp("fuzz")) / "api.db"
    config = ApiConfig(
        database_url=f"sqlite:///{db}", network="devnet", rate_limit_per_minute=10**9
    )
    engine = make_engine(config.database_url)
    upgrade_head(engine)
    clock = FakeClock()
    app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)
    app.state.run_notifier = False
    # A devnet with the protocol deployed behind the chain-backed operations (escrow records
    # and escrow transactions, balances); no oracle, so pending settlement must degrade to
    # "unknown", never fail.
    world_dir = Path(tmp_path_factory.mktemp("world"))
    with (
        protocol_world(world_dir, oracles=2, threshold=1, providers=0) as world,
        TestClient(app) as client,
    ):
        app.state.settings = build_settings(devnet_url=world.devnet.url, oracle_url="")
        app.state.chain_context = world.context
        app.state.deployment = world.deployment
        wallet = Wallet()
        with open_session(engine) as s:
            add_senior(s, config, wallet.address, clock())
        auth = sign_in(client, wallet)
        # Some real rows, so lookups by id can hit something.
        worker = Worker(client, clock=clock)
        worker.register([("NVIDIA A100 80GB", 81920)])
        client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=auth)
        yield app, auth
    engine.dispose()


def test_no_operation_answers_5xx(fuzz_app: tuple[Any, dict[str, str]]) -> None:
    # Driven by hand rather than through schemathesis' pytest plugin, which does not load
    # under this pytest version; each operation still gets its own Hypothesis run.
    app, auth = fuzz_app
    schema = schemathesis.openapi.from_asgi("/api/v1/openapi.json", app)
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def no_5xx(case: Any) -> None:
            if not case.path.endswith("/auth/logout"):  # which would revoke the shared token
                case.headers = {**(case.headers or {}), "Authorization": auth["Authorization"]}
            response = case.call()
            STATUSES.append(response.status_code)
            assert response.status_code < 500, (
                f"{case.method} {case.formatted_path} -> {response.status_code}: "
                f"{response.text[:300]}"
            )

        try:
            no_5xx()
        except Exception as e:  # an unhandled server error surfaces as the exception itself
            first = (str(e).splitlines() or [""])[0]
            failures.append(f"{operation.label}: {type(e).__name__}: {first}")
    assert operations >= 30, f"only {operations} operations in the schema"
    assert not failures, "\n\n".join(failures)
    # The shared token stayed valid: most cases got past authentication.
    assert sum(1 for code in STATUSES if code != 401) > len(STATUSES) // 2
