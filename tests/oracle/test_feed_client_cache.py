"""The oracle's feed client keeps final answers (a worker's payout binding, a finished job)
for `ttl_s` at most, in a bounded cache: within the TTL the API is not asked again, after
it it is, and a flood of made-up keys never holds more than `cache_size` entries."""

from __future__ import annotations

import httpx
from nacl.signing import SigningKey
from oracle_fixtures import NETWORK, signed_binding

from oracle.intake.feed_client import HttpApiFeed
from proofnet.messages.address import enterprise_address


class Tick:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class WorkerFeed:
    """Answers `GET /api/v1/oracle/workers/{key}` with a signed binding; counts asks."""

    def __init__(self) -> None:
        self.asks: list[str] = []
        self.keys: dict[str, dict[str, object]] = {}

    def add(self) -> str:
        worker = SigningKey.generate()
        key = bytes(worker.verify_key).hex()
        payout = enterprise_address(bytes(SigningKey.generate().verify_key), NETWORK)
        binding = signed_binding(worker, payout)
        self.keys[key] = {
            "worker_key": key,
            "payout_address": payout,
            "binding": binding.model_dump(mode="json"),
        }
        return key

    def __call__(self, request: httpx.Request) -> httpx.Response:
        key = request.url.path.rsplit("/", 1)[-1]
        self.asks.append(key)
        return httpx.Response(200, json=self.keys[key])


def _feed(api: WorkerFeed, tick: Tick, **kw: object) -> HttpApiFeed:
    client = httpx.Client(base_url="http://api.test", transport=httpx.MockTransport(api))
    return HttpApiFeed(
        "http://api.test", SigningKey.generate(), NETWORK, client=client, clock=tick, **kw
    )


def test_a_worker_binding_is_asked_once_per_ttl() -> None:
    api, tick = WorkerFeed(), Tick()
    key = api.add()
    feed = _feed(api, tick, ttl_s=30.0)
    first = feed.worker(key)
    assert first is not None and feed.worker(key) == first
    tick.t += 29.9
    assert feed.worker(key) == first
    assert api.asks == [key]  # served from the cache within the TTL
    tick.t += 0.1
    assert feed.worker(key) == first
    assert api.asks == [key, key]  # expired: asked again


def test_the_cache_stays_bounded_under_many_keys() -> None:
    api, tick = WorkerFeed(), Tick()
    keys = [api.add() for _ in range(12)]
    feed = _feed(api, tick, ttl_s=3600.0, cache_size=4)
    for key in keys:
        assert feed.worker(key) is not None
    assert len(feed._cache) == 4
    # The oldest were dropped (asked again); the newest are still served from the cache.
    feed.worker(keys[-1])
    feed.worker(keys[0])
    assert api.asks == [*keys, keys[0]]
