"""Rate card documents: one provider's prices per GPU model, named by their digest.

A job priced by rate card (`RateCardPrice` in `proofnet.messages.jobspec`) names a document
by its digest, so the terms are fixed once the spec is signed:

    digest = "sha256:" + hex(SHA-256(b"proofnet/rate-card/v1" || canonical JSON of the document))

The document is `{"version": 1, "provider": <worker key hex>, "ntx_per_gpu_hour": {<GPU model
as NVML names it (and the attestation carries it)>: <NTX base units per GPU-hour>}}`. Rates
are integers; metering is in GPU-milliseconds, rounded up to whole base units:

    cost = max(1, ceil(gpu_milliseconds * ntx_per_gpu_hour / 3_600_000))

(at least one base unit, because an attestation claims a positive amount), and what a worker
may claim is `min(max_amount, cost)` for the GPU model it attests, and only when the document
is its own (`provider` is its worker key): the document is one provider's offer, not a price
list anyone can invoke. The API, the worker and the oracle all price with `price_under`.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Final

from pydantic import Field, ValidationError

from proofnet.messages.attestation import GpuModel
from proofnet.messages.canonical import CanonicalJSONError, canonical_json, parse_canonical_json
from proofnet.messages.fields import Frozen, Hex64, Version1

RATE_CARD_DOMAIN: Final = b"proofnet/rate-card/v1"
RATE_CARD_VERSION: Final = 1
# Where the API serves published documents: GET {RATE_CARDS_PATH}/{digest}.
RATE_CARDS_PATH: Final = "/api/v1/rate-cards"
MS_PER_HOUR: Final = 3_600_000
MAX_GPU_MODELS: Final = 64
# Token quantities in a Cardano value are at most 2**63 - 1.
MAX_RATE: Final = 2**63 - 1

Rate = Annotated[int, Field(ge=1, le=MAX_RATE)]


class RateCardError(ValueError):
    """A rate card document is malformed, or does not price this work; the message says why."""


class RateCardDocument(Frozen):
    version: Version1 = RATE_CARD_VERSION
    # The provider's worker key (raw Ed25519, hex): the only worker that may claim under it.
    provider: Hex64
    ntx_per_gpu_hour: Annotated[
        dict[GpuModel, Rate], Field(min_length=1, max_length=MAX_GPU_MODELS)
    ]

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="python"))

    @property
    def digest(self) -> str:
        return rate_card_digest(self.canonical_bytes())

    def rate_for(self, gpu_model: str) -> int:
        rate = self.ntx_per_gpu_hour.get(gpu_model)
        if rate is None:
            known = ", ".join(sorted(self.ntx_per_gpu_hour))
            raise RateCardError(f"rate card has no rate for {gpu_model!r} (it prices {known})")
        return rate

    @classmethod
    def from_canonical(cls, data: bytes) -> RateCardDocument:
        """Parse bytes that must be exactly the canonical encoding (what the digest hashed)."""
        try:
            return cls.model_validate(parse_canonical_json(data))
        except (CanonicalJSONError, ValidationError) as exc:
            raise RateCardError(f"invalid rate card: {exc}") from exc

    @classmethod
    def from_json(cls, data: bytes | str) -> RateCardDocument:
        """Parse any JSON text (a provider's file); floats and unknown fields are refused."""
        try:
            return cls.model_validate_json(data, strict=True)
        except ValidationError as exc:
            raise RateCardError(f"invalid rate card: {exc}") from exc

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> RateCardDocument:
        try:
            return cls.model_validate(obj)
        except ValidationError as exc:
            raise RateCardError(f"invalid rate card: {exc}") from exc


def rate_card_digest(canonical: bytes) -> str:
    return "sha256:" + hashlib.sha256(RATE_CARD_DOMAIN + canonical).hexdigest()


def document_for_digest(data: bytes, digest: str) -> RateCardDocument:
    """The document in `data` (canonical bytes), refused unless it is the one `digest` names."""
    if rate_card_digest(data) != digest:
        raise RateCardError(f"the document served is not rate card {digest}")
    return RateCardDocument.from_canonical(data)


def metered_cost(gpu_milliseconds: int, ntx_per_gpu_hour: int) -> int:
    """What `gpu_milliseconds` of GPU time costs at `ntx_per_gpu_hour`, in NTX base units."""
    if gpu_milliseconds < 0:
        raise RateCardError("GPU time cannot be negative")
    return max(1, -(-gpu_milliseconds * ntx_per_gpu_hour // MS_PER_HOUR))


def price_under(
    document: RateCardDocument,
    *,
    max_amount: int,
    worker_key: str,
    gpu_model: str,
    gpu_milliseconds: int,
) -> int:
    """The amount a worker may claim for metered work under `document`, capped by the spec."""
    if document.provider != worker_key:
        raise RateCardError(
            f"rate card {document.digest} holds the prices of provider {document.provider}, "
            f"not of worker {worker_key}"
        )
    return min(max_amount, metered_cost(gpu_milliseconds, document.rate_for(gpu_model)))
