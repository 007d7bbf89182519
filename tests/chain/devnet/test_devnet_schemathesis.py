"""Property-based fuzzing of every devnet REST operation from its own OpenAPI schema (the
Blockfrost subset, the explorer, the admin endpoints): whatever schemathesis sends, the
devnet never answers 5xx, and every documented answer conforms to its schema
(`tests/fuzzing.py`). The ledger holds the server scenario's transactions, so look-ups by
hash can hit something."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import server_scenario
from fake_ledger import FakeLedger
from fastapi.testclient import TestClient
from fuzzing import fuzz_app

from chain.devnet.server import API_PREFIX, create_app

EXAMPLES = 25


@pytest.fixture(scope="module")
def devnet_app() -> Iterator[Any]:
    ledger = FakeLedger()
    # Faults on: their admin endpoints are in the schema too (no token, as in local use).
    app = create_app(ledger, enable_faults=True, admin_token=None)
    with TestClient(app) as client:

        def submit(tx: bytes) -> str:
            r = client.post(
                f"{API_PREFIX}/tx/submit", content=tx, headers={"Content-Type": "application/cbor"}
            )
            assert r.status_code == 200, r.text
            return str(r.json())

        server_scenario.build(ledger, submit=submit)
        yield app


def _destructive(operation: Any) -> bool:
    # Rollback and pause change what later cases see; they are tested by their own tests.
    return "/admin/" in operation.path and operation.method.upper() == "POST"


@pytest.mark.slow
def test_no_operation_answers_5xx_or_off_schema(devnet_app: Any) -> None:
    report = fuzz_app(
        devnet_app, f"{API_PREFIX}/openapi.json", examples=EXAMPLES, skip=_destructive
    )
    assert report.operations >= 20, f"only {report.operations} operations in the schema"
    assert not report.failures, "\n\n".join(report.failures)
