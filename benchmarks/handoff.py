"""`proofnet bench handoff`: what handing a relay stage's checkpoint to the next stage costs,
against the compute of the stage that made it.

A real API process on loopback (SQLite, local blob store) holds a two-stage relay job. One
worker key claims stage 0 and runs the numpy relay stage (`pot.examples.numpy_relay`,
as a job process, with proof of training) on a shard, sized so that its checkpoint (weights
and optimizer state) is `size_mb` MiB. The hand-off is then timed the way the agent does it:

* upload: hash the checkpoint and stream it as the lease's `checkpoint/<name>` result in
  resumable chunks (`ApiClient.upload_file`; the API hashes and stores it);
* complete: the lease's completion naming the checkpoint's hash (which releases stage 1);
* claim: a second worker key claims stage 1, whose claim pins that hash;
* download: stream input checkpoint 0 through the lease to disk, SHA-256 verified on
  arrival (`ApiClient.download_input`).

The report gives each part in seconds, the hand-off's share of the stage's compute, the
transfer rates, the peak resident memory (VmHWM) of the API process and of the worker
before and after each transfer (streaming keeps both flat whatever the size), and what
sealing the checkpoint (envelope v2, as a sealed job's proof files are) costs. With
`synthetic` the checkpoint is a generated file instead of stage 0's training output, for
transfer figures at sizes a quick training run does not reach (1 GiB). The API runs in a child process started from a short program below: the
worker package itself never imports the API.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from pot import env, launch
from pot.examples.numpy_relay import make_shards
from proofnet.messages.jobspec import JobSpec
from proofnet.processes import free_port
from worker.api_client import ApiClient
from worker.identity import bind_payout_address, create_key
from worker.results import sha256_file

MiB = 2**20
FEATURES, CLASSES = 256, 16
CHECKPOINT = "model.bin"
NETWORK = "devnet"

# The API, as a child process: migrate, make `senior` a member who may submit, serve. Claims
# need no recorded escrow here (no chain runs), which is ApiConfig's default off `api serve`.
_API_CHILD = """
import sys
import uvicorn
from api.app import create_app
from api.clock import utcnow
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.migrate import upgrade_head
from api.services.users import add_senior
from api.storage import LocalBlobStore

db, blobs, port, max_body, senior = sys.argv[1:6]
config = ApiConfig(
    database_url="sqlite:///" + db,
    network="devnet",
    rate_limit_per_minute=1_000_000,
    max_body_bytes=int(max_body),
    lease_ttl_s=600,
)
engine = make_engine(config.database_url)
upgrade_head(engine)
with open_session(engine) as session:
    add_senior(session, config, senior, utcnow())
