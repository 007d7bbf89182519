"""`HttpApiFeed`: the oracle's signed client of the API's oracle feed, with a short cache.

Requests are signed with the oracle's Ed25519 key in the worker request scheme
(`proofnet.messages.worker_auth`); the API serves the feed only to keys it lists as oracles.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from cachetools import LRUCache
from nacl.signing import SigningKey

from oracle.feed import (
    ArtifactMissing,
    FeedDataError,
    FeedError,
    JobInfo,
    WorkerInfo,
    parse_job,
    parse_worker,
)
from oracle.feed_units import JOB_OVER_STATUSES
from proofnet.messages.worker_auth import request_target, sign_request_headers

FEED_PREFIX = "/api/v1/oracle"


def job_path(job_id: str) -> str:
    return f"{FEED_PREFIX}/jobs/{quote(job_id, safe='')}"


def worker_path(worker_key: str) -> str:
    return f"{FEED_PREFIX}/workers/{quote(worker_key, safe='')}"


def artifact_path(job_id: str, name: str) -> str:
    return f"{job_path(job_id)}/results/{quote(name, safe='/')}"


@dataclass
class HttpApiFeed:
    base_url: str
    signing_key: SigningKey
    network: str
    ttl_s: float = 30.0
    timeout_s: float = 30.0
    on_error: Callable[[str], None] | None = None
    client: httpx.Client | None = None
    # Bounded: attestations naming made-up jobs and keys must not grow the oracle's memory.
    cache_size: int = 10_000
    _cache: LRUCache[tuple[str, str], tuple[float, Any]] = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._cache = LRUCache(maxsize=self.cache_size)
        if self.client is None:
            self.client = httpx.Client(base_url=self.base_url.rstrip("/"), timeout=self.timeout_s)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    def _get(self, path: str, operation: str) -> httpx.Response | None:
        assert self.client is not None
        headers = sign_request_headers(
            self.signing_key,
            network=self.network,
            method="GET",
            path=request_target(path),
            body=b"",
        )
        try:
            response = self.client.get(path, headers=headers)
        except httpx.HTTPError as exc:
            if self.on_error is not None:
                self.on_error(operation)
            raise FeedError(f"API feed unreachable ({operation}): {exc}") from exc
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            if self.on_error is not None:
                self.on_error(operation)
            raise FeedError(
                f"API feed answered {response.status_code} ({operation}): {response.text[:300]}"
            )
        return response

    def _cached(self, key: tuple[str, str]) -> tuple[bool, Any]:
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and time.monotonic() - hit[0] <= self.ttl_s:
            return True, hit[1]
        return False, None

    def _store(self, key: tuple[str, str], value: Any) -> None:
        with self._lock:
            self._cache[key] = (time.monotonic(), value)

    def job(self, job_id: str) -> JobInfo | None:
        hit, value = self._cached(("job", job_id))
        if hit:
            return value  # type: ignore[no-any-return]
        response = self._get(job_path(job_id), "job")
        info = None if response is None else parse_job(response.json(), expected_job_id=job_id)
        # Only a finished job's facts are final; anything else may change any moment. (A
        # single-unit job that failed may be queued again; a topology job that is over not.)
        if info is not None and (
            info.status == "completed" or (info.units and info.status in JOB_OVER_STATUSES)
        ):
            self._store(("job", job_id), info)
        return info

    def worker(self, worker_key: str) -> WorkerInfo | None:
        hit, value = self._cached(("worker", worker_key))
        if hit:
            return value  # type: ignore[no-any-return]
        response = self._get(worker_path(worker_key), "worker")
        info = (
            None
            if response is None
            else parse_worker(response.json(), expected_key=worker_key, network=self.network)
        )
        if info is not None:
            self._store(("worker", worker_key), info)
        return info

    def artifact(self, job_id: str, name: str) -> bytes:
        response = self._get(artifact_path(job_id, name), "artifact")
        if response is None:
            raise ArtifactMissing(f"job {job_id} has no upload {name!r}")
        data = response.content
        job = self.job(job_id)
        expected = None if job is None else job.result_hash(name)
        if expected is None or hashlib.sha256(data).hexdigest() != expected:
            raise FeedDataError(f"upload {name!r} of job {job_id} does not match its recorded hash")
        return data
