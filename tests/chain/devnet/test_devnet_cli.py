"""`proofnet devnet ...` commands, through typer's CliRunner and (for `up`) a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fixture_paths import LEDGER_VECTORS
from pycardano import Address, Network, PaymentSigningKey
from typer.testing import CliRunner

from chain.devnet.cli import app
from chain.devnet.testing import RunningDevnet, running_devnet

runner = CliRunner()


def _address(seed: int) -> str:
    key = PaymentSigningKey.from_primitive(bytes([seed]) * 32)
    return str(Address(key.to_verification_key().hash(), network=Network.TESTNET))


@pytest.fixture
def devnet_with_token(tmp_path: Path) -> RunningDevnet:
    with running_devnet(tmp_path, block_time=0.1, enable_faults=True, admin_token="tok") as running:
        yield running  # type: ignore[misc]


def test_fund_status_and_faults(devnet_with_token: RunningDevnet) -> None:
    dn = devnet_with_token
    target = _address(5)
    common = ["--url", dn.url, "--admin-token", "tok"]

    result = runner.invoke(app, ["fund", target, "--ada", "2.5", "--asset", "4e5458=7", *common])
    assert result.exit_code == 0, result.output
    tx_hash = result.output.strip().splitlines()[-1].removeprefix("tx: ")
    dn.wait_for_tx(tx_hash)
    utxos = httpx.get(f"{dn.url}/addresses/{target}/utxos").json()
    amounts = {a["unit"]: a["quantity"] for u in utxos for a in u["amount"]}
    assert amounts["lovelace"] == "2500000"
    assert [q for unit, q in amounts.items() if unit.endswith("4e5458")] == ["7"]

    result = runner.invoke(
        app, ["fund", target, "--lovelace", "1000000", "--url", dn.url, "--admin-token", "bad"]
    )
    assert result.exit_code == 2 and "403" in result.output

    result = runner.invoke(app, ["status", "--url", dn.url, "--json"])
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status["faults_enabled"] is True and status["tip"]["height"] >= 1

    assert runner.invoke(app, ["pause", *common]).exit_code == 0
    assert dn.ledger.paused()
    height = dn.ledger.tip().height
    tx2 = (
        runner.invoke(app, ["fund", target, "--lovelace", "3000000", *common])
        .output.split("tx: ")[-1]
        .strip()
    )
    time.sleep(0.4)
    assert dn.ledger.tip().height == height and tx2 in dn.ledger.mempool()
    result = runner.invoke(app, ["status", "--url", dn.url])
    assert "mempool: 1 transaction(s)" in result.output and "paused: yes" in result.output
    assert runner.invoke(app, ["resume", *common]).exit_code == 0
    confirmed_at = dn.wait_for_tx(tx2)["block_height"]

    # Pause so no block lands between reading the tip and rolling back past tx2's block.
    assert runner.invoke(app, ["pause", *common]).exit_code == 0
    depth = dn.ledger.tip().height - confirmed_at + 1
    result = runner.invoke(app, ["rollback", "--depth", str(depth), "--drop", *common])
    assert result.exit_code == 0, result.output
    assert f"height {confirmed_at - 1}" in result.output and "dropped" in result.output
    assert httpx.get(f"{dn.url}/txs/{tx2}").status_code == 404
    assert tx2 not in dn.ledger.mempool()


def test_fund_rejects_bad_arguments(devnet_with_token: RunningDevnet) -> None:
    dn = devnet_with_token
    cases = [
        ["fund", _address(6), "--url", dn.url, "--admin-token", "tok"],  # nothing to send
        ["fund", _address(6), "--asset", "zz=1", "--url", dn.url, "--admin-token", "tok"],
        ["fund", _address(6), "--asset", "4e5458", "--url", dn.url, "--admin-token", "tok"],
        ["fund", "addr_test1bogus", "--ada", "1", "--url", dn.url, "--admin-token", "tok"],
    ]
    for args in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert "error:" in result.output
    assert dn.ledger.mempool() == []


def test_unreachable_devnet_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = runner.invoke(app, ["status", "--url", f"http://127.0.0.1:{port}/api/v0"])
    assert result.exit_code == 2 and "cannot reach the devnet" in result.output


def test_check_vectors(tmp_path: Path) -> None:
    source = LEDGER_VECTORS / "simple_send.json"
    good = tmp_path / "good"
    good.mkdir()
    shutil.copy(source, good / "simple_send.json")
    result = runner.invoke(app, ["check-vectors", str(good)])
    assert result.exit_code == 0, result.output
    assert "PASS simple_send: ok" in result.output and "1/1 vectors match" in result.output

    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy(source, broken / "a_good.json")
    data = json.loads(source.read_text())
    _tamper(data)
    (broken / "b_tampered.json").write_text(json.dumps(data))
    result = runner.invoke(app, ["check-vectors", str(broken)])
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("PASS") and lines[1].startswith("FAIL") and "differs at" in lines[1]
    assert "1/2 vectors match" in result.output

    result = runner.invoke(app, ["check-vectors", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "error:" in result.output


def _tamper(vector: dict) -> None:  # type: ignore[type-arg]
    """Change the expected script context so it no longer matches what the devnet builds."""
    for key in ("expected_script_context", "expected"):
        if key in vector:
            vector[key]["fields"][0]["fields"][2] = {"int": 123456789}
            return
    raise AssertionError(f"unknown vector layout: {sorted(vector)}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_up(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PROOFNET_DEVNET_ENABLE_FAULTS": "false"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proofnet.cli",
            "devnet",
            "up",
            "--data-dir",
            str(data_dir),
            "--port",
            str(port),
            "--block-time",
            "0.2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError("devnet did not come up")


def test_up_serves_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    data_dir = tmp_path / "chain"
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api/v0"
    proc = _start_up(data_dir, port)
    try:
        _wait_healthy(url, proc)
        target = _address(8)
        result = runner.invoke(app, ["fund", target, "--ada", "4", "--url", url])
        assert result.exit_code == 0, result.output
        tx_hash = result.output.split("tx: ")[-1].strip()
        deadline = time.monotonic() + 20
        while httpx.get(f"{url}/txs/{tx_hash}").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        # Faults are off: the admin fault endpoints refuse.
        assert runner.invoke(app, ["pause", "--url", url]).exit_code == 2
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out.decode()
    assert "state saved" in out.decode()

    port = _free_port()
    url = f"http://127.0.0.1:{port}/api/v0"
    proc = _start_up(data_dir, port)
    try:
        _wait_healthy(url, proc)
        assert httpx.get(f"{url}/txs/{tx_hash}").status_code == 200
        utxos = httpx.get(f"{url}/addresses/{target}/utxos").json()
        assert [u["amount"][0]["quantity"] for u in utxos] == ["4000000"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
