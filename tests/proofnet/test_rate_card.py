"""Rate card documents: canonical bytes, a domain-tagged digest, and the one metering rule the
worker and the oracle share."""

from __future__ import annotations

import hashlib

import pytest

from proofnet.messages.rate_card import (
    RATE_CARD_DOMAIN,
    RateCardDocument,
    RateCardError,
    document_for_digest,
    metered_cost,
    price_under,
)

PROVIDER = "ab" * 32
H100 = "NVIDIA H100 80GB HBM3"


def card(**rates: int) -> RateCardDocument:
    return RateCardDocument(provider=PROVIDER, ntx_per_gpu_hour=rates or {H100: 3_600_000})


def test_digest_is_over_the_domain_tag_and_the_canonical_bytes() -> None:
    doc = card()
    assert doc.canonical_bytes() == (
        b'{"ntx_per_gpu_hour":{"NVIDIA H100 80GB HBM3":3600000},'
        b'"provider":"' + PROVIDER.encode() + b'","version":1}'
    )
    assert (
        doc.digest
        == "sha256:" + hashlib.sha256(b"proofnet/rate-card/v1" + doc.canonical_bytes()).hexdigest()
    )
    assert RATE_CARD_DOMAIN == b"proofnet/rate-card/v1"
    # Any spelling of the same document (a provider's hand-written file) has one digest.
    loose = b'{ "version": 1, "provider": "%s",\n "ntx_per_gpu_hour": {"%s": 3600000} }' % (
        PROVIDER.encode(),
        H100.encode(),
    )
    assert RateCardDocument.from_json(loose).digest == doc.digest
    # Other rates or another provider: another document.
    assert card(**{H100: 3_600_001}).digest != doc.digest
    other = RateCardDocument(provider="cd" * 32, ntx_per_gpu_hour={H100: 3_600_000})
    assert other.digest != doc.digest


def test_received_bytes_must_be_canonical_and_the_named_document() -> None:
    doc = card()
    assert document_for_digest(doc.canonical_bytes(), doc.digest) == doc
    with pytest.raises(RateCardError, match="not rate card"):
        document_for_digest(card(**{H100: 1}).canonical_bytes(), doc.digest)
    spaced = doc.canonical_bytes().replace(b",", b", ")
    with pytest.raises(RateCardError, match="canonical"):
        RateCardDocument.from_canonical(spaced)


@pytest.mark.parametrize(
    "raw",
    [
        {"provider": PROVIDER, "ntx_per_gpu_hour": {}},  # prices nothing
        {"provider": PROVIDER, "ntx_per_gpu_hour": {H100: 0}},  # free is not a rate
        {"provider": PROVIDER, "ntx_per_gpu_hour": {H100: 2**63}},  # above any token quantity
        {"provider": PROVIDER, "ntx_per_gpu_hour": {"GPU \u00e9": 1}},  # not attestable
        {"provider": PROVIDER[:-2], "ntx_per_gpu_hour": {H100: 1}},
        {"version": 2, "provider": PROVIDER, "ntx_per_gpu_hour": {H100: 1}},
        {"provider": PROVIDER, "ntx_per_gpu_hour": {H100: 1}, "discount": 5},
        {"provider": PROVIDER, "ntx_per_gpu_hour": {H100: 1.5}},
    ],
)
def test_malformed_documents_are_refused(raw: dict[str, object]) -> None:
    with pytest.raises(RateCardError, match="invalid rate card"):
        RateCardDocument.from_dict(raw)


def test_metering_rounds_up_per_gpu_millisecond_with_a_one_unit_floor() -> None:
    assert metered_cost(3_600_000, 7) == 7  # one GPU-hour
    assert metered_cost(1, 3_600_000) == 1  # 1 unit per GPU-ms
    assert metered_cost(1_000, 3_600) == 1
    assert metered_cost(1_001, 3_600) == 2  # rounds up
    assert metered_cost(0, 3_600) == 1  # an attestation claims at least one unit
    assert metered_cost(10**12, 2**63 - 1) == -(-(10**12) * (2**63 - 1) // 3_600_000)
    with pytest.raises(RateCardError):
        metered_cost(-1, 1)


def test_price_under_is_the_providers_own_rate_for_the_model_capped() -> None:
    doc = card(**{H100: 3_600_000, "NVIDIA L4": 360_000})

    def price(gpu_model: str, max_amount: int = 10**6, worker_key: str = PROVIDER) -> int:
        return price_under(
            doc,
            max_amount=max_amount,
            worker_key=worker_key,
            gpu_model=gpu_model,
            gpu_milliseconds=1_500,
        )

    assert price(H100) == 1_500
    assert price("NVIDIA L4") == 150
    assert price(H100, max_amount=1_000) == 1_000
    with pytest.raises(RateCardError, match="no rate for 'NVIDIA A100'"):
        price("NVIDIA A100")
    with pytest.raises(RateCardError, match="not of worker"):
        price(H100, worker_key="cd" * 32)
