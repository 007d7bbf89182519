"""`proofnet demo --shape relay` (and `--shape stopped`) end to end, as real processes.

The relay demo's summary is checked, then what it settled, read independently of the demo:
`proofnet audit --tx ... --json` against the devnet's ledger directory (served again after
the demo stopped) and the bundle the proposing oracle stored, and the settlement transaction
itself from the ledger. Each stage's provider is paid the stage amount and each evaluation's
the evaluation amount, one output per unit; the rest of the escrow goes back to the
submitter; and every stage's attested inputs are the previous stage's attested output. The
stopped shape pays the two stages and the failed evaluation that ran, and refunds the rest.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Response
from pycardano import Network
from typer.testing import CliRunner

from chain.devnet.testing import running_devnet, serve_app
from chain.offchain.builders.onchain import address_from_data
from demos import relay as demo_relay
from demos.demo import SHAPES, DemoOptions
from proofnet.cli import DemoShape, app
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.topology import plan, total_amount
from tests.proofnet.settled_on_chain import settled_escrow

RunResult = tuple[Path, subprocess.CompletedProcess[str]]


# --- what runs without the demo -------------------------------------------------------------


def test_demo_help_offers_the_shapes() -> None:
    result = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "--shape" in result.output
    assert "single|relay|stopped" in result.output
    assert [s.value for s in DemoShape] == list(SHAPES)


def test_an_unknown_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="single, relay, stopped"):
        DemoOptions(shape="ring")
    result = CliRunner().invoke(app, ["demo", "--shape", "ring"])
    assert result.exit_code == 2 and "ring" in result.output


def test_the_relay_job_is_three_stages_with_evaluations(tmp_path: Path) -> None:
    data = demo_relay.make_data(tmp_path)
    spec = JobSpec.from_dict(
        demo_relay.job_spec("a" * 40, data, threshold=demo_relay.PASS_THRESHOLD, seed=3)
    )
    assert spec.topology is not None
    units = plan(spec.topology)
    assert [(u.index, u.kind, u.inputs, u.evaluates) for u in units] == [
        (0, "stage", (), None),
        (1, "stage", (0,), None),
        (2, "stage", (1,), None),
        (3, "eval", (1,), 1),
        (4, "eval", (2,), 2),
    ]
    # Stage i trains on shard i; the evaluations on the held-out shard.
    assert [u.shards for u in units[:3]] == [(0,), (1,), (2,)]
    assert [Path(s.uri.removeprefix("file://")) for s in spec.data] == list(data.train)
    assert spec.max_amount == total_amount(spec.topology) < demo_relay.BUDGET
    assert Decimal(demo_relay.STOP_THRESHOLD) < Decimal(demo_relay.PASS_THRESHOLD)


# --- the demo as a subprocess ---------------------------------------------------------------


def _demo(tmp_path_factory: pytest.TempPathFactory, shape: str) -> RunResult:
    data = tmp_path_factory.mktemp(f"demo-{shape}") / "demo"
    completed = subprocess.run(
        [sys.executable, "-m", "proofnet.cli", "demo", "--shape", shape, "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=420,
        env={**os.environ, "COLUMNS": "200"},
    )
    return data, completed


@pytest.fixture(scope="module")
def relay_run(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return _demo(tmp_path_factory, "relay")


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return _demo(tmp_path_factory, "stopped")


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


def _summary(run: RunResult, units: int) -> str:
    """The settlement tx the summary names, after checking the summary's lines."""
    data, completed = run
    out = completed.stdout
    assert completed.returncode == 0, out + completed.stderr
    found = re.search(r"^settlement tx: ([0-9a-f]{64})$", out, re.M)
    assert found, out
    tx_hash = found.group(1)
    assert re.search(rf"^explorer: http://127\.0\.0\.1:\d+/explorer/tx/{tx_hash}$", out, re.M)
    assert re.search(
        rf"^audit: OK \(1 escrow\(s\) settled as attested, {units} attestation signature", out, re.M
    ), out
    assert "co-signed by oracle-0, oracle-1 (2 of 3)" in out
    assert f"unit settlement grace {demo_relay.UNIT_GRACE_S}s" in out
    assert all(f"provider (worker-{i})" in out for i in (1, 2, 3))
    assert re.search(r"^refund to the submitter: [\d,]+ NTX", out, re.M)
    assert _children_in(data) == []  # every role was stopped
    return tx_hash


def _bundle(data: Path) -> tuple[str, bytes]:
    with sqlite3.connect(data / "oracle-0" / "oracle.db") as db:
        ((sha, body),) = db.execute("SELECT sha256, body FROM settlement_bundles").fetchall()
    return str(sha), bytes(body)


def _bundle_app(sha: str, body: bytes) -> FastAPI:
    """The proposer's bundle route, serving what it stored (the demo's oracles stopped)."""
    api = FastAPI()

    @api.get("/api/v1/bundles/{sha256}")
    def bundle(sha256: str) -> Response:
        if sha256 != sha:
            return Response(status_code=404)
        return Response(body, media_type="application/json")

    return api


def _audit_json(data: Path, tx_hash: str) -> dict[str, Any]:
    """`proofnet audit --tx --json` against the ledger directory served again."""
    sha, body = _bundle(data)
    with (
        running_devnet(data, data_dir=data / "devnet") as devnet,
        serve_app(_bundle_app(sha, body)) as oracle,
    ):
        command = [sys.executable, "-m", "proofnet.cli", "audit", "--tx", tx_hash, "--json"]
        command += ["--deployment", str(data / "deployment.json"), "--chain-url", devnet.url]
        ran = subprocess.run(
            [*command, "--oracle-url", oracle], capture_output=True, text=True, timeout=120
        )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report: dict[str, Any] = json.loads(ran.stdout)
    assert report["ok"] is True
    ((settlement,),) = [report["settlements"]]
    assert settlement["tx_id"] == tx_hash and settlement["discrepancies"] == []
    return dict(settlement)