app = create_app(config=config, engine=engine)
app.state.blob_store = LocalBlobStore(blobs)
uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning", access_log=False)
"""


class HandoffBenchError(RuntimeError):
    """The benchmark could not run (the API did not start, a step was refused)."""


def hidden_for(size_mb: float) -> int:
    """Hidden width whose relay checkpoint (weights + momentum, float64) is ~`size_mb` MiB."""
    per_unit = 2 * 8 * (FEATURES + 1 + CLASSES)
    return max(1, round(size_mb * MiB / per_unit))


class _Wallet:
    """The submitter: signs in as a CIP-30 wallet would (CIP-8 `signData`)."""

    def __init__(self) -> None:
        from pycardano import PaymentSigningKey

        self.key = PaymentSigningKey.generate()

    @property
    def address(self) -> str:
        from pycardano import Address, Network

        return str(Address(self.key.to_verification_key().hash(), network=Network.TESTNET))

    def sign_in(self, http: httpx.Client) -> dict[str, str]:
        from pycardano import Network
        from pycardano.cip import cip8

        challenge = _ok(http.post("/api/v1/auth/challenge", json={"address": self.address}))
        signed = cip8.sign(
            challenge["message"], self.key, attach_cose_key=True, network=Network.TESTNET
        )
        assert isinstance(signed, dict)
        token = _ok(
            http.post(
                "/api/v1/auth/verify",
                json={
                    "address": self.address,
                    "nonce": challenge["nonce"],
                    "signature": signed["signature"],
                    "key": signed["key"],
                },
            )
        )["access_token"]
        return {"Authorization": f"Bearer {token}"}


def _ok(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise HandoffBenchError(
            f"{response.request.method} {response.request.url.path}: HTTP "
            f"{response.status_code}: {response.text[:500]}"
        )
    return response.json()


@contextmanager
def _api(work: Path, max_body: int, senior: str) -> Iterator[tuple[str, int]]:
    port = free_port()
    log_path = work / "api.log"
    with log_path.open("wb") as log:
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _API_CHILD,
                str(work / "api.db"),
                str(work / "blobs"),
                str(port),
                str(max_body),
                senior,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=work,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if child.poll() is not None:
                raise HandoffBenchError(
                    f"the API exited with {child.returncode}: {log_path.read_text()[-2000:]}"
                )
            try:
                if httpx.get(f"{url}/api/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise HandoffBenchError("the API did not answer within 60 s")
            time.sleep(0.1)
        yield url, child.pid
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)


def _register(url: str, key_file: Path, payout: str) -> ApiClient:
    """A CPU-only worker key registered with the API, as `proofnet worker onboard` does."""
    from proofnet.messages.registration import (
        HostReport,
        ProviderRegistration,
        RuntimeReport,
        WorkerCapabilities,
    )

    key = create_key(key_file)
    client = ApiClient(url, key, NETWORK, timeout_s=600)
    nonce = client.request("POST", "/api/v1/worker/challenge").json()["nonce"]
    registration = ProviderRegistration(
        binding=bind_payout_address(key, payout, NETWORK, nonce),
        gpus=[],
        capabilities=WorkerCapabilities(
            worker_version="bench",
            cpu_only=True,
            cpu_only_reason="proofnet bench handoff",
            driver_version=None,
            cuda_version=None,
            gpus=[],
            host=HostReport(
                os=sys.platform,
                kernel="",
                arch="",
                cpu_model="",
                cpu_count=os.cpu_count() or 1,
                ram_total_bytes=0,
                disk_free_bytes=0,
                python=sys.version.split()[0],
            ),
            runtime_check=RuntimeReport(status="skipped", problem="", diagnosis="benchmark"),
            challenge_seed_source="local-nonce",
            challenges=[],
        ),
    )
    client.request("POST", "/api/v1/worker/register", body=registration.model_dump_json().encode())
    return client


def _spec(shards: list[Path], hidden: int, steps: int, k: int, examples: int) -> dict[str, Any]:
    return {
        "model": {"repo_url": "https://git.example.invalid/relay.git", "commit": "0" * 40},
        "framework": "numpy",
        "image": "proofnet/bench-numpy@sha256:" + "0" * 64,
        "commands": [],
        "resources": {
            "gpus": 0,
            "gpu_memory_mb": 0,
            "cpus": 1,
            "ram_mb": 8192,
            "disk_mb": 10_000,
            "max_duration_s": 3600,
        },
        "data": [
            {"uri": f"file://{p}", "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
            for p in shards
        ],
        "results": [],
        "pricing": {"kind": "fixed", "amount": 2},
        "seed": 1,
        "proof": {
            "trainer": "pot.examples.numpy_relay:StageTrainer",
            "config": {"hidden": hidden, "classes": CLASSES, "lr": "0.002"},
            "schedule": {"steps": steps, "dataset_size": examples, "batch_size": 64},
            "steps_per_checkpoint": k,
            "spot_checks": 1,
            "tolerance_ppm": 0,
        },
        "topology": {
            "kind": "relay",
            "stages": [{"shards": [0]}, {"shards": [1], "after": [0]}],
            "checkpoint": CHECKPOINT,
            "stage_amount": 1,
        },
    }


def _run_stage(job_dir: Path, shard: Path, nonce: str, spec: dict[str, Any]) -> float:
    """Stage 0's compute, as the harness the worker would start; wall seconds."""
    lib = launch.install(job_dir.parent / "harness")
    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(lib),
        env.PYTHON_LIB: str(lib),
        **JobSpec.from_dict(spec).job_env(job_dir, bytes.fromhex(nonce)).to_environ(),
        **env.UnitEnv(
            kind="stage", index=0, shards=(shard,), checkpoint_out=job_dir / CHECKPOINT
        ).to_environ(),
    }
    started = time.perf_counter()
    done = subprocess.run(
        list(launch.harness_argv(sys.executable, "train")),
        env=environ,
        cwd=job_dir,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise HandoffBenchError(f"the stage failed: {done.stderr[-2000:]}")
    return elapsed


def run_handoff_bench(
    *,
    size_mb: float = 100.0,
    steps: int = 100,
    examples: int = 2048,
    steps_per_checkpoint: int = 100,
    synthetic: bool = False,
    work_dir: Path | None = None,
) -> dict[str, Any]:
    """Measure one stage hand-off of a `size_mb` MiB checkpoint; a JSON-able report.

    `synthetic`: skip training stage 0 and hand off a generated file of that size (for
    transfer figures at sizes no quick training run makes, e.g. 1 GiB)."""
    hidden = hidden_for(size_mb)
    work = Path(tempfile.mkdtemp(prefix="proofnet-handoff-", dir=work_dir))
    try:
        shards = make_shards(
            work / "data",
            shards=2,
            examples=examples,
            features=FEATURES,
            classes=CLASSES,
            seed=1,
        )
        spec = _spec(shards, hidden, steps, steps_per_checkpoint, examples)
        job_id = JobSpec.from_dict(spec).job_id
        submitter = _Wallet()
        payout = _Wallet().address
        with _api(work, max_body=MiB, senior=submitter.address) as (url, api_pid):
            with httpx.Client(base_url=url, timeout=60) as http:
                headers = submitter.sign_in(http)
                _ok(http.post("/api/v1/jobs", json={"spec": spec}, headers=headers))
            first = _register(url, work / "a.skey", payout)
            second = _register(url, work / "b.skey", payout)
            try:
                stage = _Stage(work, shards[0], spec, size_mb if synthetic else None)
                report = _measure(first, second, work, job_id, stage, api_pid)
            finally:
                first.close()
                second.close()
        report.update(
            {
                "requested_mib": size_mb,
                "hidden": None if synthetic else hidden,
                "stage": {
                    "steps": None if synthetic else steps,
                    "examples": None if synthetic else examples,
                    "steps_per_checkpoint": steps_per_checkpoint,
                    **report["stage"],
                },
            }
        )
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)


