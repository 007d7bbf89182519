"""What a worker claims: the fixed price, or the metered GPU time at its own rate card's rate
for the GPU model it attests, capped; documents fetched from the API only by digest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from proofnet.messages.jobspec import JobSpec
from proofnet.messages.rate_card import RATE_CARDS_PATH, RateCardDocument
from worker.api_client import ApiClient
from worker.identity import WorkerKey, create_key
from worker.pricing import PricingError, amount_claimed, check_priceable, load_rate_card
from worker.rate_cards import RateCardBook

H200 = "NVIDIA H200"


@pytest.fixture
def key(tmp_path: Path) -> WorkerKey:
    return create_key(tmp_path / "worker.skey")


def spec(pricing: dict[str, Any], *, gpus: int = 1) -> JobSpec:
    return JobSpec.from_dict(
        {
            "model": {"repo_url": "https://example.org/train.git", "commit": "c" * 40},
            "framework": "numpy",
            "image": "python@sha256:" + "d" * 64,
            "commands": [["python", "train.py"]],
            "resources": {
                "gpus": gpus,
                "gpu_memory_mb": 1000 if gpus else 0,
                "cpus": 1,
                "ram_mb": 1024,
                "disk_mb": 1024,
                "max_duration_s": 3600,
            },
            "pricing": pricing,
            "seed": 7,
        }
    )


def rate_card_spec(card: RateCardDocument, max_amount: int = 5000, gpus: int = 1) -> JobSpec:
    return spec(
        {"kind": "rate_card", "rate_card": card.digest, "max_amount": max_amount}, gpus=gpus
    )


def test_amount_is_the_metered_cost_at_the_card_rate_capped(key: WorkerKey) -> None:
    me = key.public_key_hex
    card = RateCardDocument(provider=me, ntx_per_gpu_hour={H200: 3_600_000, "NVIDIA L4": 7})
    job = rate_card_spec(card)
    cards = {card.digest: card}
    check_priceable(job, H200, cards, me)
    assert amount_claimed(job, 1_500, H200, cards, me) == 1_500  # 1 NTX unit per GPU-ms
    assert amount_claimed(job, 10**9, H200, cards, me) == 5_000  # capped at max_amount
    # 7 units per GPU-hour: 90 minutes cost 10.5, claimed rounded up.
    assert amount_claimed(job, 5_400_000, "NVIDIA L4", cards, me) == 11
    assert amount_claimed(job, 0, H200, cards, me) == 1  # never zero: an attestation claims > 0
    with pytest.raises(PricingError, match="no rate for 'NVIDIA A100'"):
        check_priceable(job, "NVIDIA A100", cards, me)
    with pytest.raises(PricingError, match="does not hold"):
        check_priceable(job, H200, {}, me)
    # Another provider's document is not this worker's offer: the oracle would pay nothing.
    with pytest.raises(PricingError, match="not of worker"):
        check_priceable(job, H200, cards, "ef" * 32)
    fixed = spec({"kind": "fixed", "amount": 42})
    assert amount_claimed(fixed, 10**9, "CPU", {}, me) == 42
    check_priceable(fixed, "CPU", {}, me)


def test_rate_card_file_digest_is_over_the_canonical_document(
    tmp_path: Path, key: WorkerKey
) -> None:
    path = tmp_path / "card.json"
    # A hand-written file: any formatting, any key order.
    doc = {"version": 1, "provider": key.public_key_hex, "ntx_per_gpu_hour": {H200: 10}}
    path.write_text(json.dumps(doc, indent=2))
    loaded = load_rate_card(path)
    assert loaded == RateCardDocument(provider=key.public_key_hex, ntx_per_gpu_hour={H200: 10})
    path.write_text('{"version": 1, "ntx_per_gpu_hour": {"X": 10}}')
    with pytest.raises(PricingError, match="provider"):
        load_rate_card(path)
    with pytest.raises(PricingError, match="cannot read"):
        load_rate_card(tmp_path / "missing.json")


class FakeApi:
    """Serves rate card documents by digest; `serve` may substitute another document."""

    def __init__(self, documents: dict[str, bytes]) -> None:
        self.documents = documents
        self.requests: list[str] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request.url.path)
        digest = request.url.path.removeprefix(RATE_CARDS_PATH + "/")
        body = self.documents.get(digest)
        if body is None:
            return httpx.Response(404, json={"detail": f"no rate card {digest}"})
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})


def book_over(api: FakeApi, key: WorkerKey) -> RateCardBook:
    client = ApiClient("http://api.test", key, "devnet", transport=httpx.MockTransport(api.handler))
    return RateCardBook({}, client, key.public_key_hex)


def test_book_fetches_the_named_document_once_and_checks_its_digest(key: WorkerKey) -> None:
    mine = RateCardDocument(provider=key.public_key_hex, ntx_per_gpu_hour={H200: 3_600_000})
    api = FakeApi({mine.digest: mine.canonical_bytes()})
    book = book_over(api, key)
    job = rate_card_spec(mine)
    book.check(job, H200)
    assert book.amount(job, 2_000, H200) == 2_000
    assert api.requests == [f"{RATE_CARDS_PATH}/{mine.digest}"]  # then cached

    # A fixed-price job needs no document.
    assert book.amount(spec({"kind": "fixed", "amount": 9}), 0, "CPU") == 9
    assert len(api.requests) == 1


def test_book_refuses_a_substituted_or_missing_document(key: WorkerKey) -> None:
    agreed = RateCardDocument(provider=key.public_key_hex, ntx_per_gpu_hour={H200: 3_600})
    richer = RateCardDocument(provider=key.public_key_hex, ntx_per_gpu_hour={H200: 3_600_000})
    # The API answers the agreed digest with a document of higher rates.
    api = FakeApi({agreed.digest: richer.canonical_bytes()})
    with pytest.raises(PricingError, match="is not rate card"):
        book_over(api, key).check(rate_card_spec(agreed), H200)
    # Not canonical (the digest would not be its identity).
    spaced = agreed.canonical_bytes().replace(b":", b": ")
    api = FakeApi({agreed.digest: spaced})
    with pytest.raises(PricingError, match="unusable"):
        book_over(api, key).check(rate_card_spec(agreed), H200)
    with pytest.raises(PricingError, match="cannot fetch rate card"):
        book_over(FakeApi({}), key).check(rate_card_spec(agreed), H200)
    # Another provider's card, served faithfully, is still not this worker's to claim under.
    theirs = RateCardDocument(provider="ef" * 32, ntx_per_gpu_hour={H200: 3_600})
    api = FakeApi({theirs.digest: theirs.canonical_bytes()})
    with pytest.raises(PricingError, match="not of worker"):
        book_over(api, key).check(rate_card_spec(theirs), H200)


def test_book_prefers_documents_the_worker_was_started_with(key: WorkerKey) -> None:
    mine = RateCardDocument(provider=key.public_key_hex, ntx_per_gpu_hour={H200: 36})
    api = FakeApi({})
    client = ApiClient("http://api.test", key, "devnet", transport=httpx.MockTransport(api.handler))
    book = RateCardBook({mine.digest: mine}, client, key.public_key_hex)
    assert book.amount(rate_card_spec(mine), 3_600_000, H200) == 36
    assert api.requests == []
