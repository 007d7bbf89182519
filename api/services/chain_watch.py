"""The chain watcher: records what this deployment's scripts paid, from the chain.

Every `interval_s` one watcher among the API processes sharing a database (elected by the
lease on its cursor row, `ChainWatchCursor`) asks the follower (chain.offchain.follow) what
happened since its cursor, classifies the transactions into movements (payouts, refunds,
cancels; slashed provider bonds) and applies the step in one database transaction:

- compare and set the cursor first: the update names the holder, an unexpired lease and
  the cursor the pass started from, so a watcher that lost its lease or raced another
  writes nothing (on PostgreSQL the row lock orders the two; on SQLite every transaction
  takes the write lock at BEGIN);
- delete what blocks above the step's common point recorded (a rollback; none otherwise),
  insert the step's movements (unique per output: a repeat cannot double-count);
- keep the new cursor among the recent points a later rollback resumes from.

Then, once a transaction is `confirmations` blocks deep, the owner of the job whose
recorded escrow it spent is notified once ("settled" or "refunded"; the outbox's
idempotency key keeps a rescan from sending again). The cursor and the record live in the
database, so a restart resumes where the last pass committed. Nothing here trusts a
callback or transaction metadata.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, delete, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, col, select

from api.db import is_sqlite, open_session
from api.models import ChainMovement, ChainWatchCursor, ChainWatchPoint, Job, JobEscrow
from api.services import balances, bonds, notifications
from chain.offchain.builders.deployment import Deployment
from chain.offchain.follow.bond_slashes import BondClassifier
from chain.offchain.follow.classify import (
    DEFAULT_CLASSIFIERS,
    SETTLE_ACTION,
    SLASH,
    Classifier,
    classify,
    watched_scripts,
)
from chain.offchain.follow.model import BlockPoint, FollowStep
from chain.offchain.follow.reader import DeploymentFollower

log = logging.getLogger(__name__)


class WatchError(Exception):
    """The watcher cannot follow this deployment on this chain (the message says why)."""


@dataclass(frozen=True)
class WatchConfig:
    interval_s: float = 10.0
    # A holder that stops renewing is replaced after this long.
    lease_ttl_s: float = 60.0
    # Notifications wait until a transaction is this many blocks deep (1: in the tip).
    confirmations: int = 3
    # Recent cursors kept to resume from after a rollback.
    keep_points: int = 64

    def __post_init__(self) -> None:
        if self.interval_s <= 0 or self.lease_ttl_s <= 0:
            raise ValueError("chain watch interval and lease must be positive")
        if self.confirmations < 1 or self.keep_points < 1:
            raise ValueError("confirmations and keep_points must be at least 1")


@dataclass(frozen=True)
class PassReport:
    held: bool  # this watcher held the lease and applied its step
    recorded: int = 0
    removed: int = 0
    notified: int = 0
    cursor: int | None = None
    tip: int | None = None
    rolled_back: bool = False


def default_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class ChainWatch:
    """One deployment's watcher. `run_once` is one pass; it raises only what the chain
    backend or the database raised (the loop logs and retries)."""

    def __init__(
        self,
        engine: Engine,
        follower: DeploymentFollower,
        deployment: Deployment,
        *,
        clock: Callable[[], datetime],
        holder: str | None = None,
        config: WatchConfig | None = None,
        classifiers: Sequence[Classifier] = DEFAULT_CLASSIFIERS,
    ) -> None:
        self.engine = engine
        self.follower = follower
        self.deployment = deployment
        self.clock = clock
        self.holder = holder or default_holder()
        self.config = config or WatchConfig()
        self.classifiers = tuple(classifiers)
        self.key = deployment.batch_hash
        self.scripts = watched_scripts(deployment, self.classifiers)
        self._start: BlockPoint | None = None

    # --- the lease -----------------------------------------------------------------------

    def acquire(self, now: datetime) -> bool:
        """Take or renew the lease; False while another holder's lease runs."""
        until = now + timedelta(seconds=self.config.lease_ttl_s)
        try:
            with open_session(self.engine) as session:
                row = session.get(
                    ChainWatchCursor, self.key, with_for_update=not is_sqlite(self.engine)
                )
                if row is None:
                    row = ChainWatchCursor(deployment=self.key, updated_at=now)
                elif row.holder != self.holder and _aware(row.lease_expires_at) > now:
                    session.rollback()
                    return False
                elif row.holder != self.holder:
                    log.info("chain watch: taking over from %s", row.holder or "nobody")
                row.holder, row.lease_expires_at = self.holder, until
                session.add(row)
                session.commit()
        except (IntegrityError, OperationalError) as exc:
            # Another process inserted or locked the row first: it holds the lease.
            log.debug("chain watch lease contended: %s", exc)
            return False
        return True

    def release(self) -> None:
        """Give the lease up (at shutdown), so another process takes over at once."""
        with open_session(self.engine) as session:
            session.execute(
                update(ChainWatchCursor)
                .where(
                    col(ChainWatchCursor.deployment) == self.key,
                    col(ChainWatchCursor.holder) == self.holder,
                )
                .values(lease_expires_at=self.clock())
            )
            session.commit()

    # --- one pass ------------------------------------------------------------------------

    def start_point(self) -> BlockPoint:
        """The block before the deployment's configuration transaction: nothing of the
        deployment can have been spent before it."""
        if self._start is None:
            tx_id = self.deployment.config_ref.partition("#")[0]
            before = self.follower.point_before(tx_id)
            if before is None:
                raise WatchError(
                    f"the deployment's configuration transaction {tx_id} is not on this chain "
                    "(another network, or a devnet that was reset?)"
                )
            self._start = before
        return self._start

    def _snapshot(self) -> tuple[BlockPoint | None, list[BlockPoint]]:
        with open_session(self.engine) as session:
            row = session.get(ChainWatchCursor, self.key)
            points = session.exec(
                select(ChainWatchPoint)
                .where(ChainWatchPoint.deployment == self.key)
                .order_by(col(ChainWatchPoint.height).desc())
                .limit(self.config.keep_points)
            ).all()
            cursor = None
            if row is not None and row.height is not None and row.block_hash is not None:
                cursor = BlockPoint(row.height, row.block_hash, row.slot or 0)
            return cursor, [BlockPoint(p.height, p.block_hash, p.slot) for p in points]

    def run_once(self) -> PassReport:
        now = self.clock()
        if not self.acquire(now):
            return PassReport(held=False)
        cursor, points = self._snapshot()
        known = list(dict.fromkeys([*([cursor] if cursor else []), *points]))
        step = self.follower.follow(known, self.scripts, self.start_point())
        rows = self._rows(step, now)
        applied = self._apply(cursor, step, rows, now)
        if applied is None:
            return PassReport(held=False)
        recorded, removed = applied
        notified = self._notify(step.tip.height, self.clock())
        if recorded or removed:
            balances.clear_caches()
            log.info(
                "chain watch: recorded %d movement(s), removed %d, cursor at block %d",
                recorded,
                removed,
                step.cursor.height,
            )
        return PassReport(
            True,
            recorded,
            removed,
            notified,
            step.cursor.height,
            step.tip.height,
            rolled_back=bool(known) and step.common != known[0],
        )

    def _rows(self, step: FollowStep, now: datetime) -> list[ChainMovement]:
        rows = []
        for tx in step.txs:
            for m in classify(tx, self.deployment, self.classifiers):
                escrow_tx, _, escrow_index = m.escrow_ref.partition("#")
                rows.append(
                    ChainMovement(
                        deployment=self.key,
                        kind=m.kind,
                        action=m.action,
                        escrow_tx_id=escrow_tx,
                        escrow_index=int(escrow_index),
                        job_id=m.job_id,
                        tx_hash=m.tx_hash,
                        tx_index=tx.index,
                        output_index=m.output_index,
                        address=m.address,
                        lovelace=m.lovelace,
                        ntx=m.ntx,
                        block_height=tx.block.height,
                        block_hash=tx.block.hash,
                        slot=tx.block.slot,
                        block_time=datetime.fromtimestamp(tx.block.time, UTC),
                        recorded_at=now,
                    )
                )
        return rows

    def _apply(
        self,
        started_from: BlockPoint | None,
        step: FollowStep,
        rows: list[ChainMovement],
        now: datetime,
    ) -> tuple[int, int] | None:
        """Apply the step if the cursor is still where the pass began and the lease ours."""
        c = ChainWatchCursor
        unchanged = (
            col(c.height).is_(None)
            if started_from is None
            else (col(c.height) == started_from.height) & (col(c.block_hash) == started_from.hash)
        )
        floor = step.common.height if step.common is not None else -1
        with open_session(self.engine) as session:
            moved = session.execute(
                update(c)
                .where(
                    col(c.deployment) == self.key,
                    col(c.holder) == self.holder,
                    col(c.lease_expires_at) > now,
                    unchanged,
                )
                .values(
                    height=step.cursor.height,
                    block_hash=step.cursor.hash,
                    slot=step.cursor.slot,
                    tip_height=step.tip.height,
                    updated_at=now,
                )
            )
            if moved.rowcount != 1:  # type: ignore[attr-defined]
                session.rollback()
                log.warning("chain watch: lost the lease or raced another watcher; step dropped")
                return None
            removed = session.execute(
                delete(ChainMovement).where(
                    col(ChainMovement.deployment) == self.key,
                    col(ChainMovement.block_height) > floor,
                )
            ).rowcount  # type: ignore[attr-defined]
            session.execute(
                delete(ChainWatchPoint).where(
                    col(ChainWatchPoint.deployment) == self.key,
                    col(ChainWatchPoint.height) > floor,
                )
            )
            session.add_all(rows)
            session.merge(
                ChainWatchPoint(
                    deployment=self.key,
                    height=step.cursor.height,
                    block_hash=step.cursor.hash,
                    slot=step.cursor.slot,
                )
            )
            session.flush()
            oldest_kept = session.exec(
                select(ChainWatchPoint.height)
                .where(ChainWatchPoint.deployment == self.key)
                .order_by(col(ChainWatchPoint.height).desc())
                .offset(self.config.keep_points - 1)
                .limit(1)
            ).first()
            if oldest_kept is not None:
                session.execute(
                    delete(ChainWatchPoint).where(
                        col(ChainWatchPoint.deployment) == self.key,
                        col(ChainWatchPoint.height) < oldest_kept,
                    )
                )
            session.commit()
        return len(rows), int(removed or 0)

    # --- notifications -------------------------------------------------------------------

    def _notify(self, tip_height: int, now: datetime) -> int:
        """Queue 'settled'/'refunded' for escrows spent at least `confirmations` deep."""
        deepest = tip_height - self.config.confirmations + 1
        m = ChainMovement
        with open_session(self.engine) as session:
            due = session.exec(
                select(m).where(
                    m.deployment == self.key,
                    col(m.notified_at).is_(None),
                    col(m.block_height) <= deepest,
                    m.kind != SLASH,
                )
            ).all()
            groups: dict[tuple[str, str, int], list[ChainMovement]] = defaultdict(list)
            for row in due:
                groups[(row.tx_hash, row.escrow_tx_id, row.escrow_index)].append(row)
            sent = 0
            for (tx_hash, escrow_tx, escrow_index), group in groups.items():
                job = session.exec(
                    select(Job)
                    .join(JobEscrow, col(JobEscrow.job_id) == col(Job.id))
                    .where(JobEscrow.tx_id == escrow_tx, JobEscrow.output_index == escrow_index)
                ).first()
                # Only the escrow the job's owner recorded speaks for the job: anyone can
                # lock (and later refund) an escrow naming someone else's job id.
                if job is not None and job.job_id == group[0].job_id:
                    sent += _notify_job(session, job, tx_hash, group, now)
                for row in group:
                    row.notified_at = now
                    session.add(row)
            session.commit()
        return sent


