"""Where a job's escrow stands, for the submitter's clients (web app, `proofnet job escrow`).

Read from the API's own records, never from a browser: the escrow the submitter recorded
(`JobEscrow`, checked on chain when recorded, from any client), and what the chain watcher
saw spend it (`chain_movements`: the settlement that paid providers and returned the rest,
the refund after the deadline, or the cancel). Each closing transaction comes with its
block, confirmations and explorer links for the API's network. When the record shows
nothing yet, the chain is asked (cached) whether the escrow is still unspent, so a spend
the watcher has not recorded reads as "spent", not "locked".

It also says what the submitter can do next, and when: a refund from the deadline on (in
UTC and as "in 3 h 10 min", never in slots), a cancel at once while no provider ever leased
the job (`work_started`), and why not otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, col, select

from api.models import Job, JobEscrow, Lease, Provider, User
from api.models.job import TERMINAL_STATUSES
from api.services import movements
from api.services.jobs import get_job
from proofnet.when import ms_of, when_text

# What spent an escrow (chain.offchain.follow.classify actions) -> the state it leaves.
CLOSED_BY = {"settle": "settled", "refund": "refunded", "cancel": "cancelled"}


@dataclass(frozen=True)
class WorkStarted:
    at: datetime
    provider: str  # the provider's key id
    outcome: str | None  # the first lease's outcome; None while it runs

    def describe(self, now_ms: int) -> str:
        return f"work started at {when_text(ms_of(self.at), now_ms)} (in lease by provider {self.provider})"


def work_started(session: Session, job: Job) -> WorkStarted | None:
    """The job's first lease (of the job or any unit): a provider took it then."""
    row = session.exec(
        select(Lease.created_at, Lease.outcome, Provider.key_id)
        .join(Provider, col(Provider.id) == col(Lease.provider_id))
        .where(Lease.job_id == job.id)
        .order_by(col(Lease.created_at), col(Lease.id))
    ).first()
    if row is None:
        return None
    at, outcome, key_id = row
    return WorkStarted(at, str(key_id), outcome)


@dataclass(frozen=True)
class Closing:
    """The transaction that spent the escrow, as the watcher recorded it."""

    action: str  # settle | refund | cancel
    tx_hash: str
    block_height: int
    block_time: datetime
    confirmations: int | None
    # NTX paid to providers, and returned to the submitter (refund, cancel, remainder).
    paid_ntx: int
    returned_ntx: int
    explorer: dict[str, str]


@dataclass(frozen=True)
class Action:
    """Whether the submitter can do something now, and if not, why and from when."""

    possible: bool
    message: str
    from_ms: int | None = None


@dataclass(frozen=True)
class EscrowState:
    job_id: str
    # none: nothing recorded | locked | spent (on chain, not recorded yet) | settled |
    # refunded | cancelled
    state: str
    tx_id: str | None
    index: int | None
    budget: int | None
    deadline_ms: int | None
    recorded_at: datetime | None
    lock_explorer: dict[str, str]
    closing: Closing | None
    refund: Action
    cancel: Action
    note: str = ""


Links = Callable[[str], dict[str, str]]


def escrow_state(
    session: Session,
    owner: User,
    job_id: str,
    *,
    now: datetime,
    links: Links,
    unspent: Callable[[str, int], bool | None],
) -> EscrowState:
    """`links(tx_hash)` gives explorer links; `unspent(tx_id, index)` asks the chain (None:
    unknown)."""
    job = get_job(session, owner, job_id)  # 404 for anyone but the owner
    row = session.exec(select(JobEscrow).where(JobEscrow.job_id == job.id)).first()
    now_ms = ms_of(now)
    started = work_started(session, job)
    if row is None:
        nothing = Action(False, "no escrow is recorded for this job")
        return EscrowState(job_id, "none", None, None, None, None, None, {}, None, nothing, nothing)
    moved = movements.for_escrow(session, row.tx_id, row.output_index)
    closing = _closing(moved, row, links)
    state = "locked" if closing is None else CLOSED_BY.get(closing.action, "spent")
    note = ""
    if closing is None:
        on_chain = unspent(row.tx_id, row.output_index)
        if on_chain is False:
            state = "spent"
            note = "the chain shows the escrow spent; the API has not recorded by what yet"
        elif on_chain is None:
            note = "the chain could not be asked whether the escrow is still unspent"
    if state != "locked":
        done = Action(False, f"the escrow is {state}; nothing is left to take back")
        refund = cancel = done
    else:
        refund = _refund_action(row, now_ms)
        cancel = _cancel_action(job, started, row, now_ms)
    return EscrowState(
        job_id=job_id,
        state=state,
        tx_id=row.tx_id,
        index=row.output_index,
        budget=row.budget,
        deadline_ms=row.deadline_ms,
        recorded_at=row.recorded_at,
        lock_explorer=links(row.tx_id),
        closing=closing,
        refund=refund,
        cancel=cancel,
        note=note,
    )


def _closing(moved: list[movements.MovementRow], row: JobEscrow, links: Links) -> Closing | None:
    if not moved:
        return None
    first = moved[0]
    paid = sum(m.ntx for m in moved if m.kind == "payout")
    returned = sum(m.ntx for m in moved if m.kind in movements.REFUND_KINDS)
    return Closing(
        action=first.action,
        tx_hash=first.tx_hash,
        block_height=first.block_height,
        block_time=first.block_time,
        confirmations=first.confirmations,
        paid_ntx=paid,
        returned_ntx=returned,
        explorer=links(first.tx_hash),
    )


def refund_after(row: JobEscrow, now_ms: int) -> str:
    return f"refund possible after the deadline {when_text(row.deadline_ms, now_ms)}"


def _refund_action(row: JobEscrow, now_ms: int) -> Action:
    if now_ms > row.deadline_ms:
        return Action(True, "the deadline has passed: the escrow can be refunded now")
    return Action(False, refund_after(row, now_ms), row.deadline_ms)


def cancel_refusal(
    job: Job, started: WorkStarted | None, row: JobEscrow, now_ms: int
) -> str | None:
    """Why the escrow cannot go back through the cancel path, or None."""
    if started is not None:
        return f"{started.describe(now_ms)}; {refund_after(row, now_ms)}"
    if job.status in TERMINAL_STATUSES and job.status != "cancelled":
        return f"job is {job.status}; {refund_after(row, now_ms)}"
    return None


def _cancel_action(job: Job, started: WorkStarted | None, row: JobEscrow, now_ms: int) -> Action:
    why = cancel_refusal(job, started, row, now_ms)
    if why is not None:
        return Action(False, why)
    return Action(
        True,
        "no provider has started the job: cancelling returns the whole escrow at once "
        "(the oracles co-sign, the wallet signs and pays the fee)",
    )
