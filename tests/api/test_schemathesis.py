"""Property-based fuzzing of every API operation from the app's own OpenAPI schema:
whatever schemathesis sends (valid or not, signed in or not), the API never answers 5xx,
and every documented answer conforms to its schema (`tests/fuzzing.py`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_support import FakeClock, Wallet, Worker, job_spec, sign_in
from fastapi.testclient import TestClient
from fuzzing import fuzz_app as fuzz_app_schema

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chain" / "offchain"))

from protocol_fixtures import protocol_world  # noqa: E402

from api.app import create_app
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.migrate import upgrade_head
from api.services.users import add_senior
from proofnet.settings import build_settings

EXAMPLES = 50


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


@pytest.mark.slow
def test_no_operation_answers_5xx_or_off_schema(fuzz_app: tuple[Any, dict[str, str]]) -> None:
    app, auth = fuzz_app

    def signed_in(case: Any) -> None:
        if not case.path.endswith("/auth/logout"):  # which would revoke the shared token
            case.headers = {**(case.headers or {}), "Authorization": auth["Authorization"]}

    report = fuzz_app_schema(app, "/api/v1/openapi.json", examples=EXAMPLES, prepare=signed_in)
    assert report.operations >= 30, f"only {report.operations} operations in the schema"
    assert not report.failures, "\n\n".join(report.failures)
    # The shared token stayed valid: most cases got past authentication.
    statuses = report.statuses
    assert sum(1 for code in statuses if code != 401) > len(statuses) // 2
