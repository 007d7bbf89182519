"""`proofnet worker bid|reveal|auctions` against the real API: a provider seals a bid, opens
it after the window, sees it won, and its worker then prices the job at the clearing price
it recomputes itself (never at a figure the API states)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from agent_fixtures import ApiServer, api_server  # noqa: F401  (fixture)
from sqlmodel import select
from test_rate_card_cli import H200, registered_gpu_worker
from typer.testing import CliRunner

from api.db import open_session
from api.models import Auction, Job
from proofnet.cli import app
from proofnet.messages.jobspec import JobSpec
from worker.pricing import PricingError
from worker.rate_cards import RateCardBook


def auction_spec(reserve: int) -> dict[str, object]:
    return {
        "model": {"repo_url": "https://example.org/train.git", "commit": "c" * 40},
        "framework": "numpy",
        "image": "python@sha256:" + "d" * 64,
        "commands": [["python", "train.py"]],
        "resources": {
            "gpus": 1,
            "gpu_memory_mb": 1000,
            "cpus": 1,
            "ram_mb": 1024,
            "disk_mb": 1024,
            "max_duration_s": 3600,
        },
        "pricing": {"kind": "auction", "reserve": reserve, "bid_window_s": 600},
        "seed": 5,
    }


def move_windows(api: ApiServer, job_id: str, *, bids_closed: bool, reveals_closed: bool) -> None:
    """Time passes for the auction (the API runs on the real clock: the windows move)."""
    past = datetime.now(UTC) - timedelta(seconds=1)
    with open_session(api.engine) as session:
        job = session.exec(select(Job).where(Job.job_id == job_id)).one()
        auction = session.get(Auction, job.id)
        assert auction is not None
        if bids_closed:
            auction.bids_close_at = past
        if reveals_closed:
            auction.reveals_close_at = past
        session.add(auction)
        session.commit()


def test_a_provider_bids_reveals_and_is_priced_at_the_clearing_price(
    api_server: ApiServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = registered_gpu_worker(api_server, tmp_path / "worker.skey")
    job_id = api_server.submit(auction_spec(reserve=900))
    monkeypatch.setenv("PROOFNET_API_URL", api_server.url)
    monkeypatch.setenv("PROOFNET_WORKER_KEY_FILE", str(tmp_path / "worker.skey"))
    monkeypatch.setenv("PROOFNET_WORKER_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setenv("PROOFNET_NETWORK", api_server.config.network)
    runner = CliRunner()

    listed = runner.invoke(app, ["worker", "auctions"])
    assert listed.exit_code == 0 and job_id in listed.output and "bidding" in listed.output
    bad = runner.invoke(app, ["worker", "bid", "not-a-job", "--amount", "5"])
    assert bad.exit_code == 2 and "64 lowercase hex" in bad.output
    sealed = runner.invoke(app, ["worker", "bid", job_id, "--amount", "400"])
    assert sealed.exit_code == 0, sealed.output
    kept = tmp_path / "work" / "bids" / f"{job_id}.json"
    assert kept.stat().st_mode & 0o077 == 0  # the salt stays with the provider
    early = runner.invoke(app, ["worker", "reveal", job_id])
    assert early.exit_code == 2 and "revealed after" in early.output

    move_windows(api_server, job_id, bids_closed=True, reveals_closed=False)
    opened = runner.invoke(app, ["worker", "reveal", job_id])
    assert opened.exit_code == 0, opened.output
    assert json.loads(opened.output) == {"job_id": job_id, "amount": 400, "revealed": True}

    spec = JobSpec.from_dict(auction_spec(reserve=900))
    book = RateCardBook({}, client, client.key.public_key_hex)
    with pytest.raises(PricingError, match="not cleared"):
        book.amount(spec, 1, H200)  # more reveals could still change the outcome
    move_windows(api_server, job_id, bids_closed=True, reveals_closed=True)
    shown = runner.invoke(app, ["worker", "auctions", "--job", job_id])
    assert shown.exit_code == 0, shown.output
    state = json.loads(shown.output)
    assert state["winner"] == client.key.public_key_hex and state["price"] == 900
    # A lone bid is paid the reserve; the worker recomputes it from the signed bids.
    assert RateCardBook({}, client, client.key.public_key_hex).amount(spec, 1, H200) == 900
    client.close()
