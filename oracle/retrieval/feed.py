"""What the challenger reads from (and reports to) the API: placements and offers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import quote

import httpx
from nacl.signing import SigningKey
from pydantic import ValidationError

from proofnet.messages.storage import Commitment
from proofnet.messages.worker_auth import request_target, sign_request_headers

PLACEMENTS_PATH = "/api/v1/oracle/storage/placements"
JOBS_PATH = "/api/v1/oracle/storage/jobs"
OFFERS_PATH = "/api/v1/storage/offers"


class PlacementFeedError(Exception):
    """The API did not answer, or answered something unreadable; the message says why."""


@dataclass(frozen=True)
class Placement:
    id: int
    job_id: str
    kind: str
    object_key: str
    provider_key: str
    commitment: Commitment
    ntx_per_gb_month: int
    placed_at: datetime
    ends_at: datetime
    # The job's storage placement, from its spec: what all of its copies may cost together.
    budget: int
    max_ntx_per_gb_month: int


@dataclass(frozen=True)
class Offer:
    provider_key: str
    endpoint: str
    bucket: str
    payout_address: str
    ntx_per_gb_month: int
    free_bytes: int


@dataclass(frozen=True)
class Replacement:
    provider_key: str
    commitment: Commitment


@dataclass(frozen=True)
class JobStorage:
    """Whether a job's spec keeps storage, and its copies the API lists as active now."""

    job_id: str
    keeps_storage: bool
    placements: tuple[Placement, ...]
    # Its copies the API no longer lists as active (failed): what a co-signer checks a
    # receipt for such a copy against. Never held for.
    ended: tuple[Placement, ...] = ()

    def placement(self, placement_id: int) -> Placement | None:
        """The copy with this id, active or ended (None: the API recorded no such copy)."""
        return next((p for p in (*self.placements, *self.ended) if p.id == placement_id), None)


class JobStorageSource(Protocol):
    def job_storage(self, job_ids: Sequence[str]) -> dict[str, JobStorage]:
        """The storage of each job the API knows among `job_ids`; PlacementFeedError when
        the API cannot be read."""
        ...


class PlacementFeed(Protocol):
    def active_placements(self) -> list[Placement]: ...
    def offers(self) -> list[Offer]: ...
    def report_failure(
        self, placement_id: int, reason: str, replacement: Replacement | None
    ) -> int | None:
        """Mark the placement failed; record `replacement` (the id of its new placement)."""
        ...

    def report_accrual(
        self,
        placement_id: int,
        accrued_ntx: int,
        paid_through: datetime,
        passed: int,
        strikes: int = 0,
        last_failure: str = "",
    ) -> None:
        """The running total a placement has earned (shown beside compute earnings), and
        its strikes now."""
        ...


def _stamp(text: Any) -> datetime:
    stamp = datetime.fromisoformat(str(text))
    if stamp.tzinfo is None:
        from datetime import UTC

        stamp = stamp.replace(tzinfo=UTC)
    return stamp


def parse_placement(obj: Any) -> Placement:
    try:
        return Placement(
            id=int(obj["id"]),
            job_id=str(obj["job_id"]),
            kind=str(obj["kind"]),
            object_key=str(obj["object_key"]),
            provider_key=str(obj["provider_key"]),
            commitment=Commitment(
                content_root=obj["content_root"], size=obj["size"], chunk_size=obj["chunk_size"]
            ),
            ntx_per_gb_month=int(obj["ntx_per_gb_month"]),
            placed_at=_stamp(obj["placed_at"]),
            ends_at=_stamp(obj["ends_at"]),
            budget=int(obj["budget"]),
            max_ntx_per_gb_month=int(obj["max_ntx_per_gb_month"]),
        )
    except (KeyError, TypeError, ValueError, ValidationError) as exc:
        raise PlacementFeedError(f"unreadable placement from the API: {exc}") from exc