def _attested_units(data: Path) -> dict[int, dict[str, Any]]:
    """The signed payloads of the bundle's unit attestations, by unit index."""
    from auditor.audit import bundle_attestations

    _, body = _bundle(data)
    _, _, payloads = bundle_attestations(body)
    out = {}
    for payload in payloads:
        att = json.loads(payload)
        out[int(att["unit"]["index"])] = att
    return out


def _payout_addresses(data: Path) -> set[str]:
    return {
        json.loads((data / f"worker-{i}" / "work" / "registration.json").read_text())["binding"][
            "payout_address"
        ]
        for i in (1, 2, 3)
    }


def _check_settlement(run: RunResult, paid_units: list[int]) -> dict[int, dict[str, Any]]:
    """Everything the settlement of `paid_units` must be; the attested units."""
    data, completed = run
    tx_hash = _summary(run, len(paid_units))
    amounts = {
        i: demo_relay.STAGE_AMOUNT if i < demo_relay.STAGES else demo_relay.EVAL_AMOUNT
        for i in paid_units
    }
    owed = sum(amounts.values())
    providers = _payout_addresses(data)

    # The audit's own reading: one output per unit, paying its provider exactly its amount.
    settlement = _audit_json(data, tx_hash)
    ((escrow,),) = [settlement["escrows"]]
    outputs = {index: (address, ntx) for index, address, ntx in settlement["outputs"]}
    units = escrow["units"]
    assert [u["index"] for u in units] == paid_units
    for unit in units:
        kind = "stage" if unit["index"] < demo_relay.STAGES else "eval"
        assert unit["kind"] == kind
        assert unit["attested"] == unit["paid"] == amounts[unit["index"]]
        assert unit["provider"] in providers
        assert outputs[unit["output"]] == (unit["provider"], amounts[unit["index"]])
    assert len({u["output"] for u in units}) == len(units)  # one output per unit
    assert escrow["held"] == demo_relay.BUDGET and escrow["attested"] == owed
    assert escrow["refunded"] == demo_relay.BUDGET - owed

    # The transaction itself, from the ledger: the escrow of this job, its NTX split between
    # the units' providers and the submitter, nothing elsewhere.
    datum, held, received = settled_escrow(data, tx_hash)
    attested = _attested_units(data)
    assert sorted(attested) == paid_units
    (job_id,) = {a["domain"]["job_id"] for a in attested.values()}
    assert bytes(datum.job_id) == bytes.fromhex(job_id) and held == demo_relay.BUDGET
    submitter = str(address_from_data(datum.submitter, Network.TESTNET))
    assert escrow["submitter"] == submitter
    per_provider: dict[str, int] = {}
    for index, att in attested.items():
        assert att["amount"] == amounts[index]
        per_provider[att["payout_address"]] = (
            per_provider.get(att["payout_address"], 0) + amounts[index]
        )
    for address, amount in per_provider.items():
        assert received[address] == amount
    assert received[submitter] == demo_relay.BUDGET - owed
    assert sum(received.values()) == demo_relay.BUDGET

    # The checkpoint chain, as the providers signed it.
    stages = [i for i in paid_units if i < demo_relay.STAGES]
    out = {i: attested[i]["unit"]["output"] for i in paid_units}
    assert attested[0]["unit"]["inputs"] == []
    for i in stages[1:]:
        assert attested[i]["unit"]["inputs"] == [out[i - 1]]
    assert all(re.fullmatch(r"[0-9a-f]{64}", out[i]) for i in stages)
    assert len({out[i] for i in stages}) == len(stages)
    for i in paid_units:
        if i >= demo_relay.STAGES:  # evaluation 3 evaluates stage 1, 4 stage 2
            assert attested[i]["unit"]["kind"] == "eval" and out[i] is None
            assert attested[i]["unit"]["inputs"] == [out[i - 2]]
    return attested


@pytest.mark.slow
def test_relay_demo_pays_each_unit_and_refunds_the_rest(relay_run: RunResult) -> None:
    attested = _check_settlement(relay_run, [0, 1, 2, 3, 4])
    out = relay_run[1].stdout
    assert "pipeline completed" in out
    for i in (3, 4):
        loss = Decimal(attested[i]["metrics"]["loss"])
        assert loss <= Decimal(demo_relay.PASS_THRESHOLD)
        assert f"loss {attested[i]['metrics']['loss']} <= {demo_relay.PASS_THRESHOLD}" in out
    # The progress named the hand-over of each checkpoint.
    for i in (1, 2):
        given = attested[i - 1]["unit"]["output"]
        assert f"stage {i - 1}'s checkpoint {given[:16]}..." in out
    assert out.count("SHA-256 matches") == 3
    assert "demo finished in" in out


@pytest.mark.slow
def test_stopped_demo_pays_what_ran_and_refunds_the_rest(stopped_run: RunResult) -> None:
    attested = _check_settlement(stopped_run, [0, 1, 3])
    out = stopped_run[1].stdout
    assert "pipeline stopped" in out
    assert "fail: the pipeline stops" in out
    assert Decimal(attested[3]["metrics"]["loss"]) > Decimal(demo_relay.STOP_THRESHOLD)
    assert "never ran: stage 2, eval 4 (of stage 2)" in out
