"""The intent log: every state change of a batch is one database transaction, and the
attestation rows move in the same transaction (batched with the intent, settled when it is
confirmed, back to verified when it is dropped).

Nothing is ever sent to the chain unless the exact signed CBOR is committed here first
(`record_signed`), so a crash at any point leaves either nothing on chain or a transaction
the log can recognise by its id and resubmit byte for byte.

An intent has one item per attestation; the units of a topology job make several items
over one escrow. Only the first item of each escrow holds `live_escrow`, so the UNIQUE
column still allows one live intent per escrow, whatever number of attestations it pays.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from .bundle import Bundle
from .models import (
    OPEN_STATES,
    IntentItem,
    IntentState,
    SettlementBundle,
    SettlementEvent,
    SettlementIntent,
    now,
)
from .ports import ClaimQueue, SettlementError, UnsignedBatch

log = logging.getLogger("oracle.settlement")


class IntentConflict(SettlementError):
    """The intent is not in the state the caller expected, or its escrows are taken."""


class IntentLog:
    def __init__(self, engine: Engine, queue: ClaimQueue) -> None:
        self.engine = engine
        self.queue = queue

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            yield session

    # --- reading ------------------------------------------------------------------

    def get(self, intent_id: str) -> SettlementIntent | None:
        with Session(self.engine, expire_on_commit=False) as session:
            return session.get(SettlementIntent, intent_id)

    def by_tx(self, tx_id: str) -> SettlementIntent | None:
        with Session(self.engine, expire_on_commit=False) as session:
            return session.exec(
                select(SettlementIntent).where(SettlementIntent.tx_id == tx_id)
            ).first()

    def open_intents(self) -> list[SettlementIntent]:
        """Non-final intents, oldest first (resubmission keeps the order of dependencies)."""
        with Session(self.engine, expire_on_commit=False) as session:
            rows = session.exec(
                select(SettlementIntent)
                .where(col(SettlementIntent.state).in_([s.value for s in OPEN_STATES]))
                .order_by(col(SettlementIntent.created_at))
            ).all()
            return list(rows)

    def items(self, intent_id: str) -> list[IntentItem]:
        with Session(self.engine, expire_on_commit=False) as session:
            rows = session.exec(
                select(IntentItem)
                .where(IntentItem.intent_id == intent_id)
                .order_by(col(IntentItem.position))
            ).all()
            return list(rows)

    def events(self, intent_id: str) -> list[SettlementEvent]:
        with Session(self.engine, expire_on_commit=False) as session:
            rows = session.exec(
                select(SettlementEvent)
                .where(SettlementEvent.intent_id == intent_id)
                .order_by(col(SettlementEvent.id))
            ).all()
            return list(rows)

    def bundle(self, sha256: str) -> SettlementBundle | None:
        with Session(self.engine, expire_on_commit=False) as session:
            return session.get(SettlementBundle, sha256)

    def live_escrows(self) -> set[str]:
        with Session(self.engine) as session:
            rows = session.exec(
                select(IntentItem.live_escrow).where(col(IntentItem.live_escrow).is_not(None))
            ).all()
            return {r for r in rows if r is not None}

    # --- transitions ----------------------------------------------------------------

    def record_planned(
        self, unsigned: UnsignedBatch, bundle: Bundle, proposer: str
    ) -> SettlementIntent:
        """Reserve the batch's escrows and attestations (-> batched) in one transaction.
        Raises `IntentConflict` when another live intent already holds one of the escrows."""
        intent = SettlementIntent(
            id=unsigned.batch_id.hex(),
            state=IntentState.PLANNED.value,
            tx_id=unsigned.tx_id,
            unsigned_cbor=unsigned.tx_cbor,
            merkle_root=unsigned.merkle_root.hex(),
            bundle_sha256=bundle.sha256,
            proposer=proposer,
        )
        try:
            with self.session() as session:
                session.add(intent)
                session.flush()
                holders = _live_holders([str(c.escrow) for c in unsigned.claims])
                for position, claim in enumerate(unsigned.claims):
                    session.add(
                        IntentItem(
                            intent_id=intent.id,
                            position=position,
                            attestation_id=claim.attestation_id,
                            escrow_ref=str(claim.escrow),
                            leaf_hash=claim.leaf_hash.hex(),
                            amount=claim.amount,
                            payout_address=claim.payout_address,
                            cose=claim.cose,
                            live_escrow=str(claim.escrow) if position in holders else None,
                        )
                    )
                if session.get(SettlementBundle, bundle.sha256) is None:
                    session.add(
                        SettlementBundle(
                            sha256=bundle.sha256,
                            merkle_root=bundle.merkle_root.hex(),
                            body=bundle.body,
                        )
                    )
                self._event(session, intent.id, "planned", f"tx {unsigned.tx_id}")
                session.flush()
                self.queue.mark(session, [c.attestation_id for c in unsigned.claims], "batched")
        except IntegrityError as exc:
            raise IntentConflict(f"an escrow of batch {intent.id} is already batched") from exc
        return intent

    def record_signed(self, intent_id: str, tx_id: str, tx_cbor: bytes) -> None:
        """The durable point of no return: after this commit the tx may be submitted."""
        with self.session() as session:
            self._move(
                session,
                intent_id,
                (IntentState.PLANNED,),
                IntentState.SIGNED,
                tx_id=tx_id,
                tx_cbor=tx_cbor,
            )
            self._event(session, intent_id, "signed", f"tx {tx_id}")

    def record_submitted(self, intent_id: str, *, resubmission: bool) -> None:
        with self.session() as session:
            intent = self._load(session, intent_id)
            if intent.state not in (IntentState.SIGNED, IntentState.SUBMITTED):
                raise IntentConflict(f"intent {intent_id} is {intent.state}, not signed/submitted")
            intent.state = IntentState.SUBMITTED.value
            intent.submit_attempts += 1
            intent.submitted_at = intent.submitted_at or now()
            intent.last_error = None
            intent.updated_at = now()
            self._event(
                session,
                intent_id,
                "resubmitted" if resubmission else "submitted",
                f"tx {intent.tx_id}",
            )

    def record_submit_error(self, intent_id: str, error: str) -> int:
        """Count a refused submission; returns the number of attempts so far."""
        with self.session() as session:
            intent = self._load(session, intent_id)
            intent.submit_attempts += 1
            intent.last_error = error[:2000]
            intent.updated_at = now()
            self._event(session, intent_id, "submit_refused", error[:500])
            return intent.submit_attempts

    def record_included(self, intent_id: str, height: int, block_hash: str | None) -> None:
        with self.session() as session:
            intent = self._load(session, intent_id)
            if intent.state == IntentState.SIGNED:
                intent.state = IntentState.SUBMITTED.value
            intent.block_height = height
            intent.block_hash = block_hash
            intent.updated_at = now()
            self._event(session, intent_id, "included", f"block {height} {block_hash or ''}")

    def record_rolled_back(self, intent_id: str, detail: str) -> None:
        with self.session() as session:
            intent = self._load(session, intent_id)
            old = intent.block_height
            intent.block_height = None
            intent.block_hash = None
            intent.updated_at = now()
            self._event(session, intent_id, "rolled_back", f"was in block {old}; {detail}")

    def confirm(self, intent_id: str) -> None:
        with self.session() as session:
            intent = self._move(
                session,
                intent_id,
                (IntentState.SIGNED, IntentState.SUBMITTED),
                IntentState.CONFIRMED,
            )
            intent.confirmed_at = now()
            ids = [i.attestation_id for i in self._items(session, intent_id)]
            self.queue.mark(session, ids, "settled")
            self._event(session, intent_id, "confirmed", f"block {intent.block_height}")

    def drop(self, intent_id: str, reason: str) -> None:
        """The tx never made it and cannot any more: release escrows, requeue attestations."""
        with self.session() as session:
            self._move(session, intent_id, OPEN_STATES, IntentState.DROPPED, last_error=reason)
            items = self._release(session, intent_id)
            self.queue.mark(session, [i.attestation_id for i in items], "verified")
            self._event(session, intent_id, "dropped", reason)

    def supersede(
        self, intent_id: str, spent_by: dict[str, str], ours: set[str], reason: str
    ) -> None:
        """Some escrows were spent by other transactions (`spent_by`: escrow -> tx id).
        Attestations whose escrow is still unspent go back to the queue; those whose escrow
        another of our intents spent (`ours`: its tx ids) are that intent's business; the
        rest lost their escrow to a refund or cancel and are rejected."""
        with self.session() as session:
            self._move(session, intent_id, OPEN_STATES, IntentState.SUPERSEDED, last_error=reason)
            items = self._release(session, intent_id)
            requeue = [i.attestation_id for i in items if i.escrow_ref not in spent_by]
            gone = [
                i.attestation_id
                for i in items
                if i.escrow_ref in spent_by and spent_by[i.escrow_ref] not in ours
            ]
            self.queue.mark(session, requeue, "verified")
            self.queue.mark(session, gone, "rejected")
            self._event(session, intent_id, "superseded", reason)

    def revive(self, intent_id: str, height: int | None, block_hash: str | None) -> None:
        """A dropped or superseded intent's tx turned up on chain after all: it is live
        again (its escrows must have been released by whoever conflicted with it)."""
        with self.session() as session:
            intent = self._load(session, intent_id)
            intent.state = IntentState.SUBMITTED.value
            intent.block_height = height
            intent.block_hash = block_hash
            intent.updated_at = now()
            items = self._items(session, intent_id)
            holders = _live_holders([i.escrow_ref for i in items])
            for position, item in enumerate(items):
                item.live_escrow = item.escrow_ref if position in holders else None
                session.add(item)
            self.queue.mark(session, [i.attestation_id for i in items], "batched")
            self._event(session, intent_id, "revived", f"tx {intent.tx_id} seen on chain")

    def note(self, intent_id: str, kind: str, detail: str) -> None:
        with self.session() as session:
            self._event(session, intent_id, kind, detail)

    # --- helpers ------------------------------------------------------------------------

    @staticmethod
    def _event(session: Session, intent_id: str, kind: str, detail: str) -> None:
        session.add(SettlementEvent(intent_id=intent_id, kind=kind, detail=detail))
        log.info(
            "settlement %s",
            kind,
            extra={"job": "settlement", "batch_id": intent_id, "detail": detail},
        )

    @staticmethod
    def _load(session: Session, intent_id: str) -> SettlementIntent:
        intent = session.get(SettlementIntent, intent_id, with_for_update=True)
        if intent is None:
            raise IntentConflict(f"no intent {intent_id}")
        return intent

    def _move(
        self,
        session: Session,
        intent_id: str,
        allowed: Sequence[IntentState],
        to: IntentState,
        **fields: object,
    ) -> SettlementIntent:
        # A conditional UPDATE, so two processes racing on one intent cannot both move it.
        result = session.execute(
            update(SettlementIntent)
            .where(col(SettlementIntent.id) == intent_id)
            .where(col(SettlementIntent.state).in_([s.value for s in allowed]))
            .values(state=to.value, updated_at=now(), **fields)
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            current = session.get(SettlementIntent, intent_id)
            state = current.state if current else "missing"
            raise IntentConflict(f"intent {intent_id} is {state}, cannot become {to.value}")
        intent = session.get(SettlementIntent, intent_id, populate_existing=True)
        assert intent is not None
        return intent

    @staticmethod
    def _items(session: Session, intent_id: str) -> list[IntentItem]:
        return list(
            session.exec(
                select(IntentItem)
                .where(IntentItem.intent_id == intent_id)
                .order_by(col(IntentItem.position))
            ).all()
        )

    def _release(self, session: Session, intent_id: str) -> list[IntentItem]:
        items = self._items(session, intent_id)
        for item in items:
            item.live_escrow = None
            session.add(item)
        session.flush()
        return items


def _live_holders(escrows: Sequence[str]) -> set[int]:
    """Positions of the first item of each escrow: the ones that hold `live_escrow`."""
    first: dict[str, int] = {}
    for position, escrow in enumerate(escrows):
        first.setdefault(escrow, position)
    return set(first.values())
