"""The worker's HTTP client for the proofnet API: every call signed with the worker key.

Errors are split by what the caller should do: `ApiUnavailable` (network trouble, 5xx, 429:
retry later), `LeaseLost` (the lease this call names is gone: stop the job, never attest),
`ApiRefused` (any other 4xx: the request itself is wrong).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import ValidationError
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from proofnet.messages.claim import Claim, ClaimEscrow, ClaimResume, ClaimSealing, LeaseAnswer
from proofnet.messages.destinations import DeliveryReport
from proofnet.messages.jobspec import JobSpec, JobSpecError
from proofnet.messages.sealing import SealingError, SealingTarget
from proofnet.messages.worker_auth import request_target, sign_request_headers
from proofnet.redaction import redact_credentials
from worker.identity import WorkerKey
from worker.unit_claim import UnitAssignment, parse_unit

CLAIM_PATH = "/api/v1/worker/claim"
HEARTBEAT_PATH = "/api/v1/worker/heartbeat"
LEASE_PATH = "/api/v1/worker/leases/{token}"
CONTENT_SHA256_HEADER = "X-Content-SHA256"
KEY_REQUESTS_PATH = "/api/v1/worker/key-requests"
KEY_GRANTS_PATH = "/api/v1/worker/key-grants"
VERIFICATIONS_PATH = "/api/v1/worker/verifications"
DISPUTES_PATH = "/api/v1/worker/disputes"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20
# Bytes per upload request: what a dropped connection costs at most, and what one
# request's signature covers.
UPLOAD_CHUNK_BYTES = 32 << 20


def _read_range(path: Path, offset: int, length: int) -> Iterator[bytes]:
    """Bytes [offset, offset+length) of the file, in blocks of at most 1 MiB."""
    with Path(path).open("rb") as f:
        f.seek(offset)
        left = length
        while left > 0:
            block = f.read(min(_CHUNK, left))
            if not block:
                raise OSError(f"{path} is shorter than it was ({offset + length - left} bytes)")
            left -= len(block)
            yield block


class ApiClientError(Exception):
    """A call to the API did not succeed; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ApiUnavailable(ApiClientError):
    """Unreachable, overloaded (429) or failing (5xx): the same call may work later."""


class ApiRefused(ApiClientError):
    """The API refused the request (4xx) and would refuse it again."""


class LeaseLost(ApiRefused):
    """The lease is gone (expired, ended, or not this worker's): stop and do not attest."""


class BadClaim(ApiRefused):
    """The API handed out a job the worker cannot trust (spec does not match its id)."""


class InputRejected(ApiRefused):
    """An input checkpoint did not arrive as the claim pinned it (hash or size differ)."""


@dataclass
class _Received:
    """What a download has written so far: where a retry resumes, and the hash of it all."""

    size: int = 0
    digest: Any = field(default_factory=hashlib.sha256)


@dataclass(frozen=True)
class ClaimedJob:
    job_id: str
    spec: JobSpec
    lease_token: str
    nonce: str
    attempt: int
    expires_at: datetime
    lease_ttl_s: int
    # None while the API does not say which escrow pays for the job.
    escrow: ClaimEscrow | None
    # Set when the submitter asks for sealed results: upload them sealed to this key.
    sealing: SealingTarget | None = None
    # Set for a unit of a topology job (relay stage, evaluation, aggregation, cluster node).
    unit: UnitAssignment | None = None
    # Set for a whole job resumed from a lost attempt's last committed checkpoint.
    resume: ClaimResume | None = None


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])[:1000]
    return str(body)[:500]


def _sealing(message: ClaimSealing) -> SealingTarget:
    # A worker never uploads in the clear what the submitter asked to seal, nor seals to a
    # key the submitter's wallet did not sign.
    target = SealingTarget(
        public_key=message.public_key, signature=message.signature, cose_key=message.cose_key
    )
    try:
        target.verify()
    except SealingError as e:
        raise BadClaim(f"the job's sealing key is unusable: {e}") from e
    return target


def _errors(e: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in e.errors()[:5]
    )


