"""Real-process scenarios for topology jobs: an API process, a recording oracle, and
`proofnet worker run` processes that a test can SIGKILL (with what they left running)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from agent_fixtures import (
    NETWORK,
    ApiServer,
    GetsAgainTransport,
    RecordingOracle,
    RegisteredWorker,
    _oracle_app,
    register_worker,
)
from api_process import api_process
from relay_fixtures import RelayRepo
from waiting import until

from api.clock import utcnow
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.services.users import add_senior
from chain.devnet.testing import serve_app
from proofnet.messages.attestation import Attestation
from proofnet.processes import RoleGroup, RoleProcess

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from api_support import RELEASE_ORACLE, Wallet, sign_in  # noqa: E402


@contextlib.contextmanager
def running_api(tmp: Path, *, lease_ttl_s: int) -> Iterator[ApiServer]:
    """The API as its own process, and a submitter signed in to it."""
    trusted = (bytes(RELEASE_ORACLE.verify_key).hex(),)  # its verdicts release results
    with api_process(tmp / "api", lease_ttl_s=lease_ttl_s, oracle_keys=trusted) as (
        url,
        db,
        _process,
    ):
        config = ApiConfig(database_url=f"sqlite:///{db}", network=NETWORK, lease_ttl_s=lease_ttl_s)
        engine = make_engine(config.database_url)
        try:
            with httpx.Client(base_url=url, timeout=30, transport=GetsAgainTransport()) as http:
                wallet = Wallet()
                with open_session(engine) as session:
                    add_senior(session, config, wallet.address, utcnow())
                yield ApiServer(url, config, engine, sign_in(http, wallet), http)  # type: ignore[arg-type]
        finally:
            engine.dispose()


@contextlib.contextmanager
def recording_oracle(api: ApiServer) -> Iterator[RecordingOracle]:
    recorder = RecordingOracle(
        escrows=api.escrows, job_status=lambda job_id: api.job(job_id)["status"]
    )
    with serve_app(_oracle_app(recorder)) as url:
        recorder.url = url
        yield recorder


@dataclass
class WorkerProcess:
    registered: RegisteredWorker
    role: RoleProcess
    work_dir: Path

    @property
    def key_id(self) -> str:
        return self.registered.key.key_id

    @property
    def public_key(self) -> str:
        return self.registered.key.public_key_hex

    def kill(self) -> None:
        """SIGKILL the worker, then what it ran (its jobs run in their own sessions)."""
        assert self.role.process is not None
        self.role.process.send_signal(signal.SIGKILL)
        self.role.process.wait(10)
        kill_processes_in(self.work_dir)


def start_worker(
    group: RoleGroup,
    name: str,
    api: ApiServer,
    oracle: RecordingOracle,
    repo: RelayRepo,
    tmp: Path,
    *,
    data_dir: Path | None = None,
) -> WorkerProcess:
    """A `proofnet worker run` process; `data_dir`: where the jobs' file:// shards lie (the
    one local data directory it allows)."""
    home = tmp / name
    home.mkdir(parents=True, exist_ok=True)
    registered = register_worker(api, home / "worker.skey")
    work_dir = home / "work"
    bin_dir = str(Path(sys.executable).parent)
    role = RoleProcess(
        name,
        [
            "worker",
            "run",
            "--api-url",
            api.url,
            "--oracle-url",
            oracle.url,
            "--runtime",
            "process",
            "--key-file",
            str(registered.key_file),
            "--work-dir",
            str(work_dir),
            "--network",
            NETWORK,
            "--payout-address",
            registered.payout_address,
            "--repo-rewrite",
            repo.rewrite_arg,
            "--poll-interval",
            "0.2",
            "--advertise-host",
            "127.0.0.1",
            *(["--local-data-dir", str(data_dir)] if data_dir is not None else []),
        ],  # fmt: skip
        home / f"{name}.log",
        # Jobs find this interpreter's python3 (numpy) and torchrun first.
        env={
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PROOFNET_WORKER_HEARTBEAT_S": "0.5",
        },
        cwd=home,
    )
    group.start(role)
    return WorkerProcess(registered, role, work_dir)


def kill_processes_in(root: Path) -> list[int]:
    """SIGKILL every process whose working directory is under `root`."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if cwd == root or root in cwd.parents:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
    return killed


def processes_in(root: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
            state = (entry / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if state != "Z" and (cwd == root or root in cwd.parents):
            found.append(int(entry.name))
    return found


def wait_for(
    what: str,
    check: Callable[[], Any],
    *,
    workers: list[WorkerProcess] | None = None,
    interval: float = 0.2,
) -> Any:
    """Poll `check` until it returns something truthy (the event); only a hang bound
    (waiting.HANG_BOUND_S) ends it otherwise, with the workers' log tails."""
    return until(
        what,
        check,
        detail=lambda: "\n".join(
            f"--- {w.role.name} ---\n{w.role.tail(30)}" for w in (workers or [])
        ),
        interval_s=interval,
    )


def wait_for_attestations(
    oracle: RecordingOracle, job_id: str, count: int, *, workers: list[WorkerProcess]
) -> list[Attestation]:
    """The oracle's accepted attestations of a job, once `count` have arrived.

    A worker completes its lease before it sends the attestation (the oracle checks it
    against the completed job), so a job reads "completed" a moment before the oracle has
    the last attestation: wait for that event rather than reading the oracle at once."""

    def arrived() -> list[Attestation] | None:
        with oracle.lock:
            got = list(oracle.accepted.get(job_id, []))
        return got if len(got) >= count else None

    return wait_for(f"{count} attestations of {job_id}", arrived, workers=workers)  # type: ignore[no-any-return]


def log_texts(api: ApiServer, job_id: str) -> list[str]:
    return [line["text"] for line in api.get(f"/api/v1/jobs/{job_id}/logs")["lines"]]
