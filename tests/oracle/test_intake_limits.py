"""What a stranger can make the oracle store or fetch: nothing from an unregistered key,
nothing oversized, and nothing past the per-key and per-address rates; public escrow
look-ups are rate limited per address and cached in bounded memory.

Each attack has its honest twin: a registered worker's attestation of ordinary size, and
a look-up within the rate."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from nacl.signing import SigningKey
from oracle_fixtures import World, make_world

from oracle.app import create_app
from oracle.inputs.chain import BlockfrostChainView
from oracle.inputs.feed import FeedError, WorkerInfo
from oracle.settlement.service import settlement_extensions
from oracle.storage.store import AttestationStore
from proofnet.limits import TokenBuckets
from proofnet.messages.attestation import EscrowRef
from proofnet.messages.escrow_info import escrow_path
from proofnet.settings import Settings

COSE = {"content-type": "application/cose"}
PATH = "/api/v1/attestations"


def _client(world: World, tmp_path: Path, **settings: object) -> Iterator[TestClient]:
    served = Settings(**settings)  # type: ignore[arg-type]
    hooks, routers = settlement_extensions(served, None, None)  # type: ignore[arg-type]
    app = create_app(
        served,
        context=world.context(),
        database_url=f"sqlite:///{tmp_path / 'oracle.db'}",
        inline=True,
        sweep_interval_s=3600,
        lifespan_hooks=hooks,
        routers=routers,
    )
    with TestClient(app) as client:
        yield client


def _stored(client: TestClient) -> int:
    store: AttestationStore = client.app.state.store  # type: ignore[attr-defined]
    return sum(store.count_by_status().values())


@pytest.fixture
def world() -> World:
    return make_world()


@pytest.fixture
def client(world: World, tmp_path: Path) -> Iterator[TestClient]:
    yield from _client(world, tmp_path)


def test_an_unregistered_key_stores_nothing(world: World, client: TestClient) -> None:
    """The attack: a fresh key signs a well-formed attestation (about anything) and posts
    it; before, the oracle stored it and only then found the worker unknown."""
    stranger = SigningKey.generate()
    forged = world.variant(worker_key=bytes(stranger.verify_key).hex())
    refused = client.post(PATH, content=world.sign(forged, stranger), headers=COSE)
    assert refused.status_code == 403, refused.text
    assert refused.json()["reason"] == "worker_unregistered"
    assert _stored(client) == 0
    honest = client.post(PATH, content=world.sign(), headers=COSE)
    assert honest.status_code == 202, honest.text
    assert _stored(client) == 1


def test_registration_unknown_means_retry_not_store(world: World, client: TestClient) -> None:
    class DownFeed(type(world.feed)):  # type: ignore[misc]
        def worker(self, worker_key: str) -> WorkerInfo | None:
            raise FeedError("API down")

    client.app.state.intake.ctx = world.context(feed=DownFeed())  # type: ignore[attr-defined]
    response = client.post(PATH, content=world.sign(), headers=COSE)
    assert response.status_code == 503 and _stored(client) == 0


def test_an_oversized_attestation_is_refused_unread(world: World, tmp_path: Path) -> None:
    """The attack: 256 result names of 512 characters, a wire-valid attestation of about
    140 KB, every time. The limit is a setting; the honest attestation is a few KB."""
    names = {f"{i:03d}-" + "x" * 508: "e" * 64 for i in range(256)}
    bloated = world.sign(world.variant(result_hashes=names))
    assert len(bloated) > 128 * 1024
    for client in _client(world, tmp_path):
        response = client.post(PATH, content=bloated, headers=COSE)
        assert response.status_code == 413, response.text
        assert _stored(client) == 0
        assert client.post(PATH, content=world.sign(), headers=COSE).status_code == 202


def test_one_worker_key_is_rate_limited(world: World, tmp_path: Path) -> None:
    """The attack: a registered worker floods the oracle with distinct attestations (each a
    new row). Beyond its per-minute rate it gets 429 and nothing is stored."""
    for client in _client(world, tmp_path, oracle_attestations_per_minute_per_key=3):
        statuses = [
            client.post(
                PATH,
                content=world.sign(world.variant(nonce=secrets.token_hex(16))),
                headers=COSE,
            ).status_code
            for _ in range(5)
        ]
        assert statuses[:3] == [202, 202, 202] and statuses[3:] == [429, 429], statuses
        assert _stored(client) == 3


def test_one_address_is_rate_limited(world: World, tmp_path: Path) -> None:
    """The attack: many keys from one address (each refused or not, each costs a check)."""
    for client in _client(world, tmp_path, oracle_attestations_per_minute_per_address=2):
        statuses = [client.post(PATH, content=b"\xa0", headers=COSE).status_code for _ in range(3)]
        assert statuses == [422, 422, 429], statuses
        assert "retry-after" in client.post(PATH, content=b"", headers=COSE).headers


def test_public_escrow_lookups_are_rate_limited(world: World, tmp_path: Path) -> None:
    """The attack: ask for made-up escrow ids as fast as possible, each one a chain-backend
    call. Within the rate, honest look-ups answer."""
    for client in _client(world, tmp_path, oracle_escrow_lookups_per_minute_per_address=2):
        ours = escrow_path(world.escrow.tx_id, world.escrow.index)
        assert client.get(ours).status_code == 200
        assert client.get(escrow_path(secrets.token_hex(32), 0)).status_code == 404
        limited = client.get(ours)
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1


class _CountingApi:
    def __init__(self) -> None:
        self.calls = 0

    def transaction_utxos(self, hash: str, return_type: str = "json") -> dict[str, object]:
        self.calls += 1
        return {"outputs": []}


class _Context:
    def __init__(self) -> None:
        self.api = _CountingApi()


def test_the_chain_cache_is_bounded() -> None:
    """Made-up ids evict old entries instead of growing the cache; a known id within its
    TTL costs no second backend call."""
    context = _Context()
    view = BlockfrostChainView(context, ttl_s=60, cache_size=8)
    first = EscrowRef(tx_id="ab" * 32, index=0)
    view.escrow_output(first)
    view.escrow_output(first)
    assert context.api.calls == 1
    for _ in range(100):
        view.escrow_output(EscrowRef(tx_id=secrets.token_hex(32), index=0))
    assert len(view._cache) <= 8


def test_token_buckets_refill_and_stay_bounded() -> None:
    now = [0.0]
    buckets = TokenBuckets(60, max_keys=4, clock=lambda: now[0])
    assert buckets.take("a") == 0.0
    for _ in range(59):
        assert buckets.take("a") == 0.0
    assert buckets.take("a") > 0  # the burst is spent
    now[0] += 1.0  # one token a second
    assert buckets.take("a") == 0.0
    for i in range(100):
        buckets.take(f"flood-{i}")
    assert len(buckets) <= 4


def test_hostile_json_and_huge_ids_get_4xx(client: TestClient) -> None:
    """The attacks: JSON nested past the parser's recursion limit on the co-signing route,
    an integer past 64 bits in it or in an attestation id; each was a 500. Honest twins:
    a well-formed body is answered by the route itself, a real id is found."""
    deep = b'{"tx_cbor":' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    headers = {"content-type": "application/json"}
    for body in (deep, b'{"tx_cbor": "00", "bundle": 123456789012345678901234567890}'):
        response = client.post("/api/v1/quorum/sign", content=body, headers=headers)
        assert response.status_code == 400, response.text
    # Past the JSON checks, the route answers for itself (this oracle does not co-sign).
    honest = client.post("/api/v1/quorum/sign", json={"tx_cbor": "00", "bundle": "{}"})
    assert honest.status_code == 503 and "co-sign" in honest.text
    assert client.get(f"{PATH}/{2**70}").status_code == 422
    assert client.get(f"{PATH}/1").status_code == 404
