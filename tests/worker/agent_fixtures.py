"""Fixtures for the worker agent tests: a real API over HTTP, a recording oracle, a git repo.

The API is `api.app.create_app` on a SQLite file, served in-thread. A test "locks" a job's
escrow by writing the row `POST /jobs/{id}/escrow` would record after its chain check (no
chain here); the API's claim answer then names that escrow. The API does not require an
escrow to hand out a job, so a test can also show the worker refusing one without. The
oracle is a small FastAPI app that checks every attestation's COSE signature and domain with
`verify_attestation` and records what it accepted.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from sqlmodel import select
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from api.app import create_app
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.migrate import upgrade_head
from api.models import Job, JobEscrow, Lease
from api.routes.oracle_feed import escrow_script_hash
from api.services.users import add_senior
from api.storage import LocalBlobStore
from chain.devnet.testing import serve_app
from pot.manifest import Manifest
from proofnet.messages.attestation import (
    Attestation,
    AttestationError,
    EscrowRef,
    verify_attestation,
)
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.oracle_api import ATTESTATIONS_PATH, COSE_CONTENT_TYPE
from proofnet.messages.worker_auth import sign_request_headers
from worker.agent import Agent, AgentConfig, JobOutcome
from worker.api_client import ApiClient
from worker.identity import WorkerKey, bind_payout_address, create_key
from worker.oracle_client import OracleClient
from worker.runtime.base import Runtime
from worker.telemetry import TelemetrySampler
from worker.workspace import RepoCache

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from api_support import RELEASE_ORACLE, Wallet, capabilities, sign_in  # noqa: E402

NETWORK = "devnet"
REPO_URL = "https://git.example.test/numpy-mlp.git"
REPO = Path(__file__).resolve().parents[2]

# The job's trainer, committed into the fixture repository; the worker's harness trains it
# (with the worker's own copy of `pot`, which the repository does not carry).
TRAINER_PY = '''"""The job's trainer: the numpy MLP of pot's examples."""
from pot.examples.numpy_mlp import MLPTrainer

__all__ = ["MLPTrainer"]
'''
WAIT_PY = '''"""Block until the file named on the command line exists (lets a test pace a job)."""
import os
import sys
import time

print("waiting for", sys.argv[1], flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.1)
print("go", flush=True)
'''


def script_hash() -> str:
    """The escrow validator's hash: what the API's claim answer names (compiled once)."""
    return escrow_script_hash()


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "proofnet test",
        "GIT_AUTHOR_EMAIL": "test@proofnet.local",
        "GIT_COMMITTER_NAME": "proofnet test",
        "GIT_COMMITTER_EMAIL": "test@proofnet.local",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@dataclass(frozen=True)
class FixtureRepo:
    path: Path
    commit: str
    rewrites: dict[str, str]


@pytest.fixture(scope="session")
def model_repo(tmp_path_factory: pytest.TempPathFactory) -> FixtureRepo:
    """A local git repo holding the trainer (mlp.py) and wait.py."""
    root = tmp_path_factory.mktemp("git")
    repo = root / "numpy-mlp.git"
    repo.mkdir()
    _git(repo, "init", "--quiet")
    (repo / "mlp.py").write_text(TRAINER_PY)
    (repo / "wait.py").write_text(WAIT_PY)
    (repo / "README").write_text("first commit: not the one jobs pin\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "-m", "training code")
    commit = _git(repo, "rev-parse", "HEAD")
    # A later commit on the branch: the worker must check out the pinned one, not the tip.
    (repo / "README").write_text("second commit\n")
    (repo / "mlp.py").write_text("raise SystemExit('wrong commit')\n")
    _git(repo, "commit", "--quiet", "-am", "later work")
    return FixtureRepo(
        path=repo,
        commit=commit,
        rewrites={"https://git.example.test/": f"file://{root}/"},
    )


def job_spec(
    repo: FixtureRepo,
    *,
    image: str = "proofnet/test-numpy@sha256:" + "e" * 64,
    commands: list[list[str]] | None = None,
    max_duration_s: int = 300,
    steps: int = 40,
    amount: int = 2_000_000,
) -> dict[str, Any]:
    return {
        "model": {"repo_url": REPO_URL, "commit": repo.commit},
        "framework": "numpy",
        "image": image,
        # Run before the harness trains proof.trainer.
        "commands": commands or [],
        "resources": {
            "gpus": 0,
            "gpu_memory_mb": 0,
            "cpus": 2,
            "ram_mb": 4096,
            "disk_mb": 1000,
            "max_duration_s": max_duration_s,
        },
        "results": [
            {"path": "results/metrics.json", "kind": "json"},
            {"path": "results/model.weights", "kind": "model"},
            # The proof-of-training files: uploaded for the oracles' spot checks.
            {"path": "pot/**", "kind": "model"},
        ],
        "pricing": {"kind": "fixed", "amount": amount},
        "seed": secrets.randbelow(2**63),
        "proof": {
            "trainer": "mlp:MLPTrainer",
            "schedule": {"steps": steps, "dataset_size": 256, "batch_size": 64},
            "steps_per_checkpoint": 10,
            "spot_checks": 2,
            "tolerance_ppm": 0,
        },
    }


# --- the API ---------------------------------------------------------------------------------


@dataclass
class ApiServer:
    url: str
    config: ApiConfig
    engine: Any
    submitter: dict[str, str]  # Authorization header of an approved submitter
    http: httpx.Client
    escrows: dict[str, dict[str, Any]] = field(default_factory=dict)

    def submit(self, spec: dict[str, Any], *, escrow: bool = True) -> str:
        posted = self.http.post("/api/v1/jobs", json={"spec": spec}, headers=self.submitter)
        assert posted.status_code == 201, posted.text
        job_id = str(posted.json()["job_id"])
        if escrow:
            self.record_escrow(job_id)
        return job_id

    def record_escrow(self, job_id: str) -> dict[str, Any]:
        """Store the escrow row the API's escrow endpoint writes once the chain shows it."""
        tx_id, index = hashlib.sha256(job_id.encode()).hexdigest(), 1
        with open_session(self.engine) as session:
            job = session.exec(select(Job).where(Job.job_id == job_id)).one()
            assert job.id is not None
            session.add(
                JobEscrow(
                    job_id=job.id,
                    tx_id=tx_id,
                    output_index=index,
                    budget=2_000_000,
                    deadline_ms=2**42,
                    recorded_at=datetime.now(UTC),
                )
            )
            session.commit()
        escrow = {
            "network": NETWORK,
            "script_hash": script_hash(),
            "tx_id": tx_id,
            "index": index,
        }
        self.escrows[job_id] = escrow
        return escrow

    def release(self, job_id: str, *, status: str = "verified", fault: str | None = None) -> None:
        """The trusted test oracle's verdict on every lease of the job (each unit's, each
        attempt's): what releases results to the submitter (api.services.result_release)."""
        with open_session(self.engine) as session:
            job = session.exec(select(Job).where(Job.job_id == job_id)).one()
            nonces = dict.fromkeys(
                lease.nonce
                for lease in session.exec(select(Lease).where(Lease.job_id == job.id)).all()
            )
        for nonce in nonces:
            verdict = {"job_id": job_id, "nonce": nonce, "status": status, "fault": fault}
            body = json.dumps(verdict).encode()
            headers = sign_request_headers(
                RELEASE_ORACLE,
                network=NETWORK,
                method="POST",
                path="/api/v1/oracle/verdicts",
                body=body,
                nonce=secrets.token_hex(16),
            )
            headers["content-type"] = "application/json"
            posted = self.http.post("/api/v1/oracle/verdicts", content=body, headers=headers)
            assert posted.status_code == 200, posted.text

    def get(self, path: str) -> Any:
        response = self.http.get(path, headers=self.submitter)
        assert response.status_code == 200, response.text
        return response.json()

    def job(self, job_id: str) -> dict[str, Any]:
        return dict(self.get(f"/api/v1/jobs/{job_id}"))


