"""A recorded escrow and the chain as balances read it, for tests of the escrow's state
(`GET /jobs/{id}/escrow`) and the commands that read it; the on-chain flows are tested
against a devnet (test_escrow_cancel.py, test_webapp_e2e.py)."""

from __future__ import annotations

from datetime import timedelta

from api_support import FakeClock
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from api.models import Job, JobEscrow
from api.services.balances import BalanceSources, CachedLookups, Holdings
from proofnet.when import ms_of

ESCROW_TX = "e1" * 32


class Chain:
    """The chain as balances read it: which escrow outputs are unspent."""

    def __init__(self) -> None:
        self.spent: set[tuple[str, int]] = set()

    def holdings(self, address: str) -> Holdings:
        return Holdings(0, 0)

    def output_unspent(self, tx_id: str, index: int) -> bool:
        return (tx_id, index) not in self.spent


def attach_chain(client: TestClient) -> Chain:
    chain = Chain()
    lookups = CachedLookups(chain, None, ttl_s=0.0)
    client.app.state.balance_sources = BalanceSources(  # type: ignore[attr-defined]
        lookups, "http://127.0.0.1:3030/api/v0", "ab" * 28 + "4e5458"
    )
    return chain


def record_escrow(session: Session, job_id: str, clock: FakeClock, *, deadline_in_s: int) -> None:
    job = session.exec(select(Job).where(Job.job_id == job_id)).one()
    assert job.id is not None
    session.add(
        JobEscrow(
            job_id=job.id,
            tx_id=ESCROW_TX,
            output_index=0,
            budget=1_000_000,
            deadline_ms=ms_of(clock() + timedelta(seconds=deadline_in_s)),
            recorded_at=clock(),
        )
    )
    session.commit()