def parse_claim(body: Any) -> ClaimedJob:
    """Check a claim answer; the spec must hash to the job id the API gave."""
    try:
        message = Claim.model_validate(body)
    except ValidationError as e:
        raise BadClaim(f"the API's claim answer is malformed: {_errors(e)}") from e
    job_id = message.job_id
    try:
        spec = JobSpec.from_dict(dict(message.spec))
    except (TypeError, ValueError, JobSpecError) as e:
        raise BadClaim(f"the API's claim answer is malformed: spec: {e}") from e
    if spec.job_id != job_id:
        raise BadClaim(f"the API handed out job {job_id} but its spec hashes to {spec.job_id}")
    claimed = ClaimedJob(
        job_id=job_id,
        spec=spec,
        lease_token=message.lease_token,
        nonce=message.nonce,
        attempt=message.attempt,
        expires_at=message.expires_at,
        lease_ttl_s=message.lease_ttl_s,
        escrow=message.escrow,
        sealing=None if message.sealing is None else _sealing(message.sealing),
        resume=message.resume if message.unit is None else None,
    )
    if spec.topology is None and message.unit is None:
        return claimed
    if message.unit is None:
        assert spec.topology is not None
        raise BadClaim(
            f"job {job_id} has a {spec.topology.kind} topology but the claim names no unit"
        )
    try:
        unit = parse_unit(message.unit, spec)
    except ValueError as e:
        raise BadClaim(f"the API's claim of job {job_id} names a bad unit: {e}") from e
    return replace(claimed, unit=unit)


