"""A small stand-in for the API's worker endpoints (httpx.MockTransport), for topology-unit
tests of the worker's parts before (and besides) the real-process tests."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from proofnet.messages.jobspec import JobSpec

ESCROW = {"network": "devnet", "script_hash": "ab" * 28, "tx_id": "cd" * 32, "index": 0}
_LEASE = re.compile(r"/api/v1/worker/leases/(?P<token>[^/]+)/(?P<what>[a-z]+)(?:/(?P<rest>.+))?")


def claim_body(spec: dict[str, Any], unit: dict[str, Any] | None, *, token: str) -> dict[str, Any]:
    return {
        "job_id": JobSpec.from_dict(spec).job_id,
        "spec": spec,
        "lease_token": token,
        "nonce": hashlib.sha256(token.encode()).hexdigest(),
        "attempt": 1,
        "expires_at": (datetime.now(UTC) + timedelta(seconds=60)).isoformat(),
        "lease_ttl_s": 30,
        "escrow": ESCROW,
        "sealing": None,
        "unit": unit,
    }


def published_rendezvous(beats: list[dict[str, Any]]) -> str | None:
    """Where node 0 said it hosts the rendezvous: the first heartbeat that carries it.

    The lease keeper beats while the workspace is prepared, before the cluster wait starts
    (on a loaded machine, many times): those beats carry none, so never read beats[0]."""
    return next((b["rendezvous"] for b in beats if b.get("rendezvous")), None)


@dataclass
class FakeApi:
    claims: list[dict[str, Any]] = field(default_factory=list)
    # Input checkpoint bytes by position; `announce` overrides the X-Content-SHA256 header.
    inputs: dict[int, bytes] = field(default_factory=dict)
    announce: dict[int, str] = field(default_factory=dict)
    results: dict[str, bytes] = field(default_factory=dict)
    completions: list[dict[str, Any]] = field(default_factory=list)
    ended: list[tuple[str, str]] = field(default_factory=list)  # (release|fail, reason)
    heartbeats: list[dict[str, Any]] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)
    # What a lease heartbeat answers for `cluster` (given the heartbeats so far), and when
    # it answers 409 instead.
    cluster: Callable[[list[dict[str, Any]]], dict[str, Any] | None] = lambda _beats: None
    lost: Callable[[list[dict[str, Any]]], bool] = lambda _beats: False
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Upload sessions: id -> (what was declared, bytes so far).
    uploads: dict[str, tuple[dict[str, Any], bytearray]] = field(default_factory=dict)

    def _lease(self, job_id: str) -> dict[str, Any]:
        return {
            "job_id": job_id,
            "status": "leased",
            "expires_at": (datetime.now(UTC) + timedelta(seconds=60)).isoformat(),
            "outcome": None,
            "cluster": self.cluster(self.heartbeats),
        }

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/v1/worker/claim":
            with self.lock:
                if not self.claims:
                    return httpx.Response(204)
                return httpx.Response(200, json=self.claims.pop(0))
        match = _LEASE.fullmatch(path)
        if match is None:
            return httpx.Response(404, json={"detail": f"no route {path}"})
        what, rest = match["what"], match["rest"]
        raw_body = what in ("results", "uploads") and request.method == "PUT"
        body = json.loads(request.content) if request.content and not raw_body else {}
        job_id = "0" * 64
        with self.lock:
            if what == "heartbeat":
                self.heartbeats.append(body)
                if self.lost(self.heartbeats):
                    return httpx.Response(409, json={"detail": "the cluster lost node 1"})
                return httpx.Response(200, json=self._lease(job_id))
            if what == "inputs":
                position = int(rest or "0")
                data = self.inputs[position]
                digest = self.announce.get(position, hashlib.sha256(data).hexdigest())
                return httpx.Response(200, content=data, headers={"X-Content-SHA256": digest})
            if what == "results":
                assert rest is not None
                self.results[rest] = request.content
                digest = hashlib.sha256(request.content).hexdigest()
                return httpx.Response(
                    200,
                    json={
                        "name": rest,
                        "sha256": digest,
                        "size": len(request.content),
                        "uploaded_at": datetime.now(UTC).isoformat(),
                    },
                )
            if what == "uploads":
                return self._upload(request, rest, body)
            if what == "logs":
                self.log_lines.extend(line["text"] for line in body["lines"])
                return httpx.Response(
                    200, json={"stored": len(body["lines"]), "truncated_lines": 0, "dropped_old": 0}
                )
            if what == "telemetry":
                return httpx.Response(200, json={})
            if what == "complete":
                self.completions.append(body["result"])
                return httpx.Response(200, json=self._lease(job_id))
            if what in ("release", "fail"):
                self.ended.append((what, body.get("reason", "")))
                return httpx.Response(200, json=self._lease(job_id))
        return httpx.Response(404, json={"detail": f"no route {path}"})

    def _upload(self, request: httpx.Request, rest: str | None, body: dict[str, Any]) -> Any:
        """The resumable upload protocol, whole chunks only (api/routes/worker_io.py)."""
        if request.method == "POST":
            upload_id = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32]
            self.uploads.setdefault(upload_id, (body, bytearray()))
            declared, got = self.uploads[upload_id]
            return httpx.Response(201, json=self._upload_state(upload_id, declared, got))
        assert rest is not None
        declared, got = self.uploads[rest]
        if request.method == "PUT":
            got += request.content
            if len(got) == declared["size"]:
                name = declared["name"]
                self.results[name] = bytes(got)
                state = self._upload_state(rest, declared, got)
                state["complete"] = True
                state["result"] = {
                    "name": name,
                    "sha256": hashlib.sha256(got).hexdigest(),
                    "size": len(got),
                    "uploaded_at": datetime.now(UTC).isoformat(),
                }
                return httpx.Response(200, json=state)
        return httpx.Response(200, json=self._upload_state(rest, declared, got))

    @staticmethod
    def _upload_state(upload_id: str, declared: dict[str, Any], got: bytearray) -> dict[str, Any]:
        return {
            "id": upload_id,
            "name": declared["name"],
            "size": declared["size"],
            "sha256": declared["sha256"],
            "offset": len(got),
            "complete": False,
            "result": None,
        }

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)


@dataclass
class FakeOracle:
    received: list[bytes] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.received.append(request.content)
        return httpx.Response(202, json={"duplicate": False})

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)