class GetsAgainTransport(httpx.HTTPTransport):
    """Sends a GET once more, on a fresh connection, when the server had closed the
    kept-alive one as the request went out: its keep-alive timeout passes between a test's
    polls on a busy machine (seen under scripts/ci/stress_slow.sh). A GET is safe to repeat;
    anything else is sent once."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "GET":
            return super().handle_request(request)
        response: httpx.Response = Retrying(
            stop=stop_after_attempt(3),
            retry=retry_if_exception_type(httpx.RemoteProtocolError),
            reraise=True,
        )(super().handle_request, request)
        return response


def make_api_server(
    tmp_path: Path, *, lease_ttl_s: int = 30, **overrides: Any
) -> Iterator[ApiServer]:
    """The API in-thread; `overrides` are ApiConfig fields (e.g. max_attempts)."""
    # The test oracle whose verdicts release results (ApiServer.release) is always trusted.
    trusted = (*overrides.pop("oracle_keys", ()), bytes(RELEASE_ORACLE.verify_key).hex())
    config = ApiConfig(
        database_url=f"sqlite:///{tmp_path / 'api.db'}",
        network=NETWORK,
        rate_limit_per_minute=1_000_000,
        lease_ttl_s=lease_ttl_s,
        oracle_keys=trusted,
        **overrides,
    )
    engine = make_engine(config.database_url)
    upgrade_head(engine)  # serve_app runs without the lifespan that would migrate
    app = create_app(config=config, engine=engine, run_sweeper=False)
    app.state.blob_store = LocalBlobStore(tmp_path / "blobs")
    with (
        serve_app(app) as url,
        httpx.Client(base_url=url, timeout=30, transport=GetsAgainTransport()) as http,
    ):
        wallet = Wallet()
        with open_session(engine) as session:
            add_senior(session, config, wallet.address, app.state.clock())
        server = ApiServer(url, config, engine, sign_in(http, wallet), http)  # type: ignore[arg-type]
        yield server
    engine.dispose()


@pytest.fixture
def api_server(tmp_path: Path) -> Iterator[ApiServer]:
    yield from make_api_server(tmp_path)


# --- the oracle ------------------------------------------------------------------------------


@dataclass
class RecordingOracle:
    url: str = ""
    accepted: dict[str, list[Attestation]] = field(default_factory=dict)
    cose: dict[str, bytes] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)
    escrows: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Answer this many requests with 503 before accepting (to exercise retries).
    fail_next: int = 0
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The API's status of each accepted attestation's job when it arrived (a real oracle
    # verifies against the completed job, so the worker must complete before attesting).
    job_status: Any = None  # Callable[[str], str]
    status_on_receipt: dict[str, str] = field(default_factory=dict)

    def all(self) -> list[Attestation]:
        return [a for atts in self.accepted.values() for a in atts]


def _oracle_app(oracle: RecordingOracle) -> FastAPI:
    app = FastAPI()

    @app.post(ATTESTATIONS_PATH)
    async def attest(request: Request) -> Response:
        body = await request.body()
        with oracle.lock:
            oracle.requests += 1
            if oracle.fail_next > 0:
                oracle.fail_next -= 1
                return JSONResponse({"detail": "try later"}, status_code=503)
        if request.headers.get("content-type") != COSE_CONTENT_TYPE:
            return JSONResponse({"detail": "content type must be application/cose"}, 415)
        try:
            unchecked = verify_attestation(
                body, expected_network=NETWORK, expected_script_hash=script_hash()
            )
            escrow = oracle.escrows[unchecked.job_id]
            att = verify_attestation(
                body,
                expected_network=NETWORK,
                expected_script_hash=script_hash(),
                expected_escrow=EscrowRef(tx_id=escrow["tx_id"], index=escrow["index"]),
                expected_job_id=unchecked.job_id,
            )
        except (AttestationError, KeyError) as e:
            with oracle.lock:
                oracle.refused.append(str(e))
            return JSONResponse({"detail": f"refused: {e}"}, status_code=422)
        with oracle.lock:
            seen = oracle.cose.get(att.job_id)
            if seen == body:  # a resend of what was accepted: idempotent
                return JSONResponse({"job_id": att.job_id, "duplicate": True})
            oracle.accepted.setdefault(att.job_id, []).append(att)
            oracle.cose[att.job_id] = body
            if oracle.job_status is not None:
                oracle.status_on_receipt[att.job_id] = oracle.job_status(att.job_id)
        return JSONResponse({"job_id": att.job_id, "duplicate": False}, status_code=202)

    return app


@pytest.fixture
def oracle(api_server: ApiServer) -> Iterator[RecordingOracle]:
    recorder = RecordingOracle(
        escrows=api_server.escrows, job_status=lambda job_id: api_server.job(job_id)["status"]
    )
    with serve_app(_oracle_app(recorder)) as url:
        recorder.url = url
        yield recorder


# --- workers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegisteredWorker:
    key: WorkerKey
    key_file: Path
    payout_address: str


def register_worker(api: ApiServer, key_file: Path) -> RegisteredWorker:
    """Create a worker key and register it (CPU-only) the way `onboard` does."""
    key = create_key(key_file)
    payout = Wallet().address
    with ApiClient(api.url, key, NETWORK) as client:
        nonce = client.request("POST", "/api/v1/worker/challenge").json()["nonce"]
        binding = bind_payout_address(key, payout, NETWORK, nonce)
        body = {
            "binding": binding.model_dump(mode="json"),
            "gpus": [],
            "capabilities": capabilities([]),
        }
        client.request("POST", "/api/v1/worker/register", body=json.dumps(body).encode())
    return RegisteredWorker(key=key, key_file=key_file, payout_address=payout)


@pytest.fixture
def job_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Process-runtime jobs find `python3` with numpy: this interpreter's bin dir first."""
    bin_dir = Path(sys.executable).parent
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


