"""Storage offers and placements through the API, played by the attacker: an offer signed
by another key, a replayed or foreign nonce, bad prices and capacities, placements beyond
what the spec asks or the provider can hold."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from nacl.signing import SigningKey

from proofnet.messages import storage as s
from tests.api.api_support import NETWORK, Wallet, Worker, job_spec

TERMS = {
    "endpoint": "http://127.0.0.1:9000",
    "bucket": "proofnet-store",
    "capacity_bytes": 10 * 2**20,
    "ntx_per_gb_month": 2_000,
}


def _nonce(provider: Worker) -> str:
    got = provider.request("POST", s.STORAGE_CHALLENGE_PATH)
    assert got.status_code == 200, got.text
    return str(got.json()["nonce"])


def _signed(key: SigningKey, nonce: str, **terms: Any) -> dict[str, Any]:
    offer = s.sign_offer(
        key,
        network=NETWORK,
        payout_address=Wallet().address,
        nonce=nonce,
        terms=s.StorageTerms.model_validate({**TERMS, **terms}),
    )
    return offer.model_dump(mode="json")


def offer_storage(provider: Worker, **terms: Any) -> Any:
    return provider.request("PUT", s.STORAGE_OFFER_PATH, _signed(provider.key, _nonce(provider), **terms))  # fmt: skip


def test_a_signed_offer_is_listed_cheapest_first(
    client: TestClient, worker_factory: Callable[[], Worker]
) -> None:
    dear, cheap = worker_factory(), worker_factory()
    assert offer_storage(dear, ntx_per_gb_month=9_000).status_code == 200
    got = offer_storage(cheap, ntx_per_gb_month=1_000)
    assert got.status_code == 200, got.text
    assert got.json()["free_bytes"] == TERMS["capacity_bytes"]
    listed = client.get(s.STORAGE_OFFERS_PATH).json()
    assert [o["provider_key"] for o in listed["data"]] == [cheap.public_key, dear.public_key]
    # Anyone can re-verify the stored offer against the provider's key.
    stored = s.StorageOffer.model_validate(listed["data"][0]["offer"])
    s.verify_offer(stored, network=NETWORK, nonce=stored.nonce, provider_pubkey=cheap.public_key)
    capped = client.get(s.STORAGE_OFFERS_PATH, params={"max_ntx_per_gb_month": 5_000}).json()
    assert capped["count"] == 1
    # Re-offering replaces the terms.
    assert offer_storage(cheap, ntx_per_gb_month=3_000).status_code == 200
    prices = {o["provider_key"]: o["ntx_per_gb_month"] for o in client.get(s.STORAGE_OFFERS_PATH).json()["data"]}  # fmt: skip
    assert prices[cheap.public_key] == 3_000


def test_an_offer_signed_by_another_key_is_refused(worker_factory: Callable[[], Worker]) -> None:
    provider = worker_factory()
    nonce = _nonce(provider)
    other = SigningKey.generate()
    got = provider.request("PUT", s.STORAGE_OFFER_PATH, _signed(other, nonce))
    assert got.status_code == 401
    assert got.json()["detail"] == "storage offer is signed by a different key than this request"


def test_a_tampered_offer_burns_its_nonce_and_a_replay_is_refused(
    worker_factory: Callable[[], Worker],
) -> None:
    provider = worker_factory()
    nonce = _nonce(provider)
    body = _signed(provider.key, nonce)
    tampered = {**body, "terms": {**body["terms"], "ntx_per_gb_month": 1}}
    refused = provider.request("PUT", s.STORAGE_OFFER_PATH, tampered)
    assert refused.status_code == 401 and "does not verify" in refused.json()["detail"]
    again = provider.request("PUT", s.STORAGE_OFFER_PATH, body)
    assert again.status_code == 401 and "already used" in again.json()["detail"]


def test_a_compute_binding_nonce_cannot_sign_a_storage_offer(
    worker_factory: Callable[[], Worker],
) -> None:
    provider = worker_factory()
    binding_nonce = provider.request("POST", "/api/v1/worker/challenge").json()["nonce"]
    got = provider.request("PUT", s.STORAGE_OFFER_PATH, _signed(provider.key, binding_nonce))
    assert got.status_code == 401 and "unknown challenge nonce" in got.json()["detail"]


def test_bad_prices_and_capacities_get_one_line_errors(
    worker_factory: Callable[[], Worker],
) -> None:
    provider = worker_factory()
    body = _signed(provider.key, _nonce(provider))
    for field, value, words in [
        ("ntx_per_gb_month", 0, "greater than or equal to 1"),
        ("ntx_per_gb_month", "12", "valid integer"),
        ("capacity_bytes", 5, "greater than or equal to 1048576"),
        ("endpoint", "http://host/x?y", "no path"),
    ]:
        bad = {**body, "terms": {**body["terms"], field: value}}
        got = provider.request("PUT", s.STORAGE_OFFER_PATH, bad)
        assert got.status_code == 422, got.text
        assert words in str(got.json()), (field, got.json())
    unsigned = provider.request("PUT", s.STORAGE_OFFER_PATH, body, **{"X-Proofnet-Signature": "00" * 64})  # fmt: skip
    assert unsigned.status_code == 401


STORAGE = {
    "kinds": ["results"],
    "replicas": 2,
    "term_days": 30,
    "max_ntx_per_gb_month": 5_000,
    "budget": 100_000,
}


def _job(client: TestClient, auth: dict[str, str], **storage: Any) -> str:
    spec = job_spec()
    spec["results"] = [{"path": "out/*.json", "kind": "json"}]
    spec["storage"] = {**STORAGE, **storage}
    posted = client.post("/api/v1/jobs", json={"spec": spec}, headers=auth)
    assert posted.status_code in (200, 201), posted.text
    return str(posted.json()["job_id"])


def _placement(job_id: str, provider: Worker, *, size: int = 4096, root: str = "ab" * 32, kind: str = "results") -> dict[str, Any]:  # fmt: skip
    return {
        "job_id": job_id,
        "kind": kind,
        "object_key": f"jobs/{job_id}/results/out.json",
        "provider_key": provider.public_key,
        "commitment": {"content_root": root, "size": size, "chunk_size": 1024},
    }


def test_placements_follow_the_spec_and_the_providers_capacity(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, auth = approved
    job_id = _job(client, auth)
    a, b, c, dear = (worker_factory() for _ in range(4))
    for p in (a, b, c):
        assert offer_storage(p).status_code == 200
    assert offer_storage(dear, ntx_per_gb_month=9_000).status_code == 200

    def place(body: dict[str, Any]) -> Any:
        return client.post("/api/v1/storage/placements", json=body, headers=auth)

    first = place(_placement(job_id, a))
    assert first.status_code == 200, first.text
    assert first.json()["ntx_per_gb_month"] == 2_000
    # The spec caps the price: a dearer provider is refused.
    refused = place(_placement(job_id, dear))
    assert refused.status_code == 400 and "max_ntx_per_gb_month 5000" in refused.json()["detail"]
    # A second copy under another root is not a copy.
    other_root = place(_placement(job_id, b, root="cd" * 32))
    assert other_root.status_code == 400 and "another content root" in other_root.json()["detail"]
    # More than the provider has free.
    too_big = place(_placement(job_id, b, size=11 * 2**20))
    assert too_big.status_code == 400 and "bytes free" in too_big.json()["detail"]
    # A kind the spec does not place.
    data = place(_placement(job_id, b, kind="data"))
    assert data.status_code == 400 and "not 'data'" in data.json()["detail"]
    assert place(_placement(job_id, b)).status_code == 200
    # k = 2 copies: a third is refused.
    third = place(_placement(job_id, c))
    assert third.status_code == 409 and "2 copies" in third.json()["detail"]
    listed = client.get("/api/v1/storage/placements", params={"job_id": job_id}).json()
    assert {p["provider_key"] for p in listed["data"]} == {a.public_key, b.public_key}
    # Held bytes count against the offer's free capacity.
    offers = {o["provider_key"]: o for o in client.get(s.STORAGE_OFFERS_PATH).json()["data"]}
    assert offers[a.public_key]["held_bytes"] == 4096
    # A provider cannot shrink its capacity under what it holds.
    shrink = offer_storage(a, capacity_bytes=2**20 + 1)
    assert shrink.status_code == 200  # 4096 bytes held fit in 1 MiB + 1
    assert client.get(s.STORAGE_OFFERS_PATH).json()["data"][0]["free_bytes"] >= 0


def test_only_the_owner_places_and_only_for_a_spec_that_asks(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    seniors: list[Wallet],
) -> None:
    from tests.api.api_support import sign_in

    _, auth = approved
    provider = worker_factory()
    assert offer_storage(provider).status_code == 200
    job_id = _job(client, auth)
    stranger = sign_in(client, seniors[0])
    got = client.post("/api/v1/storage/placements", json=_placement(job_id, provider), headers=stranger)  # fmt: skip
    assert got.status_code == 403
    plain = client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=auth).json()["job_id"]
    got = client.post("/api/v1/storage/placements", json=_placement(plain, provider), headers=auth)
    assert got.status_code == 400 and "places no storage" in got.json()["detail"]
    unknown = client.post("/api/v1/storage/placements", json=_placement(job_id, worker_factory()), headers=auth)  # fmt: skip
    assert unknown.status_code == 404 and "no storage offer" in unknown.json()["detail"]


ORACLE = SigningKey.generate()


@pytest.fixture
def config(make_config: Callable[..., Any]) -> Any:
    return make_config(oracle_keys=(bytes(ORACLE.verify_key).hex(),))


def test_accrual_reports_only_grow_stay_in_budget_and_come_from_oracles(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: Any,
) -> None:
    _, auth = approved
    job_id = _job(client, auth, budget=1_000)
    a, b = worker_factory(), worker_factory()
    ids = []
    for p in (a, b):
        assert offer_storage(p).status_code == 200
        placed = client.post("/api/v1/storage/placements", json=_placement(job_id, p), headers=auth)
        ids.append(placed.json()["id"])
    oracle = Worker(client, key=ORACLE, clock=clock)
    when = clock().isoformat()

    def report(placement_id: int, amount: int, by: Worker = oracle, at: str = when) -> Any:
        body = {"accrued_ntx": amount, "paid_through": at, "challenges_passed": 1}
        return by.request("POST", f"/api/v1/oracle/storage/placements/{placement_id}/accrual", body)  # fmt: skip

    assert report(ids[0], 600).status_code == 200
    # A provider (or anyone not listed as an oracle) cannot report its own earnings.
    assert report(ids[1], 10, by=b).status_code == 403
    # Earnings never shrink ...
    back = report(ids[0], 100)
    assert back.status_code == 409 and "take earnings back" in back.json()["detail"]
    # ... and all copies of the job together stay within its storage budget.
    over = report(ids[1], 401)
    assert over.status_code == 400 and "storage budget 1000" in over.json()["detail"]
    assert report(ids[1], 400).status_code == 200
    late = report(ids[1], 400, at=(clock() + timedelta(days=31)).isoformat())
    assert late.status_code == 400 and "after the term's end" in late.json()["detail"]
    earned = client.get(f"/api/v1/storage/earnings/{a.public_key}").json()
    assert earned["accrued_ntx"] == 600 and earned["payout_address"].startswith("addr_test1")


def test_only_an_oracle_marks_a_copy_failed_and_the_replacement_keeps_the_root(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: Any,
) -> None:
    _, auth = approved
    job_id = _job(client, auth)
    a, c = worker_factory(), worker_factory()
    for p in (a, c):
        assert offer_storage(p).status_code == 200
    placed = client.post("/api/v1/storage/placements", json=_placement(job_id, a), headers=auth)
    pid = placed.json()["id"]
    path = f"/api/v1/oracle/storage/placements/{pid}/failed"
    body = {
        "reason": "chunk 3 did not verify",
        "replacement": {
            "provider_key": c.public_key,
            "commitment": {"content_root": "ef" * 32, "size": 4096, "chunk_size": 1024},
        },
    }
    assert a.request("POST", path, body).status_code == 403
    oracle = Worker(client, key=ORACLE, clock=clock)
    wrong_root = oracle.request("POST", path, body)
    assert wrong_root.status_code == 400 and "another content root" in wrong_root.json()["detail"]
    body["replacement"]["commitment"]["content_root"] = "ab" * 32  # type: ignore[index]
    done = oracle.request("POST", path, body)
    assert done.status_code == 200, done.text
    assert done.json()["failed"]["status"] == "failed"
    again = oracle.request("POST", path, body)
    assert again.status_code == 409 and "already failed" in again.json()["detail"]


def test_a_copy_placed_after_the_jobs_escrow_was_spent_is_refused(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
    session: Any,
    clock: Any,
) -> None:
    """A copy is paid from its job's escrow in the settlement: once the chain watcher saw
    that escrow spent, a new copy would be held for nothing, so it is refused. The honest
    twin: the same placement while the escrow is unspent is accepted."""
    from tests.api.escrow_support import ESCROW_TX, record_escrow
    from tests.api.movement_support import add_movement

    _, auth = approved
    job_id = _job(client, auth)
    a, b = worker_factory(), worker_factory()
    for p in (a, b):
        assert offer_storage(p).status_code == 200
    record_escrow(session, job_id, clock, deadline_in_s=3600)
    placed = client.post("/api/v1/storage/placements", json=_placement(job_id, a), headers=auth)
    assert placed.status_code == 200, placed.text
    add_movement(
        session, address="addr_test1", ntx=1, tx_hash="aa" * 32, job_id=job_id,
        escrow=(ESCROW_TX, 0),
    )  # fmt: skip
    late = client.post("/api/v1/storage/placements", json=_placement(job_id, b), headers=auth)
    assert late.status_code == 409 and "already spent" in late.json()["detail"]
