"""`proofnet demo` end to end: real processes from the escrow lock to an audited settlement.

The summary lines are checked, and then the chain itself, independently of the demo's own
audit: the devnet's ledger directory (opened after the devnet stopped) must hold the
settlement transaction, which spends the job's escrow (datum: the job id of the spec pinned
to the fixture repository's commit), pays the registered provider exactly what the oracle
recorded as attested, and refunds the rest of the escrow to the submitter.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi import FastAPI, Response
from pycardano import Address, Network

from auditor.audit import AuditError, AuditReport, audit_settlement
from chain.devnet.testing import running_devnet, serve_app
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.onchain import address_from_data
from demos import job as demo_job
from proofnet.messages.jobspec import JobSpec
from tests.proofnet.settled_on_chain import settled_escrow


def _children_in(data_dir: Path) -> list[str]:
    """Command lines of live processes still pointing into the demo's data dir."""
    alive = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(data_dir) in cmdline and "pytest" not in cmdline:
            alive.append(cmdline)
    return alive


@pytest.fixture(scope="module")
def demo_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    data = tmp_path_factory.mktemp("loop") / "demo"
    completed = subprocess.run(
        [sys.executable, "-m", "proofnet.cli", "demo", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=420,
        env={**os.environ, "COLUMNS": "200"},
    )
    return data, completed


@pytest.mark.slow
def test_demo_settles_the_job_as_attested(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    data, completed = demo_run
    out = completed.stdout
    assert completed.returncode == 0, out + completed.stderr

    # --- the summary ----------------------------------------------------------------------
    found = re.search(r"^settlement tx: ([0-9a-f]{64})$", out, re.M)
    assert found, out
    tx_hash = found.group(1)
    assert re.search(rf"^explorer: http://127\.0\.0\.1:\d+/explorer/tx/{tx_hash}$", out, re.M)
    assert re.search(r"^audit: OK \(1 escrow\(s\) settled as attested", out, re.M), out
    assert "co-signed by oracle-0, oracle-1 (2 of 3)" in out
    assert "NOT isolated" in out
    assert "submitter" in out and "provider (worker-1)" in out
    assert _children_in(data) == []  # every role was stopped

    # --- what the roles recorded: the attestation, the workers' payout bindings -----------
    with sqlite3.connect(data / "oracle-0" / "oracle.db") as db:
        rows = db.execute(
            "SELECT job_id, payout_address, amount, status FROM oracle_attestations"
        ).fetchall()
    assert len(rows) == 1
    job_id, provider, attested, status = rows[0]
    assert status == "settled" and attested == demo_job.PRICE
    payouts = {
        json.loads((data / f"worker-{i}" / "work" / "registration.json").read_text())["binding"][
            "payout_address"
        ]
        for i in (1, 2)
    }
    assert provider in payouts
    commit = subprocess.run(
        ["git", "-C", str(data / "git" / "numpy-mlp.git"), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    spec = JobSpec.from_dict(demo_job.job_spec(commit))
    assert job_id == spec.job_id

    # --- the chain, read from the ledger directory ----------------------------------------
    datum, held, received = settled_escrow(data, tx_hash)
    # The escrow datum's job id is the 32 raw bytes of the spec's id.
    assert bytes(datum.job_id) == bytes.fromhex(spec.job_id)
    assert datum.budget == demo_job.BUDGET == held
    submitter = str(address_from_data(datum.submitter, Network.TESTNET))
    assert received[provider] == attested
    assert received[submitter] == demo_job.BUDGET - attested
    assert sum(received.values()) == demo_job.BUDGET  # no NTX of the escrow went elsewhere
    assert Address.from_primitive(provider).network == Network.TESTNET


@pytest.mark.slow
def test_the_printed_devnet_command_serves_the_demos_chain_again(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """After the demo stopped every role, the command it printed brings its chain back, and
    the explorer link it printed works again."""
    import shlex

    import httpx

    from proofnet.processes import RoleProcess

    data, completed = demo_run
    out = completed.stdout
    assert completed.returncode == 0, out + completed.stderr
    command = re.search(r"(proofnet devnet up --data-dir \S+ --port (\d+))$", out, re.M)
    link = re.search(r"^explorer: (http://127\.0\.0\.1:\d+/explorer/tx/[0-9a-f]{64})$", out, re.M)
    assert command and link, out
    argv = shlex.split(command.group(1))
    assert argv[:3] == ["proofnet", "devnet", "up"] and Path(argv[4]) == data / "devnet"
    devnet = RoleProcess("devnet-again", argv[1:], tmp_path / "devnet.log").start()
    try:
        devnet.wait_healthy(f"http://127.0.0.1:{command.group(2)}/api/v0/health", timeout=120)
        page = httpx.get(link.group(1), timeout=30)
        assert page.status_code == 200 and "proofnet settlement" in page.text
    finally:
        devnet.stop()


@pytest.mark.slow
def test_the_api_records_the_payout_and_the_refund_from_the_chain(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    """After the real settlement the API's chain watcher recorded it: the paid worker's
    `proofnet worker status` shows the payout with the settlement's hash, the submitter's
    balance the remainder back; the API's record matches the ledger's outputs."""
    data, completed = demo_run
    out = completed.stdout
    assert completed.returncode == 0, out + completed.stderr
    found = re.search(r"^settlement tx: ([0-9a-f]{64})$", out, re.M)
    assert found is not None
    tx_hash = found.group(1)
    status = out[out.index("$ proofnet worker status") :]
    assert f"tx {tx_hash}" in status
    assert f"{demo_job.PRICE:,} NTX  job " in status
    back = demo_job.BUDGET - demo_job.PRICE
    assert (
        f"submitter: {back:,} NTX back from the escrow (settlement remainder), tx {tx_hash[:16]}"
        in out
    )

    datum, _held, received = settled_escrow(data, tx_hash)
    submitter = str(address_from_data(datum.submitter, Network.TESTNET))
    with sqlite3.connect(data / "api" / "api.db") as db:
        rows = db.execute(
            "SELECT kind, action, address, ntx, job_id FROM chain_movements WHERE tx_hash = ?",
            (tx_hash,),
        ).fetchall()
    assert {(k, a, addr, n) for k, a, addr, n, _ in rows} == {
        ("payout", "settle", provider, amount)
        for provider, amount in received.items()
        if provider != submitter and amount > 0
    } | {("refund", "settle", submitter, back)}
    assert {job for *_, job in rows} == {bytes(datum.job_id).hex()}
    assert f"payout address   {next(a for _k, _a, a, _n, _j in rows if _k == 'payout')}" in status


def _bundle_app(bodies: dict[str, bytes]) -> FastAPI:
    """An oracle's bundle route, serving what the proposer stored."""
    app = FastAPI()

    @app.get("/api/v1/bundles/{sha256}")
    def bundle(sha256: str) -> Response:
        if sha256 not in bodies:
            return Response(status_code=404)
        return Response(bodies[sha256], media_type="application/json")

    return app


@pytest.mark.slow
def test_the_audit_accepts_the_settlement_and_catches_tampering(
    demo_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    data, completed = demo_run
    assert completed.returncode == 0, completed.stdout + completed.stderr
    found = re.search(r"^settlement tx: ([0-9a-f]{64})$", completed.stdout, re.M)
    assert found is not None
    tx_hash = found.group(1)
    deployment = Deployment.load(data / "deployment.json")
    with sqlite3.connect(data / "oracle-0" / "oracle.db") as db:
        ((sha, body),) = db.execute("SELECT sha256, body FROM settlement_bundles").fetchall()

    def audit(url: str, tx: str, oracle: str, script: str = deployment.escrow_hash) -> AuditReport:
        return audit_settlement(
            url,
            tx,
            [oracle],
            network="devnet",
            escrow_script_hash=script,
            ntx_policy=deployment.ntx_policy,
            ntx_name=deployment.ntx_name,
        )

    # The ledger directory again, served by a fresh devnet (the demo's has stopped).
    with (
        running_devnet(data, data_dir=data / "devnet") as devnet,
        serve_app(_bundle_app({sha: bytes(body)})) as honest,
        serve_app(_bundle_app({sha: bytes(body).replace(b"1", b"2", 1)})) as liar,
    ):
        report = audit(devnet.url, tx_hash, honest)
        assert report.ok and report.line().startswith("audit: OK"), report.problems
        assert report.bundle_sha256 == sha and report.signatures_checked == 1
        (escrow,) = report.escrows
        assert escrow.paid == escrow.attested == demo_job.PRICE
        assert escrow.refunded == escrow.refund_expected == demo_job.BUDGET - demo_job.PRICE

        # Another escrow script: the attestations do not verify for it.
        wrong = audit(devnet.url, tx_hash, honest, script="00" * 28)
        assert not wrong.ok and "signature or domain invalid" in wrong.line()
        # An oracle serving other bytes under the bundle's hash is not believed.
        with pytest.raises(AuditError, match="do not hash to"):
            audit(devnet.url, tx_hash, liar)
        with pytest.raises(AuditError, match="not on chain"):
            audit(devnet.url, "ab" * 32, honest)

        # The same audit as a command.
        command = [sys.executable, "-m", "proofnet.cli", "audit", "--tx", tx_hash]
        command += ["--deployment", str(data / "deployment.json"), "--chain-url", devnet.url]
        ran = subprocess.run(
            [*command, "--oracle-url", honest], capture_output=True, text=True, timeout=120
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert ran.stdout.splitlines()[-1].startswith("audit: OK")
        assert f"attested {demo_job.PRICE}" in ran.stdout
        ran = subprocess.run(
            [*command, "--oracle-url", liar], capture_output=True, text=True, timeout=120
        )
        assert ran.returncode == 2 and "do not hash to" in ran.stderr


@pytest.mark.slow
def test_sigterm_stops_the_demo_and_every_role(tmp_path: Path) -> None:
    data = tmp_path / "interrupted"
    demo = subprocess.Popen(
        [sys.executable, "-m", "proofnet.cli", "demo", "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert demo.stdout is not None
    lines = []
    for line in demo.stdout:  # until the devnet and the oracle keys are there
        lines.append(line)
        if "oracle keys" in line:
            break
    assert any("devnet up" in line for line in lines), lines
    demo.send_signal(signal.SIGTERM)
    rest, _ = demo.communicate(timeout=60)
    assert demo.returncode != 0
    assert "interrupted: every role stopped" in rest
    assert "Traceback" not in rest
    assert _children_in(data) == []