# --- an agent wired to the fixtures -----------------------------------------------------


class AgentHarness:
    def __init__(
        self,
        tmp: Path,
        api: ApiServer,
        oracle: RecordingOracle,
        repo: FixtureRepo,
        runtime: Runtime,
        **config: object,
    ) -> None:
        self.worker: RegisteredWorker = register_worker(api, tmp / "worker.skey")
        self.config = AgentConfig(
            work_dir=tmp / "work",
            network=NETWORK,
            payout_address=self.worker.payout_address,
            heartbeat_s=1.0,
            poll_interval_s=0.2,
            oracle_retry_base_s=0.05,
            keep_workspaces=True,
            **config,  # type: ignore[arg-type]
        )
        self.api = ApiClient(api.url, self.worker.key, NETWORK)
        self.oracle_client = OracleClient(oracle.url)
        self.sampler = TelemetrySampler(interval_s=1.0)
        self.agent = Agent(
            self.config,
            api=self.api,
            oracle=self.oracle_client,
            runtime=runtime,
            sampler=self.sampler,
            key=self.worker.key,
            repos=RepoCache(self.config.repo_cache_dir, rewrites=repo.rewrites),
        )

    def close(self) -> None:
        self.api.close()
        self.oracle_client.close()
        self.sampler.close()


