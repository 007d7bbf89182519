"""`proofnet job store`: place one of a job's files with storage providers, k copies.

The submitter's client does the placing: it reads the spec's storage placement (replicas,
price cap), picks the cheapest offers that hold no copy yet and have room (or the providers
named), puts the file and its proof sidecar on each endpoint, and records each copy with
the API under the content root it was put under. The API re-checks everything (owner, kind,
replicas, price cap, capacity, one root per object), so a client that skips a check here
gains nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from proofnet.messages.jobspec import JobSpec, JobSpecError
from proofnet.messages.storage import DEFAULT_CHUNK_SIZE, Commitment, StorageError, commit
from proofnet.storage_objects import ObjectStoreError, put_committed, s3_client

# (offer as the API lists it, object key, data, chunk size) -> the commitment it holds
Writer = Callable[[dict[str, Any], str, bytes, int], Commitment]


class StoreError(Exception):
    """The file could not be placed; the message says why in one line."""


def s3_writer(access_key: str | None = None, secret_key: str | None = None) -> Writer:
    def write(offer: dict[str, Any], key: str, data: bytes, chunk_size: int) -> Commitment:
        client = s3_client(str(offer["endpoint"]), access_key=access_key, secret_key=secret_key)
        return put_committed(client, str(offer["bucket"]), key, data, chunk_size=chunk_size)

    return write


def choose_offers(
    offers: Sequence[dict[str, Any]],
    *,
    need: int,
    size: int,
    max_price: int,
    holders: set[str],
    named: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The offers to place `need` new copies with: the named ones (each must fit), else the
    cheapest that fit; StoreError when too few do."""
    fits = [
        o
        for o in offers
        if o["provider_key"] not in holders
        and int(o["ntx_per_gb_month"]) <= max_price
        and int(o["free_bytes"]) >= size
    ]
    if named:
        by_key = {o["provider_key"]: o for o in fits}
        missing = [k for k in named if k not in by_key]
        if missing:
            raise StoreError(
                f"provider(s) {', '.join(missing)} cannot take this copy (no offer, already "
                "a holder, over the spec's price cap, or not enough free capacity)"
            )
        fits = [by_key[k] for k in named]
    fits.sort(key=lambda o: (int(o["ntx_per_gb_month"]), o["provider_key"]))
    if len(fits) < need:
        raise StoreError(
            f"{need} more copies are needed but only {len(fits)} offers fit (price at most "
            f"{max_price} per GB-month, {size} bytes free, not holding it already)"
        )
    return fits[:need]


def store_file(
    call: Callable[..., Any],
    writer: Writer,
    *,
    job_id: str,
    kind: str,
    object_key: str,
    data: bytes,
    providers: Sequence[str] = (),
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> list[dict[str, Any]]:
    """Place `data` until the spec's `replicas` copies are held; the new placements.
    `call(method, path, **kw)` is a signed-in API call (JobClient.call)."""
    job = call("GET", f"/jobs/{job_id}")
    try:
        placement = JobSpec.from_dict(job["spec"]).storage
    except (JobSpecError, KeyError, TypeError) as exc:
        raise StoreError(f"the job's spec cannot be read: {exc}") from exc
    if placement is None:
        raise StoreError("the job's spec places no storage (add a 'storage' field)")
    if kind not in placement.kinds:
        raise StoreError(f"the job's spec places {list(placement.kinds)}, not {kind!r}")
    try:
        commitment = commit(data, chunk_size)
    except StorageError as exc:
        raise StoreError(str(exc)) from exc
    held = [
        p
        for p in call("GET", "/storage/placements", params={"job_id": job_id})["data"]
        if p["object_key"] == object_key and p["status"] == "active"
    ]
    need = placement.replicas - len(held)
    if need <= 0:
        raise StoreError(f"{object_key} already has the {placement.replicas} copies the spec asks")
    offers = call(
        "GET", "/storage/offers", params={"max_ntx_per_gb_month": placement.max_ntx_per_gb_month}
    )["data"]
    chosen = choose_offers(
        offers,
        need=need,
        size=commitment.size,
        max_price=placement.max_ntx_per_gb_month,
        holders={p["provider_key"] for p in held},
        named=providers,
    )
    placed = []
    for offer in chosen:
        try:
            made = writer(offer, object_key, data, chunk_size)
        except ObjectStoreError as exc:
            raise StoreError(f"provider {offer['provider_key']}: {exc}") from exc
        if made != commitment:
            raise StoreError(f"provider {offer['provider_key']} holds another commitment")
        placed.append(
            call(
                "POST",
                "/storage/placements",
                json={
                    "job_id": job_id,
                    "kind": kind,
                    "object_key": object_key,
                    "provider_key": offer["provider_key"],
                    "commitment": commitment.model_dump(mode="json"),
                },
            )
        )
    return placed