def _notify_job(
    session: Session, job: Job, tx_hash: str, group: list[ChainMovement], now: datetime
) -> int:
    paid = sum(r.ntx for r in group if r.kind == "payout")
    returned = sum(r.ntx for r in group if r.kind != "payout")
    details: dict[str, Any] = {
        "escrow": f"{group[0].escrow_tx_id}#{group[0].escrow_index}",
        "block_height": group[0].block_height,
        "paid_ntx": paid,
        "refunded_ntx": returned,
    }
    if group[0].action == SETTLE_ACTION:
        return notifications.notify_settled(session, job, tx_hash, now, **details)
    return notifications.notify_refunded(session, job, tx_hash, group[0].action, now, **details)


def _aware(at: datetime | None) -> datetime:
    if at is None:
        return datetime.min.replace(tzinfo=UTC)
    return at if at.tzinfo else at.replace(tzinfo=UTC)


# --- the loop in the API process ------------------------------------------------------------


async def run(make: Callable[[], ChainWatch | None], config: WatchConfig) -> None:
    """Build the watcher when it can be (`make` returns None until then: no deployment yet)
    and run passes every `interval_s`; a failed pass is logged and retried, never fatal."""
    from starlette.concurrency import run_in_threadpool

    watch: ChainWatch | None = None
    complained = ""
    try:
        while True:
            try:
                if watch is None:
                    watch = await run_in_threadpool(make)
                if watch is not None:
                    await run_in_threadpool(watch.run_once)
                    complained = ""
            except Exception as exc:  # keep watching: a backend or database hiccup passes
                if str(exc) != complained:
                    complained = str(exc)
                    log.exception(
                        "chain watch pass failed (retrying every %.0fs)", config.interval_s
                    )
            await asyncio.sleep(config.interval_s)
    finally:
        if watch is not None:
            try:
                await asyncio.shield(run_in_threadpool(watch.release))
            except Exception:  # shutting down: the lease then lapses on its own
                log.debug("chain watch: could not release the lease", exc_info=True)