def parse_offer(obj: Any) -> Offer:
    try:
        return Offer(
            provider_key=str(obj["provider_key"]),
            endpoint=str(obj["endpoint"]),
            bucket=str(obj["bucket"]),
            payout_address=str(obj["payout_address"]),
            ntx_per_gb_month=int(obj["ntx_per_gb_month"]),
            free_bytes=int(obj["free_bytes"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PlacementFeedError(f"unreadable storage offer from the API: {exc}") from exc


class HttpPlacementFeed:
    """The API's storage feed, signed with the oracle's key (the API lists it as an oracle)."""

    def __init__(
        self,
        http: httpx.Client,
        base_url: str,
        key: SigningKey,
        network: str,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/")
        self.key = key
        self.network = network
        # The signature's timestamp: the wall clock unless a test runs the API on its own.
        self.clock = clock

    def _send(self, method: str, path: str, body: bytes = b"") -> Any:
        url = httpx.URL(self.base_url + path)
        headers = sign_request_headers(
            self.key,
            network=self.network,
            method=method,
            path=request_target(url.raw_path.decode("ascii")),
            body=body,
            timestamp=None if self.clock is None else int(self.clock().timestamp()),
        )
        if body:
            headers["Content-Type"] = "application/json"
        try:
            response = self.http.request(method, url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise PlacementFeedError(f"cannot reach the API: {exc}") from exc
        if response.status_code >= 400:
            raise PlacementFeedError(
                f"{method} {path}: HTTP {response.status_code}: {response.text[:300]}"
            )
        try:
            return response.json()
        except ValueError as exc:
            raise PlacementFeedError(f"{method} {path}: not JSON") from exc

    def active_placements(self) -> list[Placement]:
        return [parse_placement(p) for p in self._send("GET", PLACEMENTS_PATH)["data"]]

    def offers(self) -> list[Offer]:
        return [parse_offer(o) for o in self._send("GET", OFFERS_PATH)["data"]]

    def job_storage(self, job_ids: Sequence[str]) -> dict[str, JobStorage]:
        if not job_ids:
            return {}
        query = "&".join(f"job_id={quote(j)}" for j in job_ids)
        found: dict[str, JobStorage] = {}
        for obj in self._send("GET", f"{JOBS_PATH}?{query}")["data"]:
            try:
                job = JobStorage(
                    job_id=str(obj["job_id"]),
                    keeps_storage=bool(obj["keeps_storage"]),
                    placements=tuple(parse_placement(p) for p in obj["placements"]),
                    ended=tuple(parse_placement(p) for p in obj.get("ended", ())),
                )
            except (KeyError, TypeError) as exc:
                raise PlacementFeedError(f"unreadable job storage from the API: {exc}") from exc
            found[job.job_id] = job
        return found

    def report_failure(
        self, placement_id: int, reason: str, replacement: Replacement | None
    ) -> int | None:
        import json

        body = {
            "reason": reason[:2000],
            "replacement": None
            if replacement is None
            else {
                "provider_key": replacement.provider_key,
                "commitment": replacement.commitment.model_dump(mode="json"),
            },
        }
        path = f"{PLACEMENTS_PATH}/{quote(str(placement_id))}/failed"
        answer = self._send("POST", path, json.dumps(body).encode())
        new = answer.get("replacement_id") if isinstance(answer, dict) else None
        return None if new is None else int(new)

    def report_accrual(
        self,
        placement_id: int,
        accrued_ntx: int,
        paid_through: datetime,
        passed: int,
        strikes: int = 0,
        last_failure: str = "",
    ) -> None:
        path = f"{PLACEMENTS_PATH}/{quote(str(placement_id))}/accrual"
        body = _accrual_body(accrued_ntx, paid_through, passed, strikes, last_failure)
        self._send("POST", path, body)


def _accrual_body(
    accrued_ntx: int, paid_through: datetime, passed: int, strikes: int, last_failure: str
) -> bytes:
    import json

    return json.dumps(
        {
            "accrued_ntx": accrued_ntx,
            "paid_through": paid_through.isoformat(),
            "challenges_passed": passed,
            "strikes": strikes,
            "last_failure": last_failure[:2000],
        }
    ).encode()


def by_key(offers: Sequence[Offer]) -> dict[str, Offer]:
    return {o.provider_key: o for o in offers}
