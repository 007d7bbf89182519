"""Onboarding a storage provider: check the endpoint serves what challenges read, then sign
and publish the offer.

The check is the oracle's own path: a probe object is put with its proof sidecar and read
back with unsigned S3 ranged GETs, and the answer must verify against its commitment. An
endpoint that refuses anonymous ranged reads (or ignores `Range`) would fail every
challenge, so it is refused here, before anyone pays for a placement on it.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

import httpx

from proofnet.messages.storage import (
    STORAGE_CHALLENGE_PATH,
    STORAGE_OFFER_PATH,
    STORAGE_OFFERS_PATH,
    RetrievalChallenge,
    StorageOffer,
    StorageTerms,
    sign_offer,
    verify_answer,
)
from proofnet.storage_objects import (
    ObjectStoreError,
    S3Location,
    answer_challenge,
    ensure_bucket,
    put_committed,
    s3_client,
)
from worker.api_client import ApiClient, ApiClientError

PROBE_KEY = "proofnet-probe/onboard"
PROBE_CHUNK = 1024


class OfferError(Exception):
    """The offer could not be made; the message says why in one line."""


@dataclass(frozen=True)
class Credentials:
    access_key: str | None = None
    secret_key: str | None = None


def probe_endpoint(terms: StorageTerms, credentials: Credentials, http: httpx.Client) -> None:
    """Raise OfferError unless the endpoint stores an object and serves a challenge on it."""
    try:
        client = s3_client(
            terms.endpoint, access_key=credentials.access_key, secret_key=credentials.secret_key
        )
        ensure_bucket(client, terms.bucket)
        data = secrets.token_bytes(3 * PROBE_CHUNK + 17)
        commitment = put_committed(client, terms.bucket, PROBE_KEY, data, chunk_size=PROBE_CHUNK)
        challenge = RetrievalChallenge(
            challenge_id=secrets.token_hex(16),
            placement_id=1,
            object_key=PROBE_KEY,
            commitment=commitment,
            index=secrets.randbelow(commitment.chunk_count),
        )
        answer = answer_challenge(http, S3Location(terms.endpoint, terms.bucket), challenge)
    except ObjectStoreError as exc:
        raise OfferError(f"the endpoint failed the probe: {exc}") from exc
    verdict = verify_answer(challenge, answer)
    if not verdict.passed:
        raise OfferError(
            f"the endpoint served a probe chunk that does not verify: {verdict.reason}"
        )


def publish_offer(api: ApiClient, terms: StorageTerms, payout_address: str) -> dict[str, Any]:
    """Sign the offer over a fresh nonce from the API and publish it; the API's record."""
    try:
        issued = api.request("POST", STORAGE_CHALLENGE_PATH).json()
        offer = sign_offer(
            api.key.signing_key,
            network=api.network,
            payout_address=payout_address,
            nonce=str(issued["nonce"]),
            terms=terms,
        )
        body = json.dumps(offer.model_dump(mode="json")).encode()
        answer = api.request("PUT", STORAGE_OFFER_PATH, body=body).json()
    except (ApiClientError, KeyError, TypeError, ValueError) as exc:
        raise OfferError(f"the API did not take the offer: {exc}") from exc
    stored = StorageOffer.model_validate(answer.get("offer"))
    if stored != offer:
        raise OfferError("the API recorded another offer than the one this provider signed")
    return dict(answer)


def provider_status(api: ApiClient) -> dict[str, Any]:
    """This provider's offer (None when it has none) and the placements it holds."""
    key = api.key.public_key_hex
    try:
        offers = api.request("GET", STORAGE_OFFERS_PATH).json()["data"]
        placements = api.request("GET", f"/api/v1/storage/placements?provider_key={key}").json()[
            "data"
        ]
    except (ApiClientError, KeyError, TypeError, ValueError) as exc:
        raise OfferError(f"the API did not answer: {exc}") from exc
    mine = next((o for o in offers if o.get("provider_key") == key), None)
    return {"provider_key": key, "offer": mine, "placements": placements}
