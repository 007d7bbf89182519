"""`proofnet demo`: the whole loop on embedded defaults, on this machine, with real processes.

    devnet -> deploy (2-of-3 oracles) + test NTX -> API (+ seniors) -> 3 oracles -> 2 workers
    -> approved submitter (5 endorsements) -> job(s) -> escrow locked and recorded
    -> a worker trains with proof of training, uploads, attests -> oracles verify (spot check)
    -> one batched settlement co-signed 2-of-3 -> confirmed -> audited from the chain

Every role is its own `proofnet <role>` process with its log under `<data dir>/logs/`; the
demo itself only plays the submitter (wallet signatures, the escrow lock) and the auditor.
`--shape relay` (and `stopped`) posts a relay pipeline instead, run by three workers
(`demos.relay`).
Workers use the process runtime (jobs run on the host, NOT isolated): a Docker engine with
the right image is not something a demo machine can be assumed to have.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table
from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_delay, wait_fixed

from demos import job as demo_job
from demos import relay as demo_relay
from proofnet.processes import (
    ProcessStartError,
    RoleGroup,
    RoleProcess,
    free_port,
    run_role_command,
)

NTX_NAME = b"NTX"
ORACLES = 3
THRESHOLD = 2
WORKERS = 2
SENIORS = 5
SUBMITTER_NTX = 10_000_000
# "single": one training job (what `make demo` runs); the others: demos.relay.
SHAPES = ("single", *demo_relay.SHAPES)


# Defined beside the demos' shared pieces so the relay demo can raise it without importing
# this module back; re-exported here for callers of `demos.demo`.
DemoError = demo_job.DemoError


@dataclass(frozen=True)
class DemoOptions:
    block_time: float = 0.5
    jobs: int = 1
    # Seconds for the loop (claim -> settled) before the demo gives up.
    loop_timeout_s: float = 240.0
    confirmation_depth: int = 2
    shape: str = "single"

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"demo shape must be one of {', '.join(SHAPES)}, not {self.shape!r}")


@dataclass
class _Wallet:
    """A key-held wallet that signs like a CIP-30 wallet (`signData`, CIP-8)."""

    signing_key: Any  # pycardano.PaymentSigningKey

    @classmethod
    def generate(cls) -> _Wallet:
        from pycardano import PaymentSigningKey

        return cls(PaymentSigningKey.generate())

    @property
    def address(self) -> str:
        from pycardano import Address, Network

        return str(Address(self.signing_key.to_verification_key().hash(), network=Network.TESTNET))

    def sign_data(self, message: str) -> dict[str, str]:
        from pycardano import Network
        from pycardano.cip import cip8

        signed = cip8.sign(message, self.signing_key, attach_cose_key=True, network=Network.TESTNET)
        assert isinstance(signed, dict)
        return {"signature": signed["signature"], "key": signed["key"]}


@dataclass
class _Oracle:
    name: str
    key_file: Path
    public_key: str
    key_hash: str  # the payment key hash (28 bytes hex): what the oracle config lists
    url: str = ""
    process: RoleProcess | None = None


@dataclass
class _Worker:
    name: str
    dir: Path
    payout: _Wallet
    process: RoleProcess | None = None
    key_id: str = ""  # as the API names the provider


@dataclass
class _Job:
    job_id: str
    spec: dict[str, Any]
    budget: int = demo_job.BUDGET  # what its escrow locks
    escrow: str = ""  # "txid#index"
    settled_by: str = ""


@dataclass(frozen=True)
class Balances:
    lovelace: int
    ntx: int


@dataclass
class _State:
    """What the steps hand each other."""

    devnet_url: str = ""
    api_url: str = ""
    oracles: list[_Oracle] = field(default_factory=list)
    workers: list[_Worker] = field(default_factory=list)
    seniors: list[_Wallet] = field(default_factory=list)
    submitter: _Wallet | None = None
    admin: Any = None  # KeyWallet
    deployment: Any = None  # Deployment
    deployment_file: Path | None = None
    repo: demo_job.FixtureRepo | None = None
    relay_data: demo_relay.RelayData | None = None
    jobs: list[_Job] = field(default_factory=list)
    before: dict[str, Balances] = field(default_factory=dict)


def _fmt_ada(lovelace: int) -> str:
    return f"{lovelace / 1_000_000:,.6f}"


class _Demo:
    def __init__(self, workdir: Path, console: Console, options: DemoOptions) -> None:
        self.workdir = workdir
        self.console = console
        self.options = options
        self.roles = RoleGroup()
        self.state = _State()
        self.http = httpx.Client(timeout=30)
        self.started = time.monotonic()
        self.relay = demo_relay.SHAPES.get(options.shape)
        self.workers = demo_relay.WORKERS if self.relay else WORKERS

    # --- plumbing -------------------------------------------------------------------------

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"

    @property
    def relay_data_dir(self) -> Path:
        """Where the relay demo's data shards lie: the workers' only local data dir."""
        return self.workdir / "relay-data"

    def onboard_argv(self, worker: _Worker) -> list[str]:
        """`proofnet worker onboard` for `worker` against this loop's API, as JSON."""
        return [
            "worker",
            "onboard",
            "--api-url",
            self.state.api_url,
            "--payout-address",
            worker.payout.address,
            "--network",
            "devnet",
            "--json",
            "--key-file",
            str(worker.dir / "worker.skey"),
            "--work-dir",
            str(worker.dir / "work"),
        ]

    def _base_env(self) -> dict[str, str]:
        bin_dir = str(Path(sys.executable).parent)
        return {
            "PROOFNET_NETWORK": "devnet",
            "PROOFNET_CHAIN_BACKEND": "devnet",
            "PROOFNET_DEVNET_URL": self.state.devnet_url,
            "PROOFNET_API_URL": self.state.api_url,
            # Everything the roles keep or cache stays in the demo's dir, not the user's.
            "PROOFNET_DATA_DIR": str(self.workdir / "data"),
            "PROOFNET_CACHE_DIR": str(self.workdir / "cache"),
            # Jobs run `python3` with numpy: this installation's interpreter first.
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONUNBUFFERED": "1",
        }

    @contextmanager
    def step(self, title: str) -> Iterator[None]:
        begun = time.monotonic()
        with self.console.status(f"[bold]{title}[/]..."):
            yield
        self.console.print(
            f"[green]✓[/] {title} [dim]({time.monotonic() - begun:.1f}s, "
            f"{time.monotonic() - self.started:.0f}s total)[/]"
        )

    def _wait(
        self, what: str, probe: Callable[[], bool], timeout: float, interval: float = 0.2
    ) -> None:
        """Poll `probe` until true; a role that died meanwhile fails the step at once."""

        def done() -> bool:
            if probe():
                return True
            try:
                self.roles.check_running()
            except ProcessStartError as exc:
                raise DemoError(str(exc), exc.role) from exc
            return False

        def timed_out(_state: RetryCallState) -> None:
            raise DemoError(f"timed out after {timeout:.0f}s waiting for {what}")

        Retrying(
            stop=stop_after_delay(timeout),
            wait=wait_fixed(interval),
            retry=retry_if_result(lambda ok: not ok),
            retry_error_callback=timed_out,
        )(done)

    def _devnet_get(self, path: str) -> httpx.Response:
        return self.http.get(f"{self.state.devnet_url}{path}")

    def balances(self, address: str) -> Balances:
        response = self._devnet_get(f"/addresses/{address}")
        if response.status_code == 404:
            return Balances(0, 0)
        response.raise_for_status()
        amounts = {a["unit"]: int(a["quantity"]) for a in response.json()["amount"]}
        unit = self.state.deployment.ntx_unit if self.state.deployment else ""
        return Balances(amounts.get("lovelace", 0), amounts.get(unit, 0))

    # --- the steps ------------------------------------------------------------------------

    def start_devnet(self) -> None:
        port = free_port()
        self.state.devnet_url = f"http://127.0.0.1:{port}/api/v0"
        devnet = RoleProcess(
            "devnet",
            [
                "devnet",
                "up",
                "--data-dir",
                str(self.workdir / "devnet"),
                "--port",
                str(port),
                "--block-time",
                str(self.options.block_time),
            ],
            self.logs / "devnet.log",
            cwd=self.workdir,
        )
        self.roles.start(devnet)
        devnet.wait_healthy(f"{self.state.devnet_url}/health", timeout=60)

    def devnet_up_command(self) -> str:
        """The command that serves this demo's chain again, explorer included."""
        import shlex

        port = self.state.devnet_url.removesuffix("/api/v0").rsplit(":", 1)[-1]
        return (
            f"proofnet devnet up --data-dir {shlex.quote(str(self.workdir / 'devnet'))} "
            f"--port {port}"
        )

    def oracle_keys(self) -> None:
        """`proofnet oracle keygen` for each oracle (in parallel: each is a cold start)."""
        from concurrent.futures import ThreadPoolExecutor

        from pycardano import PaymentSigningKey

        from oracle.keys import load_key

        paths = [self.workdir / f"oracle-{i}" / "oracle.skey" for i in range(ORACLES)]
        for path in paths:
            if path.exists():  # a rerun on the same data dir: keygen refuses to overwrite
                path.unlink()

        def keygen(i: int) -> str:
            return run_role_command(
                f"oracle-{i} keygen",
                ["oracle", "keygen", str(paths[i])],
                self.logs / f"oracle-{i}.log",
                cwd=paths[i].parent,
            )

        with ThreadPoolExecutor(ORACLES) as pool:
            printed = list(pool.map(keygen, range(ORACLES)))
        for i, (path, out) in enumerate(zip(paths, printed, strict=True)):
            key = load_key(path)
            if f"public key: {key.public_key_hex}" not in out.splitlines():
                raise DemoError(f"oracle-{i} keygen printed {out.strip()!r}, not its key")
            pkh = PaymentSigningKey(bytes(key.signing_key)).to_verification_key().hash()
            self.state.oracles.append(
                _Oracle(f"oracle-{i}", path, key.public_key_hex, pkh.payload.hex())
            )
        for oracle in self.state.oracles:
            oracle.url = f"http://127.0.0.1:{free_port()}"

    def seed_seniors(self) -> None:
        """`proofnet api add-senior` for each senior (the first run migrates the database)."""
        self.state.seniors = [_Wallet.generate() for _ in range(SENIORS)]
        for wallet in self.state.seniors:
            run_role_command(
                "api add-senior",
                ["api", "add-senior", wallet.address],
                self.logs / "api.log",
                env=self._api_env(),
                cwd=self.workdir / "api",
            )

    def _api_env(self) -> dict[str, str]:
        api_dir = self.workdir / "api"
        return {
            **self._base_env(),
            "PROOFNET_DATABASE_URL": f"sqlite:///{api_dir / 'api.db'}",
            "PROOFNET_DATA_DIR": str(api_dir),
            "PROOFNET_API_ORACLE_KEYS": ",".join(o.public_key for o in self.state.oracles),
            # Workers poll; a demo must not rate-limit itself.
            "PROOFNET_API_RATE_LIMIT_PER_MINUTE": "100000",
            "PROOFNET_API_LEASE_TTL_S": "60",
            # The chain watcher records payouts and refunds from the chain once the deployment
            # exists, and escrows are checked against it (written by `deploy_chain` while the
            # API starts). The demo's escrows last an hour: its jobs' runs and a ten-minute
            # settlement window fit in it.
            "PROOFNET_DEPLOYMENT_FILE": str(self.workdir / "deployment.json"),
            "PROOFNET_API_CHAIN_WATCH_INTERVAL_S": "1",
            "PROOFNET_API_CHAIN_WATCH_CONFIRMATIONS": str(self.options.confirmation_depth),
            "PROOFNET_API_SETTLEMENT_WINDOW_S": "600",
        }

    def deploy_chain(self) -> None:
        """Fund the admin, submitter and oracles; deploy the protocol with the 2-of-3 oracle
        config; mint test NTX to the submitter."""
        from pycardano import PaymentSigningKey, VerificationKeyHash

        from chain.offchain.builders import KeyWallet, OracleSetup, deploy, mint_test_ntx
        from chain.offchain.builders.mint import test_ntx_policy_id
        from chain.offchain.builders.wallet import await_output
        from oracle.settlement.scenario import Devnet

        devnet = Devnet(self.state.devnet_url)
        admin = KeyWallet(PaymentSigningKey.generate())
        submitter = _Wallet.generate()
        self.state.admin, self.state.submitter = admin, submitter
        funding = [
            self._fund(devnet, str(admin.address), 300_000_000),
            self._fund(devnet, submitter.address, 200_000_000),
        ]
        for oracle in self.state.oracles:
            # Two UTxOs each: collateral and fees never wait on a change output.
            funding += [self._fund(devnet, _enterprise(oracle.key_hash), 50_000_000)]
            funding += [self._fund(devnet, _enterprise(oracle.key_hash), 50_000_000)]
        for tx in funding:
            devnet.wait_for_tx(tx)
        self.note(f"faucet funded the admin, the submitter and {ORACLES} oracles")
        context = devnet.context()
        setup = OracleSetup(
            oracles=tuple(
                VerificationKeyHash(bytes.fromhex(o.key_hash)) for o in self.state.oracles
            ),
            threshold=THRESHOLD,
            admins=(admin.pkh,),
            admin_threshold=1,
        )
        policy = test_ntx_policy_id(admin)
        deployment = deploy(context, admin, setup, policy, NTX_NAME)
        self.state.deployment = deployment
        path = self.workdir / "deployment.json"  # the API's PROOFNET_DEPLOYMENT_FILE
        deployment.save(path)
        self.state.deployment_file = path
        self.note(f"deployed in txs {', '.join(t[:12] + '...' for t in deployment.tx_ids)}")
        from pycardano import Address

        tx_id, _ = mint_test_ntx(
            context, admin, Address.from_primitive(submitter.address), SUBMITTER_NTX, NTX_NAME
        )
        await_output(context, Address.from_primitive(submitter.address), tx_id)
        self.note(f"minted {SUBMITTER_NTX:,} test NTX to the submitter (tx {tx_id[:12]}...)")

    def _fund(self, devnet: Any, address: str, lovelace: int) -> str:
        body = devnet.admin("fund", {"address": address, "lovelace": lovelace, "assets": {}})
        return str(body["tx_hash"])

    def start_api(self) -> None:
        port = self.state.api_url.rsplit(":", 1)[1]
        api = RoleProcess(
            "api",
            ["api", "serve", "--host", "127.0.0.1", "--port", port],
            self.logs / "api.log",
            env=self._api_env(),
            cwd=self.workdir / "api",
        )
        self.roles.start(api)
        api.wait_healthy(f"{self.state.api_url}/api/v1/health", timeout=60)

    def start_oracles(
        self, *, drawn_verifiers: bool = False, extra_env: Mapping[str, str] | None = None
    ) -> None:
        """Serve the oracles (again, on the same ports and databases, after `stop_oracles`).
        They replay drawn segments themselves, unless `drawn_verifiers`: then they draw
        verifier workers, as everywhere outside the demo, and referee disputed replays
        (workers verifying under `PROOFNET_WORKER_DEMO_PROCESS_VERIFY`). `extra_env`: more
        oracle settings (e.g. short answer and dispute windows), over the demo's."""
        assert self.state.deployment is not None and self.state.repo is not None
        proposer, *cosigners = self.state.oracles
        for oracle in self.state.oracles:
            home = self.workdir / oracle.name
            env = {
                **self._base_env(),
                # The demo's repository and the relay's shards are here: the oracles'
                # mirror and their one local data dir.
                "PROOFNET_ORACLE_REPO_REWRITES": self.state.repo.rewrite,
                "PROOFNET_ORACLE_LOCAL_DATA_DIRS": str(self.relay_data_dir),
                "PROOFNET_DATABASE_URL": f"sqlite:///{home / 'oracle.db'}",
                "PROOFNET_DATA_DIR": str(home),
                "PROOFNET_ORACLE_KEY_FILE": str(oracle.key_file),
                "PROOFNET_NTX_POLICY_ID": self.state.deployment.ntx_policy,
                "PROOFNET_NTX_ASSET_NAME": self.state.deployment.ntx_name,
                # Every oracle runs the settlement engine: the proposer batches and asks
                # the co-signers, who re-verify and sign (their /quorum/sign needs it).
                "PROOFNET_SETTLEMENT_ENABLED": "true",
                "PROOFNET_SETTLEMENT_DEPLOYMENT_FILE": str(self.state.deployment_file),
                "PROOFNET_SETTLEMENT_BATCH_SIZE": str(self.options.jobs),
                "PROOFNET_SETTLEMENT_MAX_WAIT_S": "15",
                "PROOFNET_SETTLEMENT_INTERVAL_S": "0.5",
                "PROOFNET_SETTLEMENT_CONFIRMATION_DEPTH": str(self.options.confirmation_depth),
                "PROOFNET_SETTLEMENT_HOLDER": oracle.name,
                # The demo's job code is the demo's own: its oracles replay it themselves
                # (on the devnet only); everywhere else drawn verifiers do.
                "PROOFNET_ORACLE_DEMO_LOCAL_REPLAY": "false" if drawn_verifiers else "true",
                # Verifiers on this host answer in seconds: a postponed verification
                # (waiting for one, or for a disputed provider) is tried again soon.
                "PROOFNET_ORACLE_MAX_RETRY_DELAY_S": "4",
                **(extra_env or {}),
            }
            if self.relay:
                # A topology job's escrow waits (600 s by default) for attestations of
                # completed units that have not arrived; a demo waits less.
                env["PROOFNET_SETTLEMENT_UNIT_GRACE_S"] = str(demo_relay.UNIT_GRACE_S)
            if oracle is proposer:
                env["PROOFNET_SETTLEMENT_COSIGNERS"] = json.dumps(
                    [{"url": c.url, "key_hash": c.key_hash} for c in cosigners]
                )
                env["PROOFNET_SETTLEMENT_THRESHOLD"] = str(THRESHOLD)
            else:
                env["PROOFNET_SETTLEMENT_COSIGNERS"] = "[]"
                env["PROOFNET_SETTLEMENT_THRESHOLD"] = "1"
            port = oracle.url.rsplit(":", 1)[1]
            oracle.process = self.roles.start(
                RoleProcess(
                    oracle.name,
                    ["oracle", "serve", "--host", "127.0.0.1", "--port", port],
                    self.logs / f"{oracle.name}.log",
                    env=env,
                    cwd=home,
                )
            )
        for oracle in self.state.oracles:
            assert oracle.process is not None
            oracle.process.wait_healthy(f"{oracle.url}/api/v1/health", timeout=90)

    def stop_oracles(self) -> None:
        for oracle in self.state.oracles:
            if oracle.process is not None:
                self.roles.stop(oracle.process)
                oracle.process = None

    def start_workers(self) -> None:
        assert self.state.repo is not None
        proposer = self.state.oracles[0]
        for i in range(self.workers):
            name = f"worker-{i + 1}"
            home = self.workdir / name
            worker = _Worker(name, home, _Wallet.generate())
            self.state.workers.append(worker)
            common = ["--key-file", str(home / "worker.skey"), "--work-dir", str(home / "work")]
            env = {**self._base_env(), "PROOFNET_WORKER_RUNTIME": "process"}
            onboarded = run_role_command(
                f"{name} onboard",
                self.onboard_argv(worker),
                self.logs / f"{name}.log",
                env=env,
                cwd=home,
            )
            report = json.loads(onboarded)
            if not report.get("registered"):
                raise DemoError(f"{name} did not register: {report.get('problems')}", name)
            worker.key_id = str(report.get("key_id", ""))
            worker.process = self.roles.start(
                RoleProcess(
                    name,
                    [
                        "worker",
                        "run",
                        "--api-url",
                        self.state.api_url,
                        "--oracle-url",
                        proposer.url,
                        "--runtime",
                        "process",
                        "--network",
                        "devnet",
                        "--repo-rewrite",
                        self.state.repo.rewrite,
                        # The relay's shards are files here: the one local data dir
                        # (not PROOFNET_DATA_DIR, which holds the roles' keys).
                        "--local-data-dir",
                        str(self.relay_data_dir),
                        "--poll-interval",
                        "0.5",
                        "--grace",
                        "5",
                        *common,
                    ],
                    self.logs / f"{name}.log",
                    env=env,
                    cwd=home,
                )
            )

    def _sign_in(self, wallet: _Wallet) -> dict[str, str]:
        api = self.state.api_url
        challenge = self.http.post(f"{api}/api/v1/auth/challenge", json={"address": wallet.address})
        _expect(challenge, 200, "sign-in challenge")
        body = challenge.json()
        verified = self.http.post(
            f"{api}/api/v1/auth/verify",
            json={
                "address": wallet.address,
                "nonce": body["nonce"],
                **wallet.sign_data(body["message"]),
            },
        )
        _expect(verified, 200, "sign-in")
        return {"Authorization": f"Bearer {verified.json()['access_token']}"}

    def approve_submitter(self) -> dict[str, str]:
        """The submitter applies; five seniors endorse with wallet signatures."""
        api = self.state.api_url
        submitter = self.state.submitter
        assert submitter is not None
        headers = self._sign_in(submitter)
        applied = self.http.post(
            f"{api}/api/v1/approvals",
            json={"statement": "proofnet demo: a numpy MLP"},
            headers=headers,
        )
        _expect(applied, 201, "application")
        application = applied.json()
        for senior in self.state.seniors:
            endorsed = self.http.post(
                f"{api}/api/v1/approvals/{application['id']}/endorsements",
                json=senior.sign_data(application["endorsement_message"]),
                headers=self._sign_in(senior),
            )
            _expect(endorsed, 201, "endorsement")
        me = self.http.get(f"{api}/api/v1/users/me", headers=headers).json()
        if not me.get("is_approved"):
            raise DemoError(f"the submitter is not approved after {SENIORS} endorsements: {me}")
        return headers

    def post_jobs(self, headers: dict[str, str]) -> None:
        assert self.state.repo is not None
        if self.relay:
            assert self.state.relay_data is not None
            spec = demo_relay.job_spec(
                self.state.repo.commit,
                self.state.relay_data,
                threshold=self.relay.threshold,
                seed=demo_job.SEED,
            )
            specs = [(spec, demo_relay.BUDGET)]
        else:
            specs = [
                (demo_job.job_spec(self.state.repo.commit, seed=demo_job.SEED + i), demo_job.BUDGET)
                for i in range(self.options.jobs)
            ]
        for spec, budget in specs:
            posted = self.http.post(
                f"{self.state.api_url}/api/v1/jobs", json={"spec": spec}, headers=headers
            )
            _expect(posted, 201, "job submission")
            self.state.jobs.append(_Job(posted.json()["job_id"], spec, budget))

    def lock_escrows(self, headers: dict[str, str]) -> str:
        """Lock every job's budget in one transaction (submitter key), then record each
        escrow with the API, which checks it on chain."""
        from pycardano import Address

        from chain.offchain.builders import EscrowJob, KeyWallet, lock_escrows
        from chain.offchain.builders.wallet import await_output
        from oracle.settlement.scenario import Devnet

        submitter = self.state.submitter
        deployment = self.state.deployment
        assert submitter is not None and deployment is not None
        context = Devnet(self.state.devnet_url).context()
        deadline = int(time.time() * 1000) + 3_600_000
        escrow_jobs = [
            EscrowJob(
                job_id=bytes.fromhex(job.job_id),  # the 32 bytes of the spec's SHA-256 id
                budget=job.budget,
                deadline=deadline,
                submitter=Address.from_primitive(submitter.address),
                nonce=i,
            )
            for i, job in enumerate(self.state.jobs)
        ]
        wallet = KeyWallet(submitter.signing_key)
        result = lock_escrows(context, deployment, escrow_jobs, wallet)
        await_output(context, deployment.escrow_address, result.tx_id)
        for job, ref in zip(self.state.jobs, result.escrow_refs, strict=True):
            tx_id, _, index = ref.partition("#")
            recorded = self.http.post(
                f"{self.state.api_url}/api/v1/jobs/{job.job_id}/escrow",
                json={"tx_id": tx_id, "index": int(index)},
                headers=headers,
            )
            _expect(recorded, 200, "escrow record")
            job.escrow = ref
        return result.tx_id

    def _attestations(self, job: _Job) -> list[dict[str, Any]]:
        proposer = self.state.oracles[0]
        try:
            response = self.http.get(f"{proposer.url}/api/v1/jobs/{job.job_id}/attestations")
        except httpx.HTTPError:
            return []
        return list(response.json().get("data", [])) if response.status_code == 200 else []

    def wait_for_loop(self, headers: dict[str, str]) -> str:
        """Follow the jobs from the queue to a confirmed settlement; the settlement tx."""
        from oracle.settlement.audit import settlement_tx_of

        shown: dict[str, str] = {}

        def note(job: _Job, text: str) -> None:
            if shown.get(job.job_id) != text:
                shown[job.job_id] = text
                self.console.print(f"  [cyan]job {job.job_id[:12]}[/] {text}")

        def progressed() -> bool:
            done = True
            for job in self.state.jobs:
                atts = self._attestations(job)
                if atts:
                    att = atts[-1]
                    status = att["status"]
                    if status == "rejected":
                        raise DemoError(
                            f"the oracle rejected the attestation of job {job.job_id}: "
                            f"{att.get('reason')}: {att.get('message')}",
                            self.state.oracles[0].name,
                        )
                    if status in ("batched", "settled") and not job.settled_by:
                        job.settled_by = settlement_tx_of(self.state.devnet_url, job.escrow) or ""
                    text = f"oracle: attestation {status}"
                    if job.settled_by:
                        text += f" (settlement tx {job.settled_by[:16]}...)"
                    note(job, text)
                    done = done and status == "settled"
                    continue
                st = self.http.get(
                    f"{self.state.api_url}/api/v1/jobs/{job.job_id}/status", headers=headers
                ).json()
                if st["status"] == "failed":
                    raise DemoError(f"job {job.job_id} failed: {st['reason']}")
                note(job, f"api: {st['status']}: {st['reason']}")
                done = False
            return done

        self._wait("the settlement", progressed, self.options.loop_timeout_s, interval=0.3)
        txs = {job.settled_by for job in self.state.jobs}
        if len(txs) != 1 or "" in txs:
            raise DemoError(f"expected one settlement transaction, found {sorted(txs)}")
        return txs.pop()

    def earnings(self, tx_id: str, headers: dict[str, str]) -> dict[str, str]:
        """What the API recorded from the chain for this settlement: the submitter's
        balance shows the remainder back, each paid worker's `proofnet worker status` the
        payout with its transaction."""
        api = self.state.api_url
        submitter = self.state.submitter
        assert submitter is not None
        refunds: list[dict[str, Any]] = []

        def recorded() -> bool:
            body = self.http.get(f"{api}/api/v1/balances/{submitter.address}", headers=headers)
            if body.status_code != 200:
                return False
            refunds[:] = [r for r in body.json()["refunds"] if r["tx_hash"] == tx_id]
            return bool(refunds)

        self._wait("the API's chain watcher to record the settlement", recorded, 60, 0.5)
        back = sum(int(r["amount"]) for r in refunds)
        self.console.print(
            f"  submitter: {back:,} NTX back from the escrow (settlement remainder), "
            f"tx {tx_id[:16]}..., block {refunds[0]['block_height']}"
        )
        paid: list[str] = []
        for worker in self.state.workers:
            argv = ["worker", "status", "--api-url", api, "--network", "devnet"]
            argv += ["--key-file", str(worker.dir / "worker.skey")]
            shown = run_role_command(
                f"{worker.name} status",
                argv,
                self.logs / f"{worker.name}.log",
                env=self._base_env(),
            )
            if f"tx {tx_id}" in shown:
                paid.append(worker.name)
                self.console.print(f"  $ proofnet worker status  [dim]({worker.name})[/]")
                for line in shown.splitlines():
                    self.console.print(f"    {line}", soft_wrap=True, highlight=False)
        if not paid:
            raise DemoError(f"no worker's status shows the payout of settlement {tx_id}")
        return {"paid_workers": ",".join(paid), "submitter_refund_ntx": str(back)}

    # --- the summary ----------------------------------------------------------------------

    def audit(self, tx_id: str) -> Any:
        from auditor.audit import audit_settlement
        from oracle.service import escrow_script_hash

        deployment = self.state.deployment
        return audit_settlement(
            self.state.devnet_url,
            tx_id,
            [o.url for o in self.state.oracles],
            network="devnet",
            escrow_script_hash=escrow_script_hash(),
            ntx_policy=deployment.ntx_policy,
            ntx_name=deployment.ntx_name,
            client=self.http,
            config_nft=(deployment.config_policy, deployment.config_name),
        )

    def signers_of(self, tx_id: str) -> list[str]:
        from pycardano import Transaction

        raw = self._devnet_get(f"/txs/{tx_id}/cbor").json()["cbor"]
        body = Transaction.from_cbor(bytes.fromhex(raw)).transaction_body
        signers = {k.payload.hex() for k in body.required_signers or []}
        return [o.name for o in self.state.oracles if o.key_hash in signers]

    def wallets(self) -> dict[str, str]:
        assert self.state.submitter is not None
        named = {"submitter": self.state.submitter.address}
        named.update({f"provider ({w.name})": w.payout.address for w in self.state.workers})
        return named

    def summary(self, tx_id: str, lock_tx: str, report: Any) -> dict[str, str]:
        table = Table(title="balances (ADA, test NTX) before -> after")
        table.add_column("wallet")
        table.add_column("ADA before", justify="right")
        table.add_column("ADA after", justify="right")
        table.add_column("NTX before", justify="right")
        table.add_column("NTX after", justify="right")
        for name, address in self.wallets().items():
            before = self.state.before[name]
            after = self.balances(address)
            table.add_row(
                name,
                _fmt_ada(before.lovelace),
                _fmt_ada(after.lovelace),
                f"{before.ntx:,}",
                f"{after.ntx:,}",
            )
        self.console.print(table)
        extra: dict[str, str] = {}
        if self.relay:
            extra = demo_relay.print_summary(self, report, self.relay)
        else:
            for escrow in report.escrows:
                self.console.print(
                    f"escrow {escrow.escrow}: held {escrow.held:,} NTX, paid {escrow.attested:,} "
                    f"to {escrow.provider[:24]}..., refunded {escrow.refund_expected:,}"
                )
        signers = self.signers_of(tx_id)
        self.console.print(f"co-signed by {', '.join(signers)} ({THRESHOLD} of {ORACLES})")
        elapsed = time.monotonic() - self.started
        self.console.print(f"settlement tx: {tx_id}", soft_wrap=True)
        root = self.state.devnet_url.removesuffix("/api/v0")
        self.console.print(f"explorer: {root}/explorer/tx/{tx_id}", soft_wrap=True)
        self.console.print(report.line(), soft_wrap=True)
        self.console.print(f"demo finished in {elapsed:.1f}s; data and logs in {self.workdir}")
        self.console.print(
            "the demo's chain stays browsable after the demo (same port, so the links above "
            f"work): {self.devnet_up_command()}",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
        return {
            "settlement_tx": tx_id,
            "lock_tx": lock_tx,
            "ntx_unit": self.state.deployment.ntx_unit,
            "audit": "OK" if report.ok else "FAILED",
            "signers": ",".join(signers),
            "jobs": ",".join(j.job_id for j in self.state.jobs),
            "elapsed_s": f"{elapsed:.1f}",
            **extra,
        }

    # --- the run --------------------------------------------------------------------------

    def note(self, text: str) -> None:
        self.console.print(f"  [dim]{text}[/]", soft_wrap=True)

    def run(self) -> dict[str, str]:
        self.console.rule("proofnet demo" + (f" --shape {self.relay.name}" if self.relay else ""))
        self.console.print(f"data and logs: {self.workdir}", soft_wrap=True)
        if self.relay:
            self.console.print(self.relay.description)
            with self.step(
                "relay model repository committed (numpy MLP trained stage by stage, with "
                f"proof of training and a replay entry point); {demo_relay.STAGES} training "
                "shards and a held-out shard written"
            ):
                self.state.repo = demo_relay.create_repo(self.workdir / "git")
                self.state.relay_data = demo_relay.make_data(self.relay_data_dir)
        else:
            with self.step("model repository committed (numpy MLP with proof of training)"):
                self.state.repo = demo_job.create_repo(self.workdir / "git")
        self.note(f"{self.state.repo.path} at {self.state.repo.commit}")
        with self.step(f"devnet up ({self.options.block_time}s blocks) and {ORACLES} oracle keys"):
            self.start_devnet()
            self.oracle_keys()
        self.state.api_url = f"http://127.0.0.1:{free_port()}"
        # The API side (seniors, API, workers: processes) comes up while this process
        # deploys the protocol; the oracles need the deployment, so they follow it.
        background = _Background(self.api_side)
        with self.step(
            f"protocol deployed (oracles {THRESHOLD}-of-{ORACLES}, reference scripts, stake "
            "registration), test NTX minted"
        ):
            background.start()
            self.deploy_chain()
        assert self.state.deployment is not None
        self.note(
            f"escrow script {self.state.deployment.escrow_hash}, "
            f"NTX unit {self.state.deployment.ntx_unit}"
        )
        with self.step(f"{ORACLES} oracles serving, settlement on (1 proposer, 2 co-signers)"):
            self.start_oracles()
        if self.relay:
            self.note(
                f"unit settlement grace {demo_relay.UNIT_GRACE_S}s (PROOFNET_SETTLEMENT_UNIT_"
                "GRACE_S, default 600s): how long a finished pipeline's escrow would wait for "
                "a completed unit's missing attestation"
            )
        with self.step(
            f"API serving (SQLite, {SENIORS} seniors); {self.workers} workers onboarded and running"
        ):
            background.join()
        self.console.print(
            "  [yellow]workers use the process runtime: jobs run on this host, NOT isolated[/]"
        )
        with self.step(f"submitter approved by {SENIORS} senior endorsements (CIP-8 signatures)"):
            headers = self.approve_submitter()
        for name, address in self.wallets().items():
            self.state.before[name] = self.balances(address)
        posted = "relay job posted" if self.relay else f"{self.options.jobs} job(s) posted"
        with self.step(f"{posted}, escrow locked and recorded"):
            self.post_jobs(headers)
            lock_tx = self.lock_escrows(headers)
        self.note(f"escrow lock tx {lock_tx}")
        if self.relay:
            job = self.state.jobs[0]
            self.note(
                f"job {job.job_id}: {demo_relay.STAGES} stages x {demo_relay.STAGE_AMOUNT:,} NTX "
                f"+ 2 evaluations x {demo_relay.EVAL_AMOUNT:,} NTX ({demo_relay.METRIC} <= "
                f"{self.relay.threshold}); escrow {job.budget:,} NTX"
            )
            with self.step(
                "pipeline run across the workers, each completed unit attested and verified, "
                f"the escrow settled once {THRESHOLD}-of-3"
            ):
                tx_id = demo_relay.follow(self, job, headers)
        else:
            with self.step(
                f"trained, attested, verified (spot check) and settled {THRESHOLD}-of-3"
            ):
                tx_id = self.wait_for_loop(headers)
        with self.step("audited from the chain and the published bundle"):
            report = self.audit(tx_id)
        with self.step("earnings recorded from the chain by the API (proofnet worker status)"):
            recorded = self.earnings(tx_id, headers)
        return {**self.summary(tx_id, lock_tx, report), **recorded}

    def api_side(self) -> None:
        self.seed_seniors()
        self.start_api()
        self.start_workers()


class _Background:
    """One step run on a thread; its exception is re-raised by `join`."""

    def __init__(self, target: Callable[[], None]) -> None:
        self.error: BaseException | None = None

        def run() -> None:
            try:
                target()
            except BaseException as exc:  # handed to the main thread
                self.error = exc

        self.thread = threading.Thread(target=run, name="demo-api-side", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error


def _enterprise(key_hash: str) -> str:
    from pycardano import Address, Network, VerificationKeyHash

    return str(Address(VerificationKeyHash(bytes.fromhex(key_hash)), network=Network.TESTNET))


def _expect(response: httpx.Response, status: int, what: str) -> None:
    if response.status_code != status:
        raise DemoError(f"{what}: the API answered {response.status_code}: {response.text[:500]}")


class _Terminated(KeyboardInterrupt):
    """SIGTERM: leave through the same cleanup (and exit) as Ctrl-C."""


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _blame(demo: _Demo, exc: BaseException) -> str:
    """The role to blame: the one named by the error, else the first that exited."""
    role = getattr(exc, "role", "") or ""
    if not role:
        for r in demo.roles.roles:
            if r.exited:
                return r.name
    return role


def run_demo(
    data_dir: Path | None = None,
    console: Console | None = None,
    options: DemoOptions | None = None,
) -> dict[str, str]:
    """Run the loop; the summary as a dict (settlement_tx, audit, ...). Every process it
    started is stopped when it returns, fails or is interrupted."""
    console = console or Console()
    workdir = (data_dir or Path(tempfile.mkdtemp(prefix="proofnet-demo-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    demo = _Demo(workdir, console, options or DemoOptions())
    try:
        with _sigterm_raises(), demo.roles:
            return demo.run()
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (_Terminated)
        console.print("[yellow]interrupted: every role stopped[/]")
        raise
    except Exception as exc:
        role = _blame(demo, exc)
        console.print(f"[red]demo failed[/]: {exc}")
        named = next((r for r in demo.roles.roles if r.name == role), None)
        if named is not None:
            console.print(f"[red]failed role: {role}[/] (log {named.log_path}); its last lines:")
            console.print(named.tail(30), markup=False, highlight=False)
        elif role:
            console.print(f"[red]failed role: {role}[/]")
        if isinstance(exc, DemoError):
            raise
        raise DemoError(str(exc), role) from exc
    finally:
        demo.http.close()
