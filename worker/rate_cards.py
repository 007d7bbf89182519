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

from proofnet.messages.auction import AuctionError, clear, parse_revealed
from proofnet.messages.jobspec import AuctionPrice, JobSpec, RateCardPrice
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
        # Clearing prices of auctions this worker won, by job id (final once cleared).
        self._prices: dict[str, int] = {}
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

    def auction_price(self, spec: JobSpec) -> int:
        """What this worker is paid for an auction-priced job: the clearing price it
        recomputes from the signed bids the API publishes, and only if it won."""
        pricing = spec.pricing
        assert isinstance(pricing, AuctionPrice)
        job_id = spec.job_id
        with self._lock:
            if job_id in self._prices:
                return self._prices[job_id]
        try:
            state = self._api.auction(job_id)
            if state.get("phase") != "cleared":
                # Bids still being revealed could change the outcome: no price yet.
                raise PricingError(f"the auction of job {job_id} has not cleared yet")
            bids = tuple(parse_revealed(b) for b in state.get("bids") or ())
            outcome = clear(
                job_id=job_id,
                reserve=pricing.reserve,
                bids=bids,
                commitments=tuple(state.get("commitment_list") or ()),
            )
        except ApiClientError as e:
            raise PricingError(f"cannot read the auction of job {job_id}: {e}") from e
        except AuctionError as e:
            raise PricingError(f"the API's auction record of job {job_id} is invalid: {e}") from e
        if outcome.winner != self._worker_key or outcome.price is None:
            raise PricingError(f"this worker did not win the auction of job {job_id}")
        with self._lock:
            self._prices[job_id] = outcome.price
            while len(self._prices) > MAX_CACHED:
                self._prices.pop(next(iter(self._prices)))
        return outcome.price

    def cards_for(self, spec: JobSpec) -> Mapping[str, RateCardDocument]:
        if not isinstance(spec.pricing, RateCardPrice):
            return {}
        digest = spec.pricing.rate_card
        return {digest: self.document(digest)}

    def check(self, spec: JobSpec, gpu_model: str) -> None:
        """PricingError unless this worker can be paid for `spec` on `gpu_model`."""
        if isinstance(spec.pricing, AuctionPrice):
            self.auction_price(spec)
            return
        check_priceable(spec, gpu_model, self.cards_for(spec), self._worker_key)

    def amount(self, spec: JobSpec, gpu_milliseconds: int, gpu_model: str) -> int:
        """Exactly what the oracle will allow for this metered work."""
        if isinstance(spec.pricing, AuctionPrice):
            return self.auction_price(spec)
        return amount_claimed(
            spec, gpu_milliseconds, gpu_model, self.cards_for(spec), self._worker_key
        )
