"""Property-based fuzzing of every oracle operation from its own OpenAPI schema (intake
reads, escrow look-ups, bundles, the co-signing route, metrics): whatever schemathesis
sends, the oracle never answers 5xx, and every documented answer conforms to its schema
(`tests/fuzzing.py`). The oracle runs on an honest world with one verified attestation,
so look-ups by id can hit something."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from escrow_chain import deployment
from fastapi.testclient import TestClient
from fuzzing import fuzz_app
from oracle_fixtures import make_world
from pycardano import PaymentSigningKey
from settlement_fixtures import FakeChain

from oracle.app import create_app
from oracle.settlement.quorum import CoSigner, IntakeVerifier
from oracle.settlement.service import settlement_extensions
from proofnet.settings import build_settings

EXAMPLES = 40


@pytest.fixture(scope="module")
def oracle_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    world = make_world()
    settings = build_settings()
    hooks, routers = settlement_extensions(settings, None, None)  # type: ignore[arg-type]
    db = Path(tmp_path_factory.mktemp("oracle-fuzz")) / "oracle.db"
    app = create_app(
        settings,
        context=world.context(),
        database_url=f"sqlite:///{db}",
        inline=True,
        sweep_interval_s=3600,
        lifespan_hooks=hooks,
        routers=routers,
    )
    # A co-signer over an empty chain: whatever is sent to sign is refused (4xx), never
    # answered with 5xx.
    deployed = deployment()
    app.state.settlement_cosigner = CoSigner(
        deployed, FakeChain(), PaymentSigningKey.generate(), IntakeVerifier(app.state.context)
    )
    # Configured as a served co-signer is: it publishes the deployment it signs for (an
    # oracle without one answers 503 naming the setting: test_oracle_deployment_route.py).
    app.state.deployment = deployed
    with TestClient(app) as client:
        posted = client.post(
            "/api/v1/attestations",
            content=world.sign(),
            headers={"content-type": "application/cose"},
        )
        assert posted.status_code == 202, posted.text
        yield app


@pytest.mark.slow
def test_no_operation_answers_5xx_or_off_schema(oracle_app: Any) -> None:
    report = fuzz_app(oracle_app, "/openapi.json", examples=EXAMPLES)
    assert report.operations >= 6, f"only {report.operations} operations in the schema"
    assert not report.failures, "\n\n".join(report.failures)