@dataclass(frozen=True)
class _Stage:
    work: Path
    shard: Path
    spec: dict[str, Any]
    synthetic_mib: float | None  # None: train stage 0 for real

    def make(self, job_dir: Path, nonce: str) -> float | None:
        """Stage 0's checkpoint in `job_dir`; the compute seconds (None when generated)."""
        if self.synthetic_mib is None:
            return _run_stage(job_dir, self.shard, nonce, self.spec)
        size = int(self.synthetic_mib * MiB)
        block = os.urandom(MiB)
        with (job_dir / CHECKPOINT).open("wb") as out:
            for offset in range(0, size, MiB):
                # Distinct blocks: nothing downstream can shortcut repeated content.
                head = hashlib.sha256(offset.to_bytes(8, "big")).digest()
                out.write((head + block[32:])[: min(MiB, size - offset)])
        return None


def peak_rss_mib(pid: int | None = None) -> float | None:
    """Peak resident memory (VmHWM) of a process so far, MiB; None where /proc has none."""
    path = Path(f"/proc/{'self' if pid is None else pid}/status")
    try:
        for line in path.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _seal_figures(checkpoint: Path, work: Path) -> dict[str, float | None]:
    """What sealing the file costs the provider and opening it the submitter (envelope v2,
    streamed), and the peak memory of doing it."""
    from nacl.public import PrivateKey

    from proofnet.messages.envelope import content_key, new_secret, open_file, seal_file

    mib = checkpoint.stat().st_size / MiB
    before = peak_rss_mib()
    recipient = PrivateKey.generate()
    key = content_key(new_secret(), CHECKPOINT)
    sealed, opened = work / "sealed.bin", work / "opened.bin"
    started = time.perf_counter()
    seal_file(
        checkpoint, sealed, name=CHECKPOINT, key=key, recipients=[bytes(recipient.public_key).hex()]
    )
    seal_s = time.perf_counter() - started
    started = time.perf_counter()
    open_file(sealed, opened, private_key=bytes(recipient), name=CHECKPOINT)
    open_s = time.perf_counter() - started
    sealed.unlink()
    opened.unlink()
    return {
        "seal_s": round(seal_s, 3),
        "open_s": round(open_s, 3),
        "seal_mib_per_s": round(mib / seal_s, 1) if seal_s > 0 else None,
        "open_mib_per_s": round(mib / open_s, 1) if open_s > 0 else None,
        "peak_rss_mib_before": before,
        "peak_rss_mib_after": peak_rss_mib(),
    }