class ApiClient:
    """Signed calls to the API at `base_url` (e.g. http://127.0.0.1:8000)."""

    def __init__(
        self,
        base_url: str,
        key: WorkerKey,
        network: str,
        *,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        retry_base_s: float = 0.5,
        retry_max_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        # A broken-off download resumes after 0.5 s, 1 s, 2 s, ... (at most `retry_max_s`).
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self.sleep = sleep
        self.key = key
        self.network = network
        self._http = httpx.Client(timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing -------------------------------------------------------------------------

    def _signed_request(
        self,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Request:
        url = httpx.URL(self.base_url + path)
        signed = sign_request_headers(
            self.key.signing_key,
            network=self.network,
            method=method,
            path=request_target(url.raw_path.decode("ascii")),
            body=body,
        )
        if body:
            signed["Content-Type"] = content_type
        signed.update(headers or {})
        return self._http.build_request(method, url, content=body, headers=signed)

    @staticmethod
    def _raise_for(response: httpx.Response, method: str, path: str, *, lease: bool) -> None:
        status = response.status_code
        if status < 400:
            return
        detail = f"{method} {path.split('/leases/')[0]}...: HTTP {status}: {_detail(response)}"
        if status == 429 or status >= 500:
            raise ApiUnavailable(detail, status)
        if lease and status in (404, 409):
            raise LeaseLost(detail, status)
        raise ApiRefused(detail, status)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes = b"",
        content_type: str = "application/json",
        headers: Mapping[str, str] | None = None,
        lease: bool = False,
    ) -> httpx.Response:
        request = self._signed_request(
            method, path, body=body, content_type=content_type, headers=headers
        )
        try:
            response = self._http.send(request)
        except httpx.TransportError as e:
            raise ApiUnavailable(
                redact_credentials(f"cannot reach the API at {self.base_url}: {e}")
            ) from e
        self._raise_for(response, method, path, lease=lease)
        return response

    def _json(self, method: str, path: str, payload: Any = None, *, lease: bool = False) -> Any:
        body = b"" if payload is None else json.dumps(payload).encode()
        response = self.request(method, path, body=body, lease=lease)
        if response.status_code == 204:
            return None
        try:
            return response.json()
        except ValueError as e:
            raise ApiUnavailable(f"the API answered {path} with something that is not JSON") from e

    @staticmethod
    def _lease(token: str, suffix: str) -> str:
        return LEASE_PATH.format(token=quote(token, safe="")) + suffix

    # --- calls ----------------------------------------------------------------------------

    def heartbeat(self) -> None:
        self._json("POST", HEARTBEAT_PATH)

    def claim(
        self, *, accepts_cluster: bool = False, accepts_egress: bool = False
    ) -> ClaimedJob | None:
        """Lease a job or unit; `accepts_cluster`: this worker can run cluster nodes;
        `accepts_egress`: its provider allows jobs network egress (the API hands such work
        only to a worker that says so)."""
        accepts = {"cluster": accepts_cluster, "egress": accepts_egress}
        body = self._json("POST", CLAIM_PATH, {"accepts": accepts})
        return None if body is None else parse_claim(body)

    # --- auctions (proofnet.messages.auction) ------------------------------------------

    def auction(self, job_id: str) -> dict[str, Any]:
        """The public state of a job's auction (every commitment and signed bid once bidding
        closed): the caller re-runs the clearing rule instead of trusting `winner`/`price`."""
        body = self._json("GET", f"/api/v1/jobs/{quote(job_id, safe='')}/auction")
        if not isinstance(body, dict):
            raise ApiUnavailable("the API's auction answer is not an object")
        return body

    def commit_bid(self, job_id: str, commitment: str) -> dict[str, Any]:
        path = f"/api/v1/worker/auctions/{quote(job_id, safe='')}/commit"
        body = self._json("POST", path, {"commitment": commitment})
        return dict(body or {})

    def reveal_bid(self, job_id: str, revealed: Mapping[str, Any]) -> dict[str, Any]:
        path = f"/api/v1/worker/auctions/{quote(job_id, safe='')}/reveal"
        body = self._json("POST", path, dict(revealed))
        return dict(body or {})

    def _lease_state(self, body: Any) -> LeaseAnswer:
        try:
            return LeaseAnswer.model_validate(body)
        except ValidationError as e:
            raise ApiUnavailable(f"the API's lease answer is malformed: {_errors(e)}") from e

    def lease_heartbeat(
        self,
        token: str,
        *,
        progress: float | None = None,
        message: str | None = None,
        rendezvous: str | None = None,
    ) -> LeaseAnswer:
        """Renew the lease; a cluster's node 0 also says where it hosts the rendezvous."""
        payload: dict[str, Any] = {}
        if progress is not None:
            payload["progress"] = min(1.0, max(0.0, progress))
        if message is not None:
            payload["message"] = message[:500]
        if rendezvous is not None:
            payload["rendezvous"] = rendezvous
        body = self._json("POST", self._lease(token, "/heartbeat"), payload, lease=True)
        return self._lease_state(body)

    def complete(self, token: str, result: Mapping[str, Any]) -> LeaseAnswer:
        body = self._json(
            "POST", self._lease(token, "/complete"), {"result": dict(result)}, lease=True
        )
        return self._lease_state(body)

    def report_deliveries(self, token: str, reports: Sequence[DeliveryReport]) -> list[str]:
        """Report how each result destination answered; returns what is still unacknowledged
        (empty: the job may complete)."""
        payload = {"reports": [r.model_dump(mode="json") for r in reports]}
        body = self._json("POST", self._lease(token, "/deliveries"), payload, lease=True)
        pending = body.get("pending") if isinstance(body, dict) else None
        if not isinstance(pending, list):
            raise ApiClientError(f"unexpected answer to a delivery report: {body!r:.200}")
        return [str(p) for p in pending]

    def job_release(self, job_id: str) -> str:
        """Whether the results of a job this worker completed are released to its submitter:
        "released", "waiting" (no releasing verdict yet) or "withheld" (never)."""
        body = self._json("GET", f"/api/v1/worker/jobs/{quote(job_id, safe='')}/release")
        state = body.get("state") if isinstance(body, dict) else None
        if state not in ("released", "waiting", "withheld"):
            raise ApiClientError(f"unexpected answer to a release query: {body!r:.200}")
        return str(state)

    def report_released_deliveries(
        self, job_id: str, reports: Sequence[DeliveryReport]
    ) -> list[str]:
        """Report the deliveries to the submitter's own destinations, made after the release;
        returns what is still unacknowledged."""
        payload = {"reports": [r.model_dump(mode="json") for r in reports]}
        path = f"/api/v1/worker/jobs/{quote(job_id, safe='')}/deliveries"
        body = self._json("POST", path, payload)
        pending = body.get("pending") if isinstance(body, dict) else None
        if not isinstance(pending, list):
            raise ApiClientError(f"unexpected answer to a delivery report: {body!r:.200}")
        return [str(p) for p in pending]

    def release(self, token: str, reason: str) -> LeaseAnswer:
        body = self._json(
            "POST", self._lease(token, "/release"), {"reason": reason[:2000]}, lease=True
        )
        return self._lease_state(body)

    def fail(self, token: str, reason: str) -> LeaseAnswer:
        body = self._json(
            "POST", self._lease(token, "/fail"), {"reason": (reason or "failed")[:2000]}, lease=True
        )
        return self._lease_state(body)

    def upload_file(
        self,
        token: str,
        name: str,
        path: Path,
        sha256: str,
        *,
        size: int | None = None,
        chunk_bytes: int = UPLOAD_CHUNK_BYTES,
        on_progress: Callable[[int], None] | None = None,
    ) -> dict[str, Any]:
        """Upload the file at `path` as result `name` (SHA-256 `sha256`) in resumable chunks.

        The API's upload session for (name, size, hash) is opened or found again, and the
        bytes go from its offset on: a call after a dropped connection or a restart sends
        only what the API does not hold. Never more than one read block (1 MiB) of the file
        is in memory: each chunk is read twice, once to hash it for the request's signature
        and once to send it. `on_progress(offset)` hears the API's offset after each chunk.
        Returns the stored result (name, sha256, size)."""
        path = Path(path)
        if size is None:
            size = path.stat().st_size
        if chunk_bytes < 1:
            raise ValueError("chunk_bytes must be positive")
        declared = {"name": name, "size": size, "sha256": sha256}
        answer = self._upload_answer(
            self._json("POST", self._lease(token, "/uploads"), declared, lease=True), name
        )
        while not answer["complete"]:
            upload_id, offset = str(answer["id"]), int(answer["offset"])
            if on_progress is not None:
                on_progress(offset)
            length = min(chunk_bytes, size - offset)
            answer = self._put_chunk(token, upload_id, path, offset, length, size, name)
        if on_progress is not None:
            on_progress(size)
        result = answer.get("result")
        if not isinstance(result, dict) or result.get("sha256") != sha256:
            raise ApiRefused(f"the API recorded result {name!r} with another hash: {result!r}")
        return result

    @staticmethod
    def _upload_answer(body: Any, name: str) -> dict[str, Any]:
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("offset"), int)
            or not isinstance(body.get("complete"), bool)
            or (not body["complete"] and not isinstance(body.get("id"), str))
        ):
            raise ApiUnavailable(f"the API's answer about the upload of {name!r} is malformed")
        return body

    def _put_chunk(
        self, token: str, upload_id: str, path: Path, offset: int, length: int, size: int, name: str
    ) -> dict[str, Any]:
        url_path = self._lease(token, f"/uploads/{quote(upload_id, safe='')}")
        digest = hashlib.sha256()
        for block in _read_range(path, offset, length):
            digest.update(block)
        url = httpx.URL(self.base_url + url_path)
        headers = sign_request_headers(
            self.key.signing_key,
            network=self.network,
            method="PUT",
            path=request_target(url.raw_path.decode("ascii")),
            body_sha256=digest.hexdigest(),
        )
        headers["Content-Type"] = "application/octet-stream"
        headers["Content-Length"] = str(length)
        headers["Content-Range"] = (
            f"bytes {offset}-{offset + length - 1}/{size}" if length else f"bytes */{size}"
        )
        current = self._http.timeout
        read = current.read
        if offset + length >= size:
            # The last chunk also stores the file (an S3 multipart upload of all of it).
            read = max(read or 30.0, 60.0 + size / (20 << 20))
        timeout = httpx.Timeout(
            connect=current.connect, read=read, write=current.write, pool=current.pool
        )
        try:
            response = self._http.request(
                "PUT",
                url,
                content=_read_range(path, offset, length),
                headers=headers,
                timeout=timeout,
            )
        except httpx.TransportError as e:
            raise ApiUnavailable(f"the upload of {name!r} broke off at byte {offset}: {e}") from e
        if response.status_code == 409:
            # Not where the API is (an earlier chunk landed after all, or another request of
            # ours still writes): carry on from the API's offset, or retry later.
            state = self._upload_answer(
                self._json("GET", self._lease(token, f"/uploads/{upload_id}"), lease=True), name
            )
            if state["offset"] == offset:
                raise ApiUnavailable(f"upload of {name!r}: {_detail(response)}", 409)
            return state
        self._raise_for(response, "PUT", url_path, lease=True)
        try:
            return self._upload_answer(response.json(), name)
        except ValueError as e:
            raise ApiUnavailable(f"the API answered the upload of {name!r} with non-JSON") from e

    def download_input(
        self, token: str, position: int, dest: Path, expected_sha256: str
    ) -> tuple[int, str]:
        """Stream input checkpoint `position` of the lease's unit to `dest`, verified.

        The bytes go to a temporary file beside `dest` while they are hashed; only when
        their SHA-256 is `expected_sha256` (the one the claim pinned) is it renamed to
        `dest`. Anything else is deleted and raises InputRejected. Returns (size, sha256).
        """
        path = self._lease(token, f"/inputs/{int(position)}")
        return self._download(
            path, Path(dest), expected_sha256, what=f"input checkpoint {position}", lease=True
        )

    def download_resume_file(
        self, token: str, position: int, dest: Path, expected_sha256: str
    ) -> tuple[int, str]:
        """Stream file `position` of the claim's `resume.files` (the lost attempt's prefix
        and checkpoint) to `dest`, verified against the hash the claim pinned."""
        path = self._lease(token, f"/resume/{int(position)}")
        return self._download(
            path, Path(dest), expected_sha256, what=f"resume file {position}", lease=True
        )

    def resume_grant(self, token: str) -> dict[str, Any] | None:
        """The submitter's grant of the sealed checkpoint this lease resumes (name ->
        stanza); None while the submitter has not posted it."""
        body = self._json("GET", self._lease(token, "/resume-grant"), lease=True)
        if not isinstance(body, dict) or "grants" not in body:
            raise ApiUnavailable("the API's resume grant is malformed")
        grants = body["grants"]
        if grants is not None and not isinstance(grants, dict):
            raise ApiUnavailable("the API's resume grant is malformed")
        return grants

    def _download(
        self,
        path: str,
        dest: Path,
        expected_sha256: str,
        *,
        what: str,
        lease: bool = False,
        attempts: int = 5,
    ) -> tuple[int, str]:
        """Stream `path` to a temporary file beside `dest`, hashing it; a transfer that breaks
        off is resumed from where it stopped (`Range`). Renamed to `dest` only when it hashes
        to `expected_sha256`; InputRejected otherwise."""
        if not _SHA256.fullmatch(expected_sha256):
            raise ValueError("expected_sha256 must be 64 lowercase hex digits")
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".input-")
        received = _Received()
        retrying = Retrying(
            stop=stop_after_attempt(attempts),
            wait=wait_exponential(multiplier=self.retry_base_s, max=self.retry_max_s),
            retry=retry_if_exception_type(ApiUnavailable),
            sleep=self.sleep,
            reraise=True,
        )
        try:
            with os.fdopen(fd, "wb") as out:
                retrying(self._download_from, path, out, received, what, lease, expected_sha256)
            got, size = received.digest.hexdigest(), received.size
            if got != expected_sha256:
                raise InputRejected(
                    f"{what} arrived with SHA-256 {got} ({size} bytes), "
                    f"not the {expected_sha256} the claim pinned; refusing it"
                )
            os.replace(tmp, dest)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        return size, got

    def _download_from(
        self,
        path: str,
        out: Any,
        received: _Received,
        what: str,
        lease: bool,
        expected_sha256: str,
    ) -> None:
        """One try: ask for the bytes past `received.size`, and write and count each block as
        it arrives, so a break-off leaves `received` where the next try resumes."""
        have = received.size
        headers = {"Range": f"bytes={have}-"} if have else None
        request = self._signed_request("GET", path, headers=headers)
        try:
            response = self._http.send(request, stream=True)
        except httpx.TransportError as e:
            raise ApiUnavailable(
                redact_credentials(f"cannot reach the API at {self.base_url}: {e}")
            ) from e
        try:
            if response.status_code >= 400:
                response.read()
                self._raise_for(response, "GET", path, lease=lease)
            announced = response.headers.get(CONTENT_SHA256_HEADER)
            if announced is not None and announced != expected_sha256:
                raise InputRejected(
                    f"{what} is announced as SHA-256 {announced}, but {expected_sha256} "
                    "was pinned; refusing it"
                )
            if have and response.status_code != 206:
                raise ApiUnavailable(f"the API did not resume {what} at byte {have}")
            for block in response.iter_bytes():
                out.write(block)
                received.digest.update(block)
                received.size += len(block)
        except httpx.TransportError as e:
            raise ApiUnavailable(f"{what} broke off at byte {received.size}: {e}") from e
        finally:
            response.close()

    # --- keys of sealed proof files (proofnet/messages/key_grant.py) ------------------------

    def key_requests(self) -> list[dict[str, Any]]:
        """Oracle-signed requests for keys of this worker's sealed uploads, unanswered."""
        body = self._json("GET", KEY_REQUESTS_PATH)
        if not isinstance(body, list):
            raise ApiUnavailable("the API's list of key requests is malformed")
        return [r for r in body if isinstance(r, dict)]

    def grant_keys(self, request_id: int, grants: Mapping[str, Mapping[str, str]]) -> None:
        self._json(
            "POST",
            f"{KEY_REQUESTS_PATH}/{int(request_id)}/grant",
            {"grants": {name: dict(stanza) for name, stanza in grants.items()}},
        )

    def key_grant(self, request_id: int) -> dict[str, Any]:
        """A grant for a request naming this worker as verifier (ApiRefused 409: pending)."""
        body = self._json("GET", f"{KEY_GRANTS_PATH}/{int(request_id)}")
        if not isinstance(body, dict):
            raise ApiUnavailable("the API's key grant is malformed")
        return body

    def download_granted(
        self, request_id: int, name: str, dest: Path, expected_sha256: str
    ) -> tuple[int, str]:
        """Stream the sealed bytes of a granted file to `dest`, checked against the hash the
        API recorded for the upload (what the provider's attestation covers)."""
        path = f"{KEY_GRANTS_PATH}/{int(request_id)}/files/{quote(name, safe='/')}"
        return self._download(path, Path(dest), expected_sha256, what=f"granted file {name}")

    def verification_tasks(self) -> list[dict[str, Any]]:
        """Verification tasks this worker was drawn for and has not reported yet."""
        body = self._json("GET", VERIFICATIONS_PATH)
        if not isinstance(body, list):
            raise ApiUnavailable("the API's list of verification tasks is malformed")
        return [t for t in body if isinstance(t, dict)]

    def download_task_file(
        self, unit_id: int, name: str, dest: Path, expected_sha256: str
    ) -> tuple[int, str]:
        """Stream a proof file a verification task names to `dest` (as uploaded: sealed
        files stay sealed), checked against the hash the API recorded for the upload."""
        path = f"{VERIFICATIONS_PATH}/{int(unit_id)}/files/{quote(name, safe='/')}"
        return self._download(path, Path(dest), expected_sha256, what=f"proof file {name}")

    def disputes(self) -> list[dict[str, Any]]:
        """Disputes of this worker's proofs it has not revealed its answer to yet."""
        body = self._json("GET", DISPUTES_PATH)
        if not isinstance(body, list):
            raise ApiUnavailable("the API's list of disputes is malformed")
        return [t for t in body if isinstance(t, dict)]

    def download_dispute_file(
        self, unit_id: int, name: str, dest: Path, expected_sha256: str
    ) -> tuple[int, str]:
        """Stream a proof file a dispute names to `dest`, as the verifiers got it."""
        path = f"{DISPUTES_PATH}/{int(unit_id)}/files/{quote(name, safe='/')}"
        return self._download(path, Path(dest), expected_sha256, what=f"proof file {name}")

    def answer_dispute(self, unit_id: int, step: str, answer: Mapping[str, Any]) -> dict[str, Any]:
        """Post this worker's signed `commitment` or `reveal` of a dispute."""
        if step not in ("commitment", "reveal"):
            raise ValueError(f"a dispute is answered by a commitment or a reveal, not {step!r}")
        body = self._json("POST", f"{DISPUTES_PATH}/{int(unit_id)}/{step}", {"answer": answer})
        return dict(body)

    def report_verification(self, unit_id: int, report: Mapping[str, Any]) -> dict[str, Any]:
        body = self._json("POST", f"{VERIFICATIONS_PATH}/{int(unit_id)}/report", {"report": report})
        return dict(body)

    def append_logs(self, token: str, lines: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        body = self._json("POST", self._lease(token, "/logs"), {"lines": list(lines)}, lease=True)
        return dict(body)

    def report_usage(self, token: str, usage: Mapping[str, Any]) -> None:
        self._json("POST", self._lease(token, "/telemetry"), dict(usage), lease=True)