def config_of(api_config: Any) -> WatchConfig:
    return WatchConfig(
        interval_s=api_config.chain_watch_interval_s,
        lease_ttl_s=api_config.chain_watch_lease_ttl_s,
        confirmations=api_config.chain_watch_confirmations,
    )


def wanted(state: Any) -> bool:
    """Whether this app should watch: turned on, and a deployment is (or will be) known."""
    if not state.config.chain_watch or not getattr(state, "run_chain_watch", True):
        return False
    return getattr(state, "deployment", None) is not None or bool(state.settings.deployment_file)


def build(state: Any) -> ChainWatch | None:
    """The watcher for an app's state, or None while its deployment file does not exist yet
    (a deployment written after the API started, as the demo does)."""
    from pathlib import Path

    from chain.offchain.backends import chain_context
    from chain.offchain.follow.reader import follower_for

    deployment = getattr(state, "deployment", None)
    if deployment is None:
        path = Path(state.settings.deployment_file)
        if not path.exists():
            return None
        deployment = Deployment.load(path)
    context = getattr(state, "chain_context", None) or chain_context(state.settings)
    watch = ChainWatch(
        state.engine,
        follower_for(context),
        deployment,
        clock=state.clock,
        config=config_of(state.config),
        # Slashed provider bonds are movements too (kind SLASH, with the cited job).
        classifiers=(*DEFAULT_CLASSIFIERS, BondClassifier(bonds.terms_of(state.config))),
    )
    log.info(
        "chain watch: following deployment %s (escrow %s) as %s",
        deployment.batch_hash,
        deployment.escrow_hash,
        watch.holder,
    )
    return watch