def _measure(
    first: ApiClient,
    second: ApiClient,
    work: Path,
    job_id: str,
    stage: _Stage,
    api_pid: int,
) -> dict[str, Any]:
    stage0 = first.claim()
    if stage0 is None or stage0.unit is None or stage0.unit.index != 0:
        raise HandoffBenchError(f"expected to claim stage 0 of {job_id}, got {stage0!r}")
    job_dir = work / "stage0"
    job_dir.mkdir()
    compute_s = stage.make(job_dir, stage0.nonce)
    checkpoint = job_dir / CHECKPOINT
    size = checkpoint.stat().st_size
    api_before = peak_rss_mib(api_pid)
    worker_before = peak_rss_mib()

    started = time.perf_counter()
    digest = sha256_file(checkpoint)
    first.upload_file(stage0.lease_token, f"checkpoint/{CHECKPOINT}", checkpoint, digest)
    upload_s = time.perf_counter() - started
    api_after_upload = peak_rss_mib(api_pid)
    worker_after_upload = peak_rss_mib()

    started = time.perf_counter()
    first.complete(stage0.lease_token, {"unit": {"index": 0, "output": digest, "metrics": {}}})
    complete_s = time.perf_counter() - started

    started = time.perf_counter()
    stage1 = second.claim()
    claim_s = time.perf_counter() - started
    if stage1 is None or stage1.unit is None or stage1.unit.input_hashes != (digest,):
        raise HandoffBenchError(f"stage 1 was not handed stage 0's checkpoint: {stage1!r}")

    started = time.perf_counter()
    got_size, got = second.download_input(
        stage1.lease_token, 0, work / "stage1" / "input-0", digest
    )
    download_s = time.perf_counter() - started
    if (got_size, got) != (size, digest):
        raise HandoffBenchError("the downloaded checkpoint is not the uploaded one")
    api_after_download = peak_rss_mib(api_pid)
    worker_after_download = peak_rss_mib()
    (work / "stage1" / "input-0").unlink()
    sealing = _seal_figures(checkpoint, work)
    handoff_s = upload_s + complete_s + claim_s + download_s
    mib = size / MiB
    return {
        "checkpoint_bytes": size,
        "checkpoint_mib": round(mib, 1),
        "stage": {"compute_s": None if compute_s is None else round(compute_s, 3)},
        "handoff": {
            "upload_s": round(upload_s, 3),
            "complete_s": round(complete_s, 3),
            "claim_s": round(claim_s, 3),
            "download_verify_s": round(download_s, 3),
            "total_s": round(handoff_s, 3),
            "upload_mib_per_s": round(mib / upload_s, 1) if upload_s > 0 else None,
            "download_mib_per_s": round(mib / download_s, 1) if download_s > 0 else None,
        },
        # Peak resident memory (VmHWM, MiB) before and after each transfer: streaming keeps
        # both sides flat however large the checkpoint.
        "memory": {
            "api_peak_rss_mib_before": api_before,
            "api_peak_rss_mib_after_upload": api_after_upload,
            "api_peak_rss_mib_after_download": api_after_download,
            "worker_peak_rss_mib_before": worker_before,
            "worker_peak_rss_mib_after_upload": worker_after_upload,
            "worker_peak_rss_mib_after_download": worker_after_download,
        },
        "sealing": sealing,
        "overhead_pct": (
            round(100.0 * handoff_s / compute_s, 2)
            if compute_s is not None and compute_s > 0
            else None
        ),
        "cpu_count": os.cpu_count(),
    }
