"""The submitter's key-file client (`proofnet job`) and the refund endpoints' refusals.

The on-chain lock/refund round trip needs a deployed devnet; here the client runs against
the API in-process and the refund endpoints are checked for their clear 4xx answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from api_support import Wallet, job_spec
from escrow_support import attach_chain, record_escrow
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.client_cli import JobClient, JobCliError, app, load_payment_key


def _cli(client: TestClient, wallet: Wallet, cache: Path) -> JobClient:
    return JobClient("http://testserver", wallet.signing_key, http=client, token_cache=cache)


def test_submit_status_logs_cancel_and_the_cached_session(
    client: TestClient, approved: tuple[Wallet, dict[str, str]], tmp_path: Path
) -> None:
    wallet, _ = approved
    cache = tmp_path / "sessions" / "s.json"
    cli = _cli(client, wallet, cache)
    posted = cli.submit(job_spec(gpus=0))
    job_id = posted["job_id"]
    assert cli.status(job_id)["status"] == "queued"
    assert cli.logs(job_id) == {"lines": [], "next_after": 0}

    # The token is cached 0600 and reused: a second client signs in no more.
    assert cache.stat().st_mode & 0o777 == 0o600
    saved = json.loads(cache.read_text())
    assert saved["address"] == wallet.address
    again = _cli(client, wallet, cache)
    assert again._headers() == {"Authorization": f"Bearer {saved['token']}"}
    # A stale cached token is replaced by signing in again, once.
    cache.write_text(json.dumps({**saved, "token": "stale"}))
    third = _cli(client, wallet, cache)
    assert third.status(job_id)["job_id"] == job_id
    assert json.loads(cache.read_text())["token"] not in {"stale", saved["token"]}

    cancelled = cli.cancel(job_id)
    assert cancelled["status"] == "cancelled" and cancelled["escrow"]["state"] == "none"
    # Cancelling again changes nothing and says so; it does not fail.
    assert cli.cancel(job_id)["status"] == "cancelled"
    assert cli.status(job_id)["status"] == "cancelled"


def test_unapproved_submitter_gets_a_clear_error(client: TestClient, tmp_path: Path) -> None:
    cli = _cli(client, Wallet(), tmp_path / "s.json")
    with pytest.raises(JobCliError, match="HTTP 403"):
        cli.submit(job_spec(gpus=0))


def test_refund_refusals(
    client: TestClient, approved: tuple[Wallet, dict[str, str]], tmp_path: Path
) -> None:
    wallet, headers = approved
    cli = _cli(client, wallet, tmp_path / "s.json")
    job_id = cli.submit(job_spec(gpus=0))["job_id"]
    # No deployment configured: the API says so (503), it does not crash.
    unconfigured = client.post(
        f"/api/v1/jobs/{job_id}/escrow/refund/build", json={}, headers=headers
    )
    assert unconfigured.status_code == 503, unconfigured.text
    client.app.state.deployment = object()  # type: ignore[attr-defined]
    client.app.state.chain_context = object()  # type: ignore[attr-defined]
    missing = client.post(f"/api/v1/jobs/{job_id}/escrow/refund/build", json={}, headers=headers)
    assert missing.status_code == 404 and "no recorded escrow" in missing.json()["detail"]
    with pytest.raises(JobCliError, match="no recorded escrow"):
        cli.refund(job_id)
    other = client.post(
        "/api/v1/jobs/" + "0" * 64 + "/escrow/refund/build", json={}, headers=headers
    )
    assert other.status_code == 404


def test_key_file_cli_reports_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.skey"
    bad.write_text("not a key")
    with pytest.raises(JobCliError, match="not a payment signing key"):
        load_payment_key(bad)
    result = CliRunner().invoke(
        app, ["status", "x", "--key-file", str(bad), "--api-url", "http://127.0.0.1:9"]
    )
    assert result.exit_code == 2
    assert "error:" in result.output and "not a payment signing key" in result.output


def test_escrow_and_cancel_commands_say_when_in_utc_and_never_in_slots(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    session: Any,
    clock: Any,
    worker_factory: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`proofnet job escrow` and `job cancel` on a locked job a provider has leased: the
    escrow stays locked, and the command says when work started and when a refund opens."""
    wallet, _headers = approved
    attach_chain(client)
    cli = _cli(client, wallet, tmp_path / "s.json")
    monkeypatch.setattr("api.client_cli._client", lambda *_a: cli)
    job_id = cli.submit(job_spec())["job_id"]
    runner = CliRunner()
    args = ["--key-file", str(tmp_path / "unused.skey")]
    (tmp_path / "unused.skey").write_text("unused")

    none = runner.invoke(app, ["escrow", job_id, *args])
    assert none.exit_code == 0 and "no escrow is recorded" in none.output

    record_escrow(session, job_id, clock, deadline_in_s=3 * 3600 + 600)
    worker = worker_factory()
    worker.register([("NVIDIA A100-SXM4-80GB", 81920)])
    assert worker.claim().status_code == 200
    shown = runner.invoke(app, ["escrow", job_id, *args])
    assert shown.exit_code == 0, shown.output
    assert (
        "UTC (in 3 h 10 min)" in shown.output and "cancel: not now: work started at" in shown.output
    )

    cancelled = runner.invoke(app, ["cancel", job_id, *args])
    assert cancelled.exit_code == 0, cancelled.output
    assert "the escrow stays locked: work started at" in cancelled.output
    assert "refund possible after the deadline" in cancelled.output
    assert " UTC (in 3 h 10 min)" in cancelled.output
    assert "slot" not in (none.output + shown.output + cancelled.output).lower()
    assert cli.status(job_id)["status"] == "cancelled"
