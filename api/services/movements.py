"""Reads of the earnings record (api.models.chain_movement): totals per kind, the latest
movements with their confirmations, which escrows are closed, where the watcher stands.

Queries only; the chain watcher (api.services.chain_watch) is the one writer. Each read
takes a Session or a Connection (the lean read path runs on bare connections) and binds
its parameters into statements built once.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Integer, bindparam, func, literal, select, tuple_
from sqlmodel import Session, col

from api.models import ChainMovement, ChainWatchCursor

PAYOUT_KINDS = ("payout",)
REFUND_KINDS = ("refund", "cancel")
SLASH_KINDS = ("slash",)


@dataclass(frozen=True)
class Totals:
    ntx: int = 0
    lovelace: int = 0
    count: int = 0


@dataclass(frozen=True)
class MovementRow:
    kind: str
    action: str
    job_id: str
    escrow_ref: str
    address: str
    lovelace: int
    ntx: int
    tx_hash: str
    output_index: int
    block_height: int
    block_hash: str
    slot: int
    block_time: datetime
    # Blocks on top of it, its own included (1: in the tip block); None when the watcher has
    # not recorded a tip.
    confirmations: int | None


@dataclass(frozen=True)
class WatchStatus:
    deployment: str
    height: int | None
    tip_height: int | None
    updated_at: datetime


@dataclass(frozen=True)
class _Statements:
    totals: Any
    latest: Any
    closed: Any


@functools.cache
def _statements() -> _Statements:
    addresses: Any = bindparam("addresses", expanding=True)
    kinds: Any = bindparam("kinds", expanding=True)
    m, c = ChainMovement, ChainWatchCursor
    tip = (
        select(c.tip_height)  # type: ignore[call-overload]
        .where(col(c.deployment) == col(m.deployment))
        .scalar_subquery()
    )
    return _Statements(
        totals=select(
            col(m.kind),
            func.coalesce(func.sum(m.ntx), 0),
            func.coalesce(func.sum(m.lovelace), 0),
            func.count(),
        )
        .where(col(m.address).in_(addresses))
        .group_by(col(m.kind)),
        latest=select(
            col(m.kind),
            col(m.action),
            col(m.job_id),
            col(m.escrow_tx_id),
            col(m.escrow_index),
            col(m.address),
            col(m.lovelace),
            col(m.ntx),
            col(m.tx_hash),
            col(m.output_index),
            col(m.block_height),
            col(m.block_hash),
            col(m.slot),
            col(m.block_time),
            (tip - col(m.block_height) + literal(1)).label("confirmations"),
        )
        .where(col(m.address).in_(addresses), col(m.kind).in_(kinds))
        .order_by(col(m.block_height).desc(), col(m.tx_index).desc(), col(m.output_index).asc())
        .limit(bindparam("limit", type_=Integer)),
        closed=select(col(m.escrow_tx_id), col(m.escrow_index))
        .where(
            tuple_(col(m.escrow_tx_id), col(m.escrow_index)).in_(bindparam("refs", expanding=True))
        )
        .distinct(),
    )


def totals(conn: Session | Connection, addresses: Sequence[str]) -> dict[str, Totals]:
    """NTX, lovelace and count of the movements to `addresses`, by kind."""
    if not addresses:
        return {}
    rows = conn.execute(_statements().totals, {"addresses": list(addresses)}).all()
    return {str(k): Totals(int(n), int(lv), int(c)) for k, n, lv, c in rows}


def sum_of(found: dict[str, Totals], kinds: Sequence[str]) -> Totals:
    parts = [found[k] for k in kinds if k in found]
    return Totals(
        sum(p.ntx for p in parts), sum(p.lovelace for p in parts), sum(p.count for p in parts)
    )


def latest(
    conn: Session | Connection, addresses: Sequence[str], kinds: Sequence[str], limit: int
) -> list[MovementRow]:
    """The newest movements of `kinds` to `addresses`, newest first."""
    if not addresses:
        return []
    rows = conn.execute(
        _statements().latest,
        {"addresses": list(addresses), "kinds": list(kinds), "limit": limit},
    ).all()
    return [
        MovementRow(
            kind=r.kind,
            action=r.action,
            job_id=r.job_id,
            escrow_ref=f"{r.escrow_tx_id}#{r.escrow_index}",
            address=r.address,
            lovelace=int(r.lovelace),
            ntx=int(r.ntx),
            tx_hash=r.tx_hash,
            output_index=int(r.output_index),
            block_height=int(r.block_height),
            block_hash=r.block_hash,
            slot=int(r.slot),
            block_time=r.block_time,
            confirmations=None if r.confirmations is None else max(int(r.confirmations), 0),
        )
        for r in rows
    ]


def for_escrow(session: Session, tx_id: str, index: int) -> list[MovementRow]:
    """Every recorded movement out of one escrow (its settlement, refund or cancel), in
    output order, with confirmations."""
    m, c = ChainMovement, ChainWatchCursor
    tip = (
        select(c.tip_height)  # type: ignore[call-overload]
        .where(col(c.deployment) == col(m.deployment))
        .scalar_subquery()
    )
    rows = session.execute(
        select(m, (tip - col(m.block_height) + literal(1)).label("confirmations"))  # type: ignore[call-overload]
        .where(col(m.escrow_tx_id) == tx_id, col(m.escrow_index) == index)
        .order_by(col(m.block_height), col(m.tx_index), col(m.output_index))
    ).all()
    out = []
    for row, confirmations in rows:
        out.append(
            MovementRow(
                kind=row.kind,
                action=row.action,
                job_id=row.job_id,
                escrow_ref=f"{row.escrow_tx_id}#{row.escrow_index}",
                address=row.address,
                lovelace=int(row.lovelace),
                ntx=int(row.ntx),
                tx_hash=row.tx_hash,
                output_index=int(row.output_index),
                block_height=int(row.block_height),
                block_hash=row.block_hash,
                slot=int(row.slot),
                block_time=row.block_time,
                confirmations=None if confirmations is None else max(int(confirmations), 0),
            )
        )
    return out


def closed_escrows(
    conn: Session | Connection, refs: Sequence[tuple[str, int]]
) -> set[tuple[str, int]]:
    """Which of the escrow out-refs the record shows spent (settled, refunded, cancelled)."""
    if not refs:
        return set()
    rows = conn.execute(_statements().closed, {"refs": list(refs)}).all()
    return {(str(t), int(i)) for t, i in rows}


def watch_status(conn: Session | Connection) -> list[WatchStatus]:
    c = ChainWatchCursor
    rows = conn.execute(
        select(col(c.deployment), col(c.height), col(c.tip_height), col(c.updated_at))
    ).all()
    return [WatchStatus(str(d), h, t, u) for d, h, t, u in rows]
