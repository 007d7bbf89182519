"""`HttpApiFeed`: the oracle's signed client of the API's oracle feed, with a short cache.

Requests are signed with the oracle's Ed25519 key in the worker request scheme
(`proofnet.messages.worker_auth`); the API serves the feed only to keys it lists as oracles.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from cachetools import TTLCache
from nacl.signing import SigningKey

from oracle.inputs.feed import (
    ArtifactMissing,
    FeedDataError,
    FeedError,
    JobInfo,
    WorkerInfo,
    parse_job,
    parse_worker,
)
from oracle.inputs.feed_units import JOB_OVER_STATUSES
from oracle.intake.announce import Verdict
from oracle.verification.early import EarlyCommit
from oracle.verification.verifiers import Candidate
from proofnet.messages.dispute import DisputeTask
from proofnet.messages.job_fault import JobFaultVerdict
from proofnet.messages.key_grant import KeyRequest
from proofnet.messages.verification import VerificationTask
from proofnet.messages.worker_auth import request_target, sign_request_headers

FEED_PREFIX = "/api/v1/oracle"
KEY_REQUESTS_PATH = f"{FEED_PREFIX}/key-requests"
VERIFIERS_PATH = f"{FEED_PREFIX}/verifiers"
VERIFICATIONS_PATH = f"{FEED_PREFIX}/verifications"
DISPUTES_PATH = f"{FEED_PREFIX}/disputes"
EARLY_COMMITS_PATH = f"{FEED_PREFIX}/early-commits"
JOB_FAULTS_PATH = f"{FEED_PREFIX}/job-faults"
VERDICTS_PATH = f"{FEED_PREFIX}/verdicts"
# `artifact` holds an upload in memory: only for manifests. Proof files (full weights)
# stream to disk with `save_artifact`.
MAX_ARTIFACT_IN_MEMORY = 64 << 20
_READ_BYTES = 1 << 20


def job_path(job_id: str) -> str:
    return f"{FEED_PREFIX}/jobs/{quote(job_id, safe='')}"


def worker_path(worker_key: str) -> str:
    return f"{FEED_PREFIX}/workers/{quote(worker_key, safe='')}"


def artifact_path(job_id: str, name: str) -> str:
    return f"{job_path(job_id)}/results/{quote(name, safe='/')}"


_MISSING = object()


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
    clock: Callable[[], float] = time.monotonic
    _cache: TTLCache[tuple[str, str], Any] = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._cache = TTLCache(maxsize=self.cache_size, ttl=self.ttl_s, timer=self.clock)
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
        with self._lock:  # cachetools' caches are not thread-safe
            hit = self._cache.get(key, _MISSING)
        return (False, None) if hit is _MISSING else (True, hit)

    def _store(self, key: tuple[str, str], value: Any) -> None:
        with self._lock:
            self._cache[key] = value

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

    def _stream(self, job_id: str, name: str, sink: Callable[[bytes], object], cap: int) -> int:
        """Stream upload `name` into `sink`, hashing it; its size once it matches the hash
        the job records (FeedDataError otherwise, or past `cap` bytes)."""
        assert self.client is not None
        path = artifact_path(job_id, name)
        headers = sign_request_headers(
            self.signing_key, network=self.network, method="GET", path=request_target(path)
        )
        digest, size = hashlib.sha256(), 0
        try:
            with self.client.stream("GET", path, headers=headers) as response:
                if response.status_code == 404:
                    raise ArtifactMissing(f"job {job_id} has no upload {name!r}")
                if response.status_code != 200:
                    response.read()
                    if self.on_error is not None:
                        self.on_error("artifact")
                    raise FeedError(
                        f"API feed answered {response.status_code} (artifact): "
                        f"{response.text[:300]}"
                    )
                for block in response.iter_bytes(_READ_BYTES):
                    size += len(block)
                    if size > cap:
                        raise FeedDataError(
                            f"upload {name!r} of job {job_id} is larger than {cap} bytes"
                        )
                    digest.update(block)
                    sink(block)
        except httpx.HTTPError as exc:
            if self.on_error is not None:
                self.on_error("artifact")
            raise FeedError(f"API feed unreachable (artifact): {exc}") from exc
        job = self.job(job_id)
        expected = None if job is None else job.result_hash(name)
        if expected is None or digest.hexdigest() != expected:
            raise FeedDataError(f"upload {name!r} of job {job_id} does not match its recorded hash")
        return size

    def _post(self, path: str, payload: Any, operation: str) -> Any:
        assert self.client is not None
        body = json.dumps(payload).encode()
        headers = sign_request_headers(
            self.signing_key, network=self.network, method="POST", path=path, body=body
        )
        headers["Content-Type"] = "application/json"
        try:
            response = self.client.post(path, content=body, headers=headers)
        except httpx.HTTPError as exc:
            if self.on_error is not None:
                self.on_error(operation)
            raise FeedError(f"API feed unreachable ({operation}): {exc}") from exc
        if response.status_code not in (200, 201):
            raise FeedError(
                f"the API refused the {operation}: {response.status_code}: {response.text[:300]}"
            )
        return response.json()

    def worker_payout(self, worker_key: str) -> str | None:
        """The payout address the worker registered (None: not registered)."""
        info = self.worker(worker_key)
        return None if info is None else info.payout_address

    def verifier_candidates(self, device_class: str, exclude: str) -> list[Candidate]:
        """Online workers of `device_class` that may verify a proof of worker `exclude`."""
        path = f"{VERIFIERS_PATH}?device_class={quote(device_class, safe='')}&exclude={exclude}"
        response = self._get(path, "verifiers")
        raw = [] if response is None else response.json()
        if not isinstance(raw, list):
            raise FeedDataError("verifiers must be a list")
        try:
            return [Candidate(str(c["worker_key"]), str(c["payout_address"])) for c in raw]
        except (KeyError, TypeError) as exc:
            raise FeedDataError(f"verifiers: {exc}") from exc

    def early_commits(self) -> list[EarlyCommit]:
        """Running leases whose first segment's commitment is uploaded (replayed early)."""
        response = self._get(EARLY_COMMITS_PATH, "early commits")
        raw = [] if response is None else response.json()
        if not isinstance(raw, list):
            raise FeedDataError("early commits must be a list")
        try:
            return [
                EarlyCommit(
                    str(c["job_id"]),
                    int(c["attempt"]),
                    str(c["nonce"]),
                    None if c.get("gpu_model") is None else str(c["gpu_model"]),
                )
                for c in raw
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise FeedDataError(f"early commits: {exc}") from exc

    def post_verification(self, task: VerificationTask) -> dict[str, Any]:
        """Post a task this oracle signed for the verifier it drew (again: the same unit);
        the unit's state, with the verifier's report once it answered."""
        state = self._post(VERIFICATIONS_PATH, task.to_json(), "verification task")
        if not isinstance(state, dict):
            raise FeedDataError("a verification state must be an object")
        return state

    def post_job_fault(self, verdict: JobFaultVerdict) -> dict[str, Any]:
        """Post this oracle's signed early job-fault verdict (again: the same vote); the
        lease's stop state: the oracles that signed it, the threshold, the stop once reached."""
        state = self._post(JOB_FAULTS_PATH, verdict.to_json(), "job-fault verdict")
        if not isinstance(state, dict):
            raise FeedDataError("a job-fault state must be an object")
        return state

    def post_verdict(self, verdict: Verdict) -> None:
        """Post this oracle's verdict on a lease's attestation: the API releases the
        lease's results to the submitter only with enough such verdicts."""
        self._post(
            VERDICTS_PATH,
            {
                "job_id": verdict.job_id,
                "nonce": verdict.nonce,
                "status": verdict.status,
                "fault": verdict.fault,
                "reason": verdict.reason[:64],
                "message": verdict.message[:2000],
            },
            "verdict",
        )

    def post_dispute(self, task: DisputeTask) -> dict[str, Any]:
        """Post a dispute this oracle signed for a provider (again: the same unit); its
        state, with the provider's signed commitment and reveal once it answered
        (oracle.verification.referee)."""
        state = self._post(DISPUTES_PATH, task.to_json(), "dispute")
        if not isinstance(state, dict):
            raise FeedDataError("a dispute state must be an object")
        return state

    def request_keys(self, request: KeyRequest) -> int:
        """Post a key request this oracle signed (a drawn verifier needs the content keys
        of a sealed job's proof files); the API's id for it, to follow its grant."""
        assert self.client is not None
        body = json.dumps(request.to_json()).encode()
        headers = sign_request_headers(
            self.signing_key,
            network=self.network,
            method="POST",
            path=KEY_REQUESTS_PATH,
            body=body,
        )
        headers["Content-Type"] = "application/json"
        try:
            response = self.client.post(KEY_REQUESTS_PATH, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise FeedError(f"API feed unreachable (key request): {exc}") from exc
        if response.status_code not in (200, 201):
            raise FeedError(
                f"the API refused the key request: {response.status_code}: {response.text[:300]}"
            )
        return int(response.json()["id"])

    def artifact(self, job_id: str, name: str) -> bytes:
        parts: list[bytes] = []
        self._stream(job_id, name, parts.append, MAX_ARTIFACT_IN_MEMORY)
        return b"".join(parts)

    def save_artifact(self, job_id: str, name: str, dest: Path) -> int:
        dest = Path(dest)
        try:
            with dest.open("wb") as out:
                return self._stream(job_id, name, out.write, 2**62)
        except BaseException:
            dest.unlink(missing_ok=True)
            raise
