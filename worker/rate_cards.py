"""The rate card documents a worker prices by: the ones it was started with, and the ones the
API publishes, fetched by digest when a claimed job names one.

The API cannot change the terms: the spec (which hashes to the job id) names the document by
its digest, and a fetched document is refused unless it hashes to that digest. Documents
are immutable, so a fetched one is kept (a bounded cache) for the job's whole run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from urllib.parse import quote

from proofnet.messages.jobspec import FixedPrice, JobSpec
from proofnet.messages.rate_card import (
    RATE_CARDS_PATH,
    RateCardDocument,
    RateCardError,
    document_for_digest,
)
from worker.api_client import ApiClient, ApiClientError
from worker.pricing import PricingError, amount_claimed, check_priceable

MAX_CACHED = 256


class RateCardBook:
    def __init__(
        self, held: Mapping[str, RateCardDocument], api: ApiClient, worker_key: str
    ) -> None:
        self._held = dict(held)
        self._api = api
        self._worker_key = worker_key
        self._fetched: OrderedDict[str, RateCardDocument] = OrderedDict()
        self._lock = threading.Lock()

    def document(self, digest: str) -> RateCardDocument:
        """The document `digest` names, from those held or else from the API."""
        held = self._held.get(digest)
        if held is not None:
            return held
        with self._lock:
            if digest in self._fetched:
                self._fetched.move_to_end(digest)
                return self._fetched[digest]
        try:
            response = self._api.request("GET", f"{RATE_CARDS_PATH}/{quote(digest, safe=':')}")
        except ApiClientError as e:
            raise PricingError(f"cannot fetch rate card {digest} from the API: {e}") from e
        try:
            document = document_for_digest(response.content, digest)
        except RateCardError as e:
            raise PricingError(f"the API's rate card {digest} is unusable: {e}") from e
        with self._lock:
            self._fetched[digest] = document
            while len(self._fetched) > MAX_CACHED:
                self._fetched.popitem(last=False)
        return document

    def cards_for(self, spec: JobSpec) -> Mapping[str, RateCardDocument]:
        if isinstance(spec.pricing, FixedPrice):
            return {}
        digest = spec.pricing.rate_card
        return {digest: self.document(digest)}

    def check(self, spec: JobSpec, gpu_model: str) -> None:
        """PricingError unless this worker can be paid for `spec` on `gpu_model`."""
        check_priceable(spec, gpu_model, self.cards_for(spec), self._worker_key)

    def amount(self, spec: JobSpec, gpu_milliseconds: int, gpu_model: str) -> int:
        """Exactly what the oracle will allow for this metered work."""
        return amount_claimed(
            spec, gpu_milliseconds, gpu_model, self.cards_for(spec), self._worker_key
        )
