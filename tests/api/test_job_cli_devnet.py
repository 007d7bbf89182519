"""The submitter's key-file client on chain: lock a job's escrow, then take it back after
the deadline, on a devnet with the contracts deployed (the API builds, the key file signs)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from api_support import job_spec
from fastapi.testclient import TestClient
from sqlmodel import Session, col, select
from web_fixtures import EscrowWorld, escrow_world

from api.client_cli import JobClient, JobCliError
from api.config import ApiConfig
from api.models import Job, JobEscrow
from api.services.users import add_senior

BUDGET = 777_000

pytestmark = pytest.mark.slow


@pytest.fixture
def config(make_config: Callable[..., ApiConfig]) -> ApiConfig:
    # One one-second attempt and the shortest settlement window the lock builder accepts
    # (a minute): the deadline passes about a minute after locking, so the refund runs for real.
    return make_config(claim_requires_escrow=True, max_attempts=1, settlement_window_s=65)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EscrowWorld]:
    with escrow_world(Path(tmp_path_factory.mktemp("job-cli-devnet"))) as w:
        yield w


def test_lock_then_refund_after_the_deadline(
    client: TestClient,
    world: EscrowWorld,
    session: Session,
    config: ApiConfig,
    clock: Any,
    tmp_path: Path,
) -> None:
    world.attach(client.app)
    add_senior(session, config, world.wallet.address, clock())
    cli = JobClient(
        "http://testserver", world.wallet.signing_key, http=client, token_cache=tmp_path / "s"
    )
    spec = job_spec(gpus=0)
    spec["resources"]["max_duration_s"] = 1
    spec["pricing"] = {"kind": "fixed", "amount": BUDGET}
    job_id = cli.submit(spec)["job_id"]
    ntx_before = world.holdings()[1]

    locked = cli.lock(job_id)
    assert locked["recorded"] is True
    session.rollback()  # a fresh snapshot: the API recorded the escrow in its own session
    escrow = session.exec(
        select(JobEscrow)
        .join(Job, col(Job.id) == col(JobEscrow.job_id))
        .where(Job.job_id == job_id)
    ).one()
    recorded = (escrow.tx_id, escrow.budget)
    session.rollback()  # SQLite transactions take the write lock: don't hold it
    assert recorded == (locked["tx_id"], BUDGET)
    assert world.holdings()[1] == ntx_before - BUDGET

    # Before the deadline the API refuses with a clear answer; after it, the refund lands.
    with pytest.raises(JobCliError, match="425") as early:
        cli.refund(job_id)
    assert "refund possible after the deadline" in str(early.value)
    assert " UTC (in " in str(early.value) and "slot" not in str(early.value)
    deadline = time.monotonic() + 120
    while True:
        try:
            refunded = cli.refund(job_id)
            break
        except JobCliError as exc:
            if "425" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(1)
    refund_tx = refunded.get("tx_id") or refunded.get("tx_hash")
    assert refund_tx and refund_tx != recorded[0]
    end = time.monotonic() + 120  # a hang bound; the event is the NTX back
    while world.holdings()[1] != ntx_before and time.monotonic() < end:
        time.sleep(0.5)
    assert world.holdings()[1] == ntx_before  # every unit of NTX is back
    with pytest.raises(JobCliError, match="409|spent"):
        cli.refund(job_id)
