"""Periodic batching on APScheduler, under a database lease.

The scheduler runs one interval job (coalesced, one instance at a time) that calls
`SettlementEngine.tick()`. Several oracle processes may share one database: the job first
takes or renews the proposer lease (`settlement_leases`), and only the holder recovers,
watches and proposes. A holder that dies stops renewing, and another process takes over
after `lease_ttl_s`; its first run is a full recovery.
"""

from __future__ import annotations

import logging
import os
import socket
import threading

from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session

from .engine import SettlementEngine
from .models import ProposerLease, now

log = logging.getLogger("oracle.settlement")

LEASE_NAME = "settlement-proposer"


def default_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class ProposerLeaseGuard:
    """Take or renew the single proposer lease; `held` says whether we hold it now."""

    def __init__(self, engine: Engine, holder: str, ttl_s: float = 30.0) -> None:
        if ttl_s <= 0:
            raise ValueError("lease ttl must be positive")
        self.engine = engine
        self.holder = holder
        self.ttl_s = ttl_s
        self.held = False

    def acquire(self) -> bool:
        """True when this holder has the lease for the next `ttl_s` seconds."""
        stamp = now()
        try:
            with Session(self.engine) as session, session.begin():
                lease = session.get(ProposerLease, LEASE_NAME, with_for_update=True)
                if lease is None:
                    session.add(
                        ProposerLease(
                            name=LEASE_NAME, holder=self.holder, expires_at=stamp + self.ttl_s
                        )
                    )
                elif lease.holder == self.holder or lease.expires_at < stamp:
                    if lease.holder != self.holder:
                        log.info(
                            "taking over the proposer lease from %s",
                            lease.holder,
                            extra={"job": "lease", "holder": self.holder},
                        )
                    lease.holder = self.holder
                    lease.expires_at = stamp + self.ttl_s
                    session.add(lease)
                else:
                    self.held = False
                    return False
        except (IntegrityError, OperationalError) as exc:
            # Another process inserted or locked the row first: it is the holder.
            log.info("proposer lease contended: %s", exc, extra={"job": "lease"})
            self.held = False
            return False
        self.held = True
        return True

    def release(self) -> None:
        if not self.held:
            return
        with Session(self.engine) as session, session.begin():
            lease = session.get(ProposerLease, LEASE_NAME, with_for_update=True)
            if lease is not None and lease.holder == self.holder:
                lease.expires_at = 0.0
                session.add(lease)
        self.held = False


class SettlementScheduler:
    """Runs `engine.tick()` every `interval_s` while holding the lease."""

    def __init__(
        self,
        engine: SettlementEngine,
        lease: ProposerLeaseGuard,
        interval_s: float = 2.0,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.engine = engine
        self.lease = lease
        self.interval_s = interval_s
        self._scheduler: BackgroundScheduler | None = None
        self._lock = threading.Lock()
        self.runs = 0

    def run_once(self) -> str | None:
        """One job run (also what the scheduler calls). Never raises: a failing run is
        logged and retried at the next interval."""
        with self._lock:
            try:
                was_held = self.lease.held
                if not self.lease.acquire():
                    return None
                if not was_held:
                    # Newly acquired (at start or by take-over): recover before anything.
                    self.engine.recovered = False
                self.runs += 1
                return self.engine.tick()
            except Exception:
                log.exception("settlement job failed", extra={"job": "settlement"})
                return None

    def start(self) -> None:
        if self._scheduler is not None:
            return
        # A run longer than the interval makes APScheduler warn that it skipped the next
        # one; with coalescing and one instance that is the intended behaviour, not news.
        logging.getLogger("apscheduler.scheduler").setLevel(logging.ERROR)
        scheduler = BackgroundScheduler(daemon=True)
        scheduler.add_job(
            self.run_once,
            "interval",
            seconds=self.interval_s,
            id="settlement",
            coalesce=True,
            max_instances=1,
            misfire_grace_time=None,
            next_run_time=_now_dt(),
        )
        scheduler.start()
        self._scheduler = scheduler
        log.info(
            "settlement scheduler started every %.1fs",
            self.interval_s,
            extra={"job": "settlement", "holder": self.lease.holder},
        )

    def stop(self) -> None:
        if self._scheduler is None:
            return
        self._scheduler.shutdown(wait=True)
        self._scheduler = None
        try:
            self.lease.release()
        except Exception:
            log.exception("could not release the proposer lease", extra={"job": "lease"})


def _now_dt():  # type: ignore[no-untyped-def]
    from datetime import datetime

    return datetime.now().astimezone()
