"""`proofnet chaos oracle --iterations N`: SIGKILL the settling oracle at random points and
check, on the chain, that no attestation was paid twice and none was lost.

A devnet and the oracle (`proofnet oracle settle`) run as real child processes. Escrows and
verified attestations (one provider address per attestation) are created up front; then the
oracle is started and killed N times, after a random delay or right after it logged
"submitting". A last run lets it finish; the verdict reads provider balances from the
devnet's API, never the oracle's database, and prints `double_payments=<n> lost=<n>`.
"""

from __future__ import annotations

import random
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import typer

from proofnet.processes import ProcessStartError, RoleProcess, free_port

from .audit import AuditResult, Expected, audit_payouts, settlement_tx_of

app = typer.Typer(no_args_is_help=True, help="Fault-injection runs against local roles.")

SUBMITTING = b"submitting settlement tx"
STARTED = b"settlement scheduler started"


@dataclass
class ChaosReport:
    iterations: int
    kills_after_submitting: int
    escrows: int
    audit: AuditResult
    seconds: float

    def line(self) -> str:
        return self.audit.line()


def _kill(role: RoleProcess) -> None:
    if role.process is not None and role.process.poll() is None:
        role.process.send_signal(signal.SIGKILL)
        role.process.wait()


def run_chaos(
    iterations: int,
    *,
    workdir: Path | None = None,
    seed: int | None = None,
    escrows: int | None = None,
    max_delay_s: float = 2.0,
    finish_timeout_s: float = 180.0,
    echo: bool = True,
) -> ChaosReport:
    from nacl.signing import SigningKey

    from oracle.keys import write_key
    from oracle.models import metadata
    from oracle.storage.db import make_engine

    from . import models as _models  # noqa: F401  (registers the tables)
    from . import scenario as sc

    if iterations < 1:
        raise ValueError("iterations must be at least 1")
    started = time.monotonic()
    rng = random.Random(seed)
    work = workdir or Path(tempfile.mkdtemp(prefix="proofnet-chaos-"))
    port = free_port()
    url = f"http://127.0.0.1:{port}/api/v0"
    devnet = RoleProcess(
        "devnet",
        [
            "devnet",
            "up",
            "--data-dir",
            str(work / "devnet"),
            "--port",
            str(port),
            "--block-time",
            "0.2",
        ],
        work / "logs" / "devnet.log",
    ).start()
    oracle: RoleProcess | None = None
    try:
        devnet.wait_healthy(f"{url}/health", timeout=60)
        scenario = sc.setup(sc.Devnet(url), oracles=1, threshold=1, tag=f"chaos-{port}")
        count = escrows or max(8, 2 * iterations)
        locked: list[tuple[sc.OutRef, bytes]] = []
        while len(locked) < count:
            locked += sc.lock(scenario, min(15, count - len(locked)), nonce_base=len(locked))
        db_url = f"sqlite:///{work / 'oracle.db'}"
        db = make_engine(db_url)
        metadata.create_all(db)
        expected = []
        for i, (ref, job) in enumerate(locked):
            signed = sc.attestation(
                scenario, ref, job, 100 + i, sc.seeded_key(f"chaos-w{port}-{i}")
            )
            sc.store_verified(db, signed)
            expected.append(Expected(str(ref), signed.attestation.payout_address, 100 + i))
        db.dispose()
        deployment = work / "deployment.json"
        scenario.deployment.save(deployment)
        key_file = work / "oracle.skey"
        write_key(key_file, SigningKey(bytes(scenario.oracle_keys[0].payload)))

        def oracle_process() -> RoleProcess:
            return RoleProcess(
                "oracle",
                [
                    "oracle",
                    "settle",
                    "--deployment",
                    str(deployment),
                    "--key-file",
                    str(key_file),
                    "--database-url",
                    db_url,
                    "--batch-size",
                    "4",
                    "--max-wait",
                    "0.3",
                    "--interval",
                    "0.25",
                    "--depth",
                    "2",
                    "--lease-ttl",
                    "2",
                    "--holder",
                    "chaos-oracle",
                ],
                work / "logs" / "oracle.log",
                env={
                    "PROOFNET_CHAIN_BACKEND": "devnet",
                    "PROOFNET_DEVNET_URL": url,
                    "PROOFNET_NETWORK": "devnet",
                    # Attestations are fed to its store directly: no API to ask about storage.
                    "PROOFNET_API_URL": "",
                },
            ).start()

        after_submit = 0
        for i in range(iterations):
            oracle = oracle_process()
            log_path = oracle.log_path
            before = _count(log_path)
            started_before = _count(log_path, STARTED)
            roll = rng.random()
            if roll < 0.1:
                time.sleep(rng.uniform(0.0, 1.0))  # during start-up
            else:
                _wait_for(lambda s=started_before, p=log_path: _count(p, STARTED) > s, oracle, 30)
                if roll < 0.45:
                    # Right after it says it is submitting: the riskiest moment.
                    _wait_for(lambda b=before, p=log_path: _count(p) > b, oracle, timeout=15)
                    after_submit += 1
                else:
                    time.sleep(rng.uniform(0.0, max_delay_s))
            _kill(oracle)
            if echo:
                typer.echo(f"iteration {i + 1}/{iterations}: killed oracle", err=True)
        oracle = oracle_process()
        deadline = time.monotonic() + finish_timeout_s
        while time.monotonic() < deadline:
            if oracle.process is not None and oracle.process.poll() is not None:
                raise ProcessStartError(f"oracle exited:\n{oracle.tail()}")
            if all(settlement_tx_of(url, e.escrow) for e in expected) and _settled(
                work / "oracle.db"
            ):
                break
            time.sleep(0.5)
        oracle.stop()
        unit = scenario.ntx_policy + sc.NTX_NAME.hex()
        audit = audit_payouts(url, expected, unit)
        return ChaosReport(
            iterations, after_submit, len(expected), audit, time.monotonic() - started
        )
    finally:
        if oracle is not None:
            _kill(oracle)
        devnet.stop()


def _count(path: Path, what: bytes = SUBMITTING) -> int:
    try:
        return path.read_bytes().count(what)
    except FileNotFoundError:
        return 0


def _wait_for(cond, role: RoleProcess, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        if role.process is not None and role.process.poll() is not None:
            return
        time.sleep(0.01)


def _settled(db_path: Path) -> bool:
    """Whether the oracle's log of attestations agrees (only used to know when to stop
    waiting; the verdict itself reads the chain)."""
    import sqlite3

    with sqlite3.connect(db_path, timeout=30) as conn:
        rows = conn.execute(
            "SELECT COUNT(*) FROM oracle_attestations WHERE status != 'settled'"
        ).fetchone()
    return bool(rows[0] == 0)


@app.callback()
def _chaos() -> None:
    """Fault-injection runs against local roles."""


@app.command("oracle")
def oracle_chaos(
    iterations: int = typer.Option(20, min=1, help="how many times to SIGKILL the oracle"),
    seed: int | None = typer.Option(None, help="random seed (default: random)"),
    workdir: Path | None = typer.Option(None, help="keep chain, database and logs here"),
) -> None:
    """SIGKILL the settling oracle at random points; audit payouts on the chain."""
    report = run_chaos(iterations, seed=seed, workdir=workdir)
    for line in report.audit.details:
        typer.echo(line, err=True)
    typer.echo(report.line())
    if report.audit.double_payments or report.audit.lost:
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
