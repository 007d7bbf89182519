"""Send a finished job's results to the destinations its spec names, and say how each answered.

The API's store receives the results as it always has (`Agent._upload`; the oracles verify
from there); this module handles the destinations beyond it (`proofnet.messages.
destinations`): a webhook gets each JSON/CSV result inline (POST, at most
`WEBHOOK_MAX_BYTES`; a bigger one is refused before anything is sent), an S3 pre-signed URL
gets its named result (PUT with a Content-Length, acknowledged by 2xx and an ETag). What is
sent is what the API's store got: a sealed job's sealed envelopes.

The URLs are the submitter's, so every request goes through the pinned, public-address-only
client (`proofnet.pinned_http`): a name or redirect that leads to loopback, the LAN or the
metadata service is refused, not fetched, unless the provider let that network back in
(`PROOFNET_WORKER_DATA_ALLOW_NETWORKS`). Redirects are never followed: a 3xx is not an
acknowledgement. I/O: those requests only; the report goes to the API through the caller.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import httpx

from proofnet.egress import EgressPolicy, EgressRefused, Resolver, system_resolver
from proofnet.messages.destinations import (
    WEBHOOK_KINDS,
    WEBHOOK_MAX_BYTES,
    ApiDestination,
    DeliveryReport,
    Destination,
    ResultAck,
    S3PresignedDestination,
    WebhookDestination,
)
from proofnet.pinned_http import pinned_client
from worker.results import CollectedResult

log = logging.getLogger(__name__)

CONTENT_TYPES = {"json": "application/json", "csv": "text/csv"}
SEALED_TYPE = "application/vnd.proofnet.sealed"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class DeliveryPolicy:
    """How this provider reaches the submitter's URLs: public addresses only, plus the
    networks the provider let back in (the same setting as for job data)."""

    egress: EgressPolicy = field(default_factory=EgressPolicy)
    resolver: Resolver = system_resolver
    verify: ssl.SSLContext | bool = True
    timeout_s: float = 60.0


def deliver(
    destinations: Sequence[Destination],
    results: Sequence[CollectedResult],
    *,
    job_id: str,
    sealed: bool,
    policy: DeliveryPolicy,
    api_stored: bool = True,
    phase: Literal["all", "store", "external"] = "all",
) -> list[DeliveryReport]:
    """One report per destination of `phase`, in the spec's order: "store" is the API's own
    store (before completion), "external" the submitter's own destinations (only once the
    oracles' verdict released the results: worker.held_results). `results` are what the
    API's store received (sealed when the job is); `api_stored` says whether that upload
    succeeded."""
    reports: list[DeliveryReport] = []
    client = pinned_client(
        policy.egress, resolver=policy.resolver, verify=policy.verify, timeout=policy.timeout_s
    )
    with client:
        for index, dest in enumerate(destinations):
            if phase != "all" and isinstance(dest, ApiDestination) != (phase == "store"):
                continue
            if isinstance(dest, ApiDestination):
                report = DeliveryReport(
                    index=index,
                    kind="api",
                    acknowledged=api_stored,
                    results=tuple(
                        ResultAck(name=r.name, sha256=r.sha256, status=200 if api_stored else 0)
                        for r in results
                    ),
                    reason="" if api_stored else "the upload to the API store failed",
                )
            elif isinstance(dest, WebhookDestination):
                report = _webhook(client, index, dest, results, job_id=job_id, sealed=sealed)
            else:
                report = _s3(client, index, dest, results)
            if not report.acknowledged:
                log.warning(
                    "destination %d (%s) not acknowledged: %s", index, dest.kind, report.reason
                )
            reports.append(report)
    return reports


def _webhook(
    client: httpx.Client,
    index: int,
    dest: WebhookDestination,
    results: Sequence[CollectedResult],
    *,
    job_id: str,
    sealed: bool,
) -> DeliveryReport:
    inline = [r for r in results if r.kind in WEBHOOK_KINDS]
    over = [r for r in inline if r.size > WEBHOOK_MAX_BYTES]
    if over:
        names = ", ".join(f"{r.name} ({r.size} bytes)" for r in over)
        return DeliveryReport(
            index=index,
            kind="webhook",
            acknowledged=False,
            results=tuple(ResultAck(name=r.name, sha256=r.sha256, status=0) for r in inline),
            reason=(
                f"refused: over the webhook's inline cap of {WEBHOOK_MAX_BYTES} bytes per "
                f"result: {names}; send big results to s3_presigned or the API store"
            ),
        )
    acks: list[ResultAck] = []
    for r in inline:
        headers = {
            "Content-Type": SEALED_TYPE if sealed else CONTENT_TYPES[r.kind],
            "X-Proofnet-Job-Id": job_id,
            "X-Proofnet-Result": r.name,
            "X-Proofnet-Sha256": r.sha256,
            "X-Proofnet-Sealed": "1" if sealed else "0",
        }
        try:
            status, _ = _send(client, "POST", dest.url, r.path, r.size, headers)
        except (EgressRefused, httpx.HTTPError, OSError) as exc:
            acks.append(ResultAck(name=r.name, sha256=r.sha256, status=0))
            return _failed(index, "webhook", acks, f"{r.name}: {_why(exc)}")
        acks.append(ResultAck(name=r.name, sha256=r.sha256, status=status))
        if not 200 <= status < 300:
            return _failed(index, "webhook", acks, f"{r.name}: the webhook answered {status}")
    return DeliveryReport(index=index, kind="webhook", acknowledged=True, results=tuple(acks))


def _s3(
    client: httpx.Client,
    index: int,
    dest: S3PresignedDestination,
    results: Sequence[CollectedResult],
) -> DeliveryReport:
    by_name = {r.name: r for r in results}
    acks: list[ResultAck] = []
    for put in dest.puts:
        r = by_name.get(put.name)
        if r is None:
            return _failed(
                index, "s3_presigned", acks, f"{put.name}: the job produced no such result"
            )
        try:
            status, etag = _send(client, "PUT", put.url, r.path, r.size, {})
        except (EgressRefused, httpx.HTTPError, OSError) as exc:
            acks.append(ResultAck(name=r.name, sha256=r.sha256, status=0))
            return _failed(index, "s3_presigned", acks, f"{r.name}: {_why(exc)}")
        acks.append(ResultAck(name=r.name, sha256=r.sha256, status=status, etag=etag))
        if not 200 <= status < 300:
            return _failed(index, "s3_presigned", acks, f"{r.name}: the bucket answered {status}")
        if not etag:
            return _failed(index, "s3_presigned", acks, f"{r.name}: the bucket answered no ETag")
    return DeliveryReport(index=index, kind="s3_presigned", acknowledged=True, results=tuple(acks))


def _send(
    client: httpx.Client, method: str, url: str, path: Path, size: int, headers: dict[str, str]
) -> tuple[int, str | None]:
    """Stream `path` with an exact Content-Length (pre-signed PUTs refuse chunked bodies);
    the answer's body is never read (it could be endless)."""
    headers = {**headers, "Content-Length": str(size)}
    with client.stream(method, url, content=_chunks(path), headers=headers) as response:
        etag = response.headers.get("ETag")
        return response.status_code, etag[:256] if etag else None


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            yield chunk


def _why(exc: BaseException) -> str:
    if isinstance(exc, EgressRefused):
        return f"refused, not fetched: {exc}"
    return f"could not deliver: {type(exc).__name__}: {exc}"[:900]


def _failed(index: int, kind: str, acks: list[ResultAck], reason: str) -> DeliveryReport:
    return DeliveryReport(
        index=index,
        kind=kind,  # type: ignore[arg-type]
        acknowledged=False,
        results=tuple(acks),
        reason=reason[:1000],
    )
