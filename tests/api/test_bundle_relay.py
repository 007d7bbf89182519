"""`GET /api/v1/bundles/{sha256}` on the API: relayed from the oracles, and only bytes that
hash to the asked SHA-256. A lying oracle is skipped (and never cached), one that is down
does not hide an honest one, and with no honest answer the API says so instead of
relaying a forgery."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from fastapi import FastAPI, Response
from fastapi.testclient import TestClient

from api.services.bundles import BundleRelay
from chain.devnet.testing import serve_app

BODY = b'{"attestations":[],"merkle_root":"' + b"00" * 32 + b'","version":1}'
SHA = hashlib.sha256(BODY).hexdigest()


def _oracle(bodies: dict[str, bytes]) -> FastAPI:
    app = FastAPI()

    @app.get("/api/v1/bundles/{sha256}")
    def bundle(sha256: str) -> Response:
        if sha256 not in bodies:
            return Response(status_code=404)
        return Response(bodies[sha256], media_type="application/json")

    return app


@pytest.fixture
def oracles() -> Iterator[tuple[str, str]]:
    """An honest oracle and one serving other bytes under the same hash."""
    with (
        serve_app(_oracle({SHA: BODY})) as honest,
        serve_app(_oracle({SHA: BODY.replace(b"00", b"11", 1)})) as liar,
    ):
        yield honest, liar


def test_the_api_relays_only_the_bytes_the_hash_names(
    client: TestClient, oracles: tuple[str, str]
) -> None:
    honest, liar = oracles
    down = "http://127.0.0.1:9"  # nothing listens on the discard port
    client.app.state.bundle_relay = BundleRelay([liar, down, honest])  # type: ignore[attr-defined]
    response = client.get(f"/api/v1/bundles/{SHA}")  # no credentials: public
    assert response.status_code == 200 and response.content == BODY
    assert "immutable" in response.headers["cache-control"]
    assert client.get(f"/api/v1/bundles/{'ab' * 32}").status_code == 503  # liar, down: unsure
    assert client.get("/api/v1/bundles/not-a-hash").status_code == 422


def test_a_lying_oracle_alone_is_not_relayed(client: TestClient, oracles: tuple[str, str]) -> None:
    honest, liar = oracles
    relay = BundleRelay([liar])
    client.app.state.bundle_relay = relay  # type: ignore[attr-defined]
    response = client.get(f"/api/v1/bundles/{SHA}")
    assert response.status_code == 503 and "do not hash to" in response.json()["detail"]
    # Nothing of the lie was kept: once an honest oracle answers, the right bytes come.
    relay.oracle_urls = (liar, honest)
    assert client.get(f"/api/v1/bundles/{SHA}").content == BODY
    # Every oracle answering "none": 404.
    relay.oracle_urls = (honest,)
    assert client.get(f"/api/v1/bundles/{'cd' * 32}").status_code == 404