def check_attested_job(
    outcome: JobOutcome,
    api: ApiServer,
    oracle: RecordingOracle,
    harness: AgentHarness,
    job_id: str,
    spec: dict[str, object],
) -> None:
    """The attestation matches what the job produced and what the API stored."""
    assert outcome.status == "attested", outcome.reason
    assert outcome.reason == "delivered"
    atts = oracle.accepted[job_id]
    assert len(atts) == 1 and oracle.all() == atts
    att = atts[0]
    parsed = JobSpec.from_dict(spec)  # type: ignore[arg-type]
    job_dir = harness.config.jobs_dir / f"{job_id}-a{outcome.attempt}"
    # The PoT root is the Merkle root of the manifest the job wrote.
    assert att.pot_root == Manifest.load(job_dir / "pot").root == outcome.pot_root
    api.release(job_id)  # the recording oracle verifies nothing: its verdict, posted here
    uploads = {r["name"]: r["sha256"] for r in api.get(f"/api/v1/jobs/{job_id}/results")}
    stored = {n: d for n, d in uploads.items() if not n.startswith("pot/")}
    assert dict(att.result_hashes) == stored
    assert set(stored) == {"results/metrics.json", "results/model.weights"}
    # Every proof file is uploaded as it is on disk, and none is named in the attestation.
    proof = {n: d for n, d in uploads.items() if n.startswith("pot/")}
    on_disk = {f"pot/{p.name}" for p in (job_dir / "pot").iterdir()}
    assert set(proof) == on_disk and "pot/manifest.json" in proof
    for name, digest in proof.items():
        assert hashlib.sha256((job_dir / name).read_bytes()).hexdigest() == digest
    for name, digest in stored.items():
        raw = api.http.get(f"/api/v1/jobs/{job_id}/results/{name}", headers=api.submitter)
        assert raw.status_code == 200, raw.text
        assert hashlib.sha256(raw.content).hexdigest() == digest
        assert hashlib.sha256((job_dir / name).read_bytes()).hexdigest() == digest
    metrics = json.loads((job_dir / "results" / "metrics.json").read_text())
    assert att.metrics == {k: metrics[k] for k in ("accuracy", "final_loss", "steps")}
    assert att.metrics["steps"] == 40
    assert att.job_id == job_id and att.domain.escrow.tx_id == api.escrows[job_id]["tx_id"]
    assert att.worker_key == harness.worker.key.public_key_hex
    assert att.payout_address == harness.worker.payout_address
    assert att.command_hash == parsed.command_hash and att.image_digest == parsed.image_digest
    assert att.amount == parsed.max_amount and att.gpu_model == "CPU"
    assert att.gpu_milliseconds == 0 and att.ended_ms >= att.started_ms
    job = api.job(job_id)
    assert job["status"] == "completed"
    assert oracle.status_on_receipt[job_id] == "completed"
    assert job["result"]["pot_root"] == att.pot_root
    assert job["result"]["attestation"] == oracle.cose[job_id].hex()
    # The claim nonce seeded the data order and is what the attestation carries.
    assert len(att.nonce) == 64
    logs = api.get(f"/api/v1/jobs/{job_id}/logs")["lines"]
    texts = [line["text"] for line in logs]
    assert any(att.pot_root in t for t in texts if t.startswith("{"))  # train's own output
    assert any("uploaded results/metrics.json" in t for t in texts)
    usage = api.get(f"/api/v1/jobs/{job_id}/usage")
    assert usage["usage"]["gpu_count"] == 0 and usage["usage"]["duration_s"] > 0


@pytest.fixture
def harness(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,
    model_repo: FixtureRepo,
    job_path: None,
) -> Iterator[AgentHarness]:
    """An agent on the process runtime, wired to the real API and the recording oracle."""
    from worker.runtime.process_runtime import ProcessRuntime

    h = AgentHarness(tmp_path, api_server, oracle, model_repo, ProcessRuntime())
    yield h
    h.close()
