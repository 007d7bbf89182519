"""Periodic housekeeping: requeue jobs whose leases expired, forget stale nonces."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlmodel import Session, col

from api.config import ApiConfig
from api.models import AuthChallenge, WorkerRequestNonce
from api.services.leases import sweep_expired


@dataclass(frozen=True)
class SweepReport:
    leases_expired: int
    nonces_forgotten: int
    challenges_forgotten: int


def sweep(session: Session, config: ApiConfig, now: datetime) -> SweepReport:
    expired = sweep_expired(session, now, config=config)
    # A nonce older than the accepted clock skew can no longer be replayed: the timestamp
    # check refuses it first, so the row is dead weight.
    horizon = now - timedelta(seconds=2 * config.worker_request_skew_s)
    nonces = session.execute(
        delete(WorkerRequestNonce).where(col(WorkerRequestNonce.seen_at) < horizon)
    )
    challenges = session.execute(
        delete(AuthChallenge).where(col(AuthChallenge.expires_at) < now - timedelta(days=1))
    )
    session.commit()
    return SweepReport(
        leases_expired=expired,
        nonces_forgotten=nonces.rowcount,  # type: ignore[attr-defined]
        challenges_forgotten=challenges.rowcount,  # type: ignore[attr-defined]
    )
