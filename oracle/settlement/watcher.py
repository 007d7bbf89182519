"""Reconcile open intents with the chain: inclusion, confirmation depth, rollbacks,
resubmission of the same signed bytes, and escrows spent by someone else.

Exactly-once rests on the UTxO model: every settlement transaction spends its escrows, so
at most one transaction can ever pay an escrow. The watcher only has to (a) resubmit the
identical transaction while all its escrows are unspent, which can never pay twice, and
(b) notice when an escrow was spent by another transaction, find out whose it was, and
return the attestations that are still payable to the queue.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from .intents import IntentConflict, IntentLog
from .metrics import SettlementMetrics
from .models import IntentState, SettlementIntent
from .ports import ChainUnavailable, ChainView, OutRef, SubmitRejected

log = logging.getLogger("oracle.settlement")


@dataclass(frozen=True)
class WatchConfig:
    # A payout counts as final this many blocks deep (1 = in the tip block).
    confirmation_depth: int = 3
    # Refused resubmissions of an unseen tx before it is dropped and its claims rebuilt.
    max_submit_attempts: int = 3

    def __post_init__(self) -> None:
        if self.confirmation_depth < 1:
            raise ValueError("confirmation_depth must be at least 1")
        if self.max_submit_attempts < 1:
            raise ValueError("max_submit_attempts must be at least 1")


@dataclass
class RecoveryReport:
    examined: int = 0
    outcomes: dict[str, str] = field(default_factory=dict)  # intent id -> what happened


class Watcher:
    def __init__(
        self,
        intents: IntentLog,
        chain: ChainView,
        config: WatchConfig | None = None,
        metrics: SettlementMetrics | None = None,
    ) -> None:
        self.intents = intents
        self.chain = chain
        self.config = config or WatchConfig()
        self.metrics = metrics or SettlementMetrics()

    def recover(self) -> RecoveryReport:
        """Run before proposing anything after a start (or taking over the lease): every
        non-final intent is settled against the chain. A planned intent was never signed,
        so nothing of it can be on chain: it is dropped and its attestations requeued."""
        report = RecoveryReport()
        for intent in self.intents.open_intents():
            report.examined += 1
            if intent.state == IntentState.PLANNED:
                self.intents.drop(intent.id, "recovery: never signed before the restart")
                report.outcomes[intent.id] = "dropped"
                continue
            report.outcomes[intent.id] = self.reconcile(intent)
        log.info(
            "settlement recovery examined %d open intents",
            report.examined,
            extra={"job": "recover", "outcomes": report.outcomes},
        )
        return report

    def watch(self) -> dict[str, str]:
        """One pass over the signed and submitted intents (planned ones belong to the
        proposer that is collecting their signatures)."""
        outcomes: dict[str, str] = {}
        for intent in self.intents.open_intents():
            if intent.state == IntentState.PLANNED:
                continue
            outcomes[intent.id] = self.reconcile(intent)
        return outcomes

    def reconcile(self, intent: SettlementIntent) -> str:
        try:
            return self._reconcile(intent)
        except ChainUnavailable as exc:
            self.metrics.chain_error("watch")
            log.warning(
                "chain backend unavailable while watching %s: %s",
                intent.tx_id,
                exc,
                extra={"job": "watch", "batch_id": intent.id, "tx_id": intent.tx_id},
            )
            return "chain-unavailable"
        except IntentConflict as exc:
            # Another process moved it first; its view wins, ours is re-read next pass.
            log.info("intent %s moved concurrently: %s", intent.id, exc)
            return "conflict"

    def _reconcile(self, intent: SettlementIntent) -> str:
        assert intent.tx_id is not None and intent.tx_cbor is not None
        status = self.chain.tx_status(intent.tx_id)
        if status.height is not None:
            if intent.block_height != status.height or intent.block_hash != status.block_hash:
                self.intents.record_included(intent.id, status.height, status.block_hash)
            depth = self.chain.tip_height() - status.height + 1
            if depth >= self.config.confirmation_depth:
                self.intents.confirm(intent.id)
                self.metrics.confirmed(intent)
                return "confirmed"
            return "included"
        if intent.block_height is not None:
            where = "back in the mempool" if status.in_mempool else "not in the mempool"
            self.intents.record_rolled_back(intent.id, where)
            self.metrics.rollback()
        if status.in_mempool:
            if intent.state == IntentState.SIGNED:
                # Submitted just before a crash, before the log said so.
                self.intents.record_submitted(intent.id, resubmission=False)
            return "in-mempool"
        return self._unseen(intent)

    def _unseen(self, intent: SettlementIntent) -> str:
        """The chain does not know the tx: resubmit it if it can still pay, else find out
        who spent its escrows."""
        assert intent.tx_id is not None and intent.tx_cbor is not None
        items = self.intents.items(intent.id)
        spends = {i.escrow_ref: self.chain.spend_status(OutRef.parse(i.escrow_ref)) for i in items}
        spent_by = {e: s.spent_by for e, s in spends.items() if s.spent_by is not None}
        if intent.tx_id in spent_by.values():
            return "included"  # it landed between our two queries; the next pass sees it
        if spent_by:
            return self._superseded(intent, spent_by)
        missing = [e for e, s in spends.items() if not s.exists]
        if missing:
            # The escrows' own creation was rolled back: nothing can spend them until it is
            # back, and nothing can pay twice meanwhile.
            self.intents.note(intent.id, "escrow_missing", ", ".join(missing)[:500])
            return "waiting-for-escrows"
        return self.submit(
            intent, resubmission=intent.state == IntentState.SUBMITTED or intent.submit_attempts > 0
        )

    def submit(self, intent: SettlementIntent, *, resubmission: bool) -> str:
        """Send the logged bytes. Refusals are counted; past the limit (and with every
        escrow still unspent) the intent is dropped so its claims can be rebuilt."""
        assert intent.tx_cbor is not None
        log.info(
            "submitting settlement tx %s",
            intent.tx_id,
            extra={
                "job": "submit",
                "batch_id": intent.id,
                "tx_id": intent.tx_id,
                "resubmission": resubmission,
            },
        )
        try:
            self.chain.submit(intent.tx_cbor)
        except SubmitRejected as exc:
            attempts = self.intents.record_submit_error(intent.id, exc.reason)
            self.metrics.chain_error("submit")
            log.warning(
                "settlement tx %s refused (%d): %s",
                intent.tx_id,
                attempts,
                exc.reason[:300],
                extra={"job": "submit", "batch_id": intent.id, "tx_id": intent.tx_id},
            )
            if attempts >= self.config.max_submit_attempts:
                self.intents.drop(intent.id, f"refused {attempts} times: {exc.reason[:300]}")
                return "dropped"
            return "refused"
        self.intents.record_submitted(intent.id, resubmission=resubmission)
        return "resubmitted" if resubmission else "submitted"

    def _superseded(self, intent: SettlementIntent, spent_by: dict[str, str]) -> str:
        spenders = set(spent_by.values())
        ours = {tx for tx in spenders if self.intents.by_tx(tx) is not None}
        foreign = spenders - ours
        reason = (f"escrows spent by our txs {sorted(ours)}" if ours else "") + (
            f" by foreign txs {sorted(foreign)}" if foreign else ""
        )
        self.intents.supersede(intent.id, spent_by, ours, reason.strip())
        self.metrics.superseded()
        for tx in ours:
            other = self.intents.by_tx(tx)
            if other is not None and other.state in (IntentState.DROPPED, IntentState.SUPERSEDED):
                status = self.chain.tx_status(tx)
                self.intents.revive(other.id, status.height, status.block_hash)
        return "superseded"
