"""The settlement engine: recover, watch, and propose batches. One `tick()` is one
scheduler run; `batcher.SettlementScheduler` runs it periodically under the proposer lease.

Proposing a batch, and where a crash leaves it:

1. build the unsigned batch (nothing recorded: a crash loses nothing);
2. record it as *planned* with its attestations *batched* (one DB transaction): a crash
   here is undone by `recover()`, which drops never-signed intents;
3. gather M witnesses, record the exact signed CBOR and its tx id as *signed*;
4. log "submitting" and send it; record *submitted*. From step 3 on, recovery finds the tx
   by id on chain or resubmits the identical bytes.

The unit attestations of a topology job wait until the job is over (`readiness`: the
engine's `Readiness`; without one they wait for good), and then all of its escrow's are
batched together: claims of one escrow are never split across batches.

A batch the quorum does not sign (a co-signer, drawing its own verifier, rejects one of its
attestations: a cheat this oracle's draw missed) must not hold the others hostage: its
escrows become suspects, batched one at a time from then on (fewest refusals first), so
the honest ones are signed alone and only the refused one keeps waiting.

A refusal that names the segments the co-signer's drawn verifier found not to replay, with
its signed task and report (`proofnet.messages.segment_refusal`), is not shopped around:
the attestation is held while this oracle re-checks exactly those segments through its own
verifier draw (`referee`, a `DisputeReferee`). If they fail, the attestation is rejected
(the provider's fault, unpaid); if they replay, the refusal is recorded as unfounded
(`unfounded`) and the attestation is batched again as before, so no one co-signer can block
an honest provider and no cheat is paid because another co-signer's draw missed it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

from proofnet.messages.segment_refusal import SegmentRefusal, refusal_problem

from .bundle import Bundle, audit_metadata, make_bundle
from .intents import IntentConflict, IntentLog
from .metrics import SettlementMetrics
from .models import IntentState
from .ports import (
    Annotation,
    BuildError,
    ChainUnavailable,
    ChainView,
    Claim,
    DisputeReferee,
    QuorumNotReached,
    Readiness,
    SettlementBuilder,
    Signer,
    UnitEscrow,
    UnpayableClaims,
    group_claims,
)
from .watcher import RecoveryReport, WatchConfig, Watcher

log = logging.getLogger("oracle.settlement")


@dataclass(frozen=True)
class BatchPolicy:
    # Settle as soon as this many attestations wait ...
    batch_size: int = 16
    # ... or when the oldest has waited this long (seconds).
    max_wait_s: float = 30.0

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if self.max_wait_s < 0:
            raise ValueError("max_wait_s must not be negative")


class LocalSigner:
    """A single oracle (threshold 1): its own witness is the quorum."""

    def __init__(self, builder: SettlementBuilder) -> None:
        self.builder = builder

    def witnesses(self, unsigned: object, bundle_body: bytes) -> list[bytes]:
        from .ports import UnsignedBatch

        assert isinstance(unsigned, UnsignedBatch)
        return [self.builder.witness(unsigned.tx_id)]


class SettlementEngine:
    def __init__(
        self,
        intents: IntentLog,
        chain: ChainView,
        builder: SettlementBuilder,
        *,
        signer: Signer | None = None,
        policy: BatchPolicy | None = None,
        watch: WatchConfig | None = None,
        metrics: SettlementMetrics | None = None,
        proposer: str = "oracle",
        readiness: Readiness | None = None,
        referee: DisputeReferee | None = None,
    ) -> None:
        self.intents = intents
        self.chain = chain
        self.builder = builder
        self.signer: Signer = signer or LocalSigner(builder)
        self.policy = policy or BatchPolicy()
        self.metrics = metrics or SettlementMetrics()
        self.watcher = Watcher(intents, chain, watch, self.metrics)
        self.proposer = proposer
        self.readiness = readiness
        self.recovered = False
        # Escrows in a batch the quorum did not sign -> how often they were refused (this
        # process's life): batched alone until one is signed (`_take`).
        self.suspects: dict[str, int] = {}
        self.referee = referee
        # Attestations a co-signer's evidenced refusal holds: id -> (claim, refusal, refuser).
        self.disputes: dict[int, tuple[Claim, SegmentRefusal, str]] = {}
        # Refusals this oracle's re-check found unfounded: (refuser key hash, leaf, segments).
        self.unfounded: list[tuple[str, str, tuple[int, ...]]] = []

    # --- the scheduler's unit of work ----------------------------------------------------

    def recover(self) -> RecoveryReport:
        report = self.watcher.recover()
        self.recovered = True
        return report

    def tick(self) -> str | None:
        """Recover once, watch open intents, then propose a batch when one is due.
        Returns the proposed batch id, if any."""
        if not self.recovered:
            self.recover()
        self.watcher.watch()
        self._update_gauges()
        return self.propose()

    # --- proposing ---------------------------------------------------------------------------

    def in_flight(self) -> bool:
        """A batch is outstanding until it is in a block: the next one would otherwise pick
        the same fee inputs of this oracle's wallet from the confirmed UTxO set."""
        return any(
            i.state != IntentState.SUBMITTED or i.block_height is None
            for i in self.intents.open_intents()
        )

    def due(self, claims: Sequence[Claim], now: float | None = None) -> bool:
        if not claims:
            return False
        if len(claims) >= self.policy.batch_size:
            return True
        oldest = min(c.queued_at for c in claims)
        return (now if now is not None else time.time()) - oldest >= self.policy.max_wait_s

    def propose(self, *, force: bool = False) -> str | None:
        if self.in_flight():
            return None
        live = self.intents.live_escrows()
        prepare = getattr(self.intents.queue, "prepare_storage", None)
        if prepare is not None:
            prepare(self.intents.session)  # the API's word on storage, read outside the session
        with self.intents.session() as session:
            claims = self.intents.queue.payable(session, self.policy.batch_size * 2)
            waiting = [
                g for g in self.intents.queue.unit_escrows(session) if str(g.escrow) not in live
            ]
        claims = [c for c in claims if str(c.escrow) not in live]
        ready = [g.escrow for g in waiting if self._ready(g)]
        if ready:
            with self.intents.session() as session:
                claims += self.intents.queue.unit_claims(session, ready)
        # An escrow with an attestation held by a co-signer's evidenced refusal waits whole
        # (its units or attempts are settled together) until the re-check decides.
        self._settle_disputes()
        held = {str(c.escrow) for c, _, _ in self.disputes.values()}
        claims = [c for c in claims if str(c.escrow) not in held]
        if not (force and claims) and not self.due(claims):
            return None
        try:
            claims = self._still_payable(claims)
        except ChainUnavailable as exc:
            self.metrics.chain_error("spend_status")
            log.warning("chain unavailable before batching: %s", exc, extra={"job": "propose"})
            return None
        if not claims:
            return None
        return self._propose(self._take(claims))

    def _ready(self, group: UnitEscrow) -> bool:
        if self.readiness is None:
            return False
        try:
            return self.readiness.ready(group)
        except ChainUnavailable as exc:
            self.metrics.chain_error("readiness")
            log.warning("chain unavailable checking %s: %s", group.escrow, exc)
            return False

    def _take(self, claims: Sequence[Claim]) -> list[Claim]:
        """Up to `batch_size` claims, oldest escrow first, whole escrows only (a topology
        job's escrow may alone exceed the size: it is then batched alone). Suspects (in a
        batch the quorum refused) never share a batch: with no other claim waiting, the
        least refused suspect is batched alone."""
        groups = sorted(group_claims(claims), key=lambda g: min(c.queued_at for c in g))
        clear = [g for g in groups if str(g[0].escrow) not in self.suspects]
        if not clear:
            suspect = min(groups, key=lambda g: self.suspects[str(g[0].escrow)])
            return list(suspect)
        taken: list[Claim] = []
        for group in clear:
            if taken and len(taken) + len(group) > self.policy.batch_size:
                break
            taken.extend(group)
        return taken

    def _still_payable(self, claims: Sequence[Claim]) -> list[Claim]:
        """Escrows refunded or cancelled while their attestation waited are gone for good:
        reject those attestations instead of building a tx that cannot pass."""
        keep, gone = [], []
        statuses = {}
        for claim in claims:
            if claim.escrow not in statuses:
                statuses[claim.escrow] = self.chain.spend_status(claim.escrow)
            status = statuses[claim.escrow]
            if status.spent_by is not None:
                gone.append(claim)
            elif status.exists:
                keep.append(claim)
        if gone:
            with self.intents.session() as session:
                self.intents.queue.mark(session, [c.attestation_id for c in gone], "rejected")
            for claim in gone:
                log.info(
                    "escrow %s already spent; attestation %d cannot be paid",
                    claim.escrow,
                    claim.attestation_id,
                    extra={"job": "propose", "escrow": str(claim.escrow)},
                )
        return keep

    def _propose(self, claims: Sequence[Claim]) -> str | None:
        batch_id = os.urandom(32)
        bundles: dict[int, Bundle] = {}

        def annotate(packed: Sequence[Claim]) -> Annotation:
            bundle = make_bundle(packed)
            bundles[len(packed)] = bundle
            return Annotation(bundle.merkle_root, audit_metadata(batch_id, bundle, len(packed)))

        signers: list[bytes] = []
        choose = getattr(self.signer, "signers", None)
        if callable(choose):
            try:
                signers = list(choose())
            except QuorumNotReached as exc:
                log.warning("no quorum available: %s", exc, extra={"job": "propose"})
                return None
        try:
            unsigned = self.builder.build(
                claims, batch_id=batch_id, annotate=annotate, signers=signers
            )
        except ChainUnavailable as exc:
            self.metrics.chain_error("build")
            log.warning("chain unavailable while building: %s", exc, extra={"job": "propose"})
            return None
        except UnpayableClaims as exc:
            with self.intents.session() as session:
                self.intents.queue.mark(session, list(exc.reasons), "rejected")
            log.warning("unpayable attestations rejected: %s", exc, extra={"job": "propose"})
            return None
        except BuildError as exc:
            self.metrics.chain_error("build")
            log.error("cannot build a batch: %s", exc, extra={"job": "propose"})
            return None
        bundle = bundles.get(len(unsigned.claims)) or make_bundle(unsigned.claims)
        if bundle.merkle_root != unsigned.merkle_root:
            raise BuildError("the builder's Merkle root differs from the bundle's")
        try:
            intent = self.intents.record_planned(unsigned, bundle, self.proposer)
        except IntentConflict as exc:
            log.warning("batch not recorded: %s", exc, extra={"job": "propose"})
            return None
        self.metrics.proposed(len(unsigned.claims))
        log.info(
            "planned batch %s: %d attestations, tx %s",
            intent.id,
            len(unsigned.claims),
            unsigned.tx_id,
            extra={
                "job": "propose",
                "batch_id": intent.id,
                "tx_id": unsigned.tx_id,
                "escrow": ",".join(str(c.escrow) for c in unsigned.claims),
            },
        )
        try:
            witnesses = self.signer.witnesses(unsigned, bundle.body)
            signed = self.builder.assemble(unsigned, witnesses)
        except (QuorumNotReached, ChainUnavailable, BuildError) as exc:
            self.intents.drop(intent.id, f"not signed: {exc}")
            log.warning("batch %s not signed: %s", intent.id, exc, extra={"job": "propose"})
            if isinstance(exc, QuorumNotReached) and exc.fees:
                # Not a rejection: the batch did not pay a co-signer's own verifier. Keep
                # its evidence; the next batch pays it.
                with self.intents.session() as session:
                    kept = self.intents.queue.add_fees(session, unsigned.claims, exc.fees)
                log.info("kept %d co-signer verifier fee(s)", kept, extra={"job": "propose"})
            elif isinstance(exc, QuorumNotReached) and not exc.pending:
                # Refused on the merits: these escrows are suspects, batched one at a time
                # (a co-signer merely not done verifying suspects nobody).
                for claim in unsigned.claims:
                    key = str(claim.escrow)
                    self.suspects[key] = self.suspects.get(key, 0) + 1
                self._hold_disputed(unsigned.claims, exc)
            return None
        for claim in unsigned.claims:
            self.suspects.pop(str(claim.escrow), None)
        try:
            self.intents.record_signed(intent.id, unsigned.tx_id, signed)
        except IntentConflict as exc:
            # Recovery in another process dropped it meanwhile (we lost the lease): the
            # signed bytes were never durable, so they are never sent.
            log.warning("batch %s not signed: %s", intent.id, exc, extra={"job": "propose"})
            return None
        current = self.intents.get(intent.id)
        assert current is not None
        self.watcher.submit(current, resubmission=False)
        return intent.id

    def _hold_disputed(self, claims: Sequence[Claim], exc: QuorumNotReached) -> None:
        """Hold the attestations whose segments the refusal names with valid evidence (its
        refusing co-signer's signed task for that very attestation, a report that did not
        pass), and re-check them now; a refusal without it is handled as before."""
        if self.referee is None:
            return
        by_leaf = {c.leaf_hash.hex(): c for c in claims}
        for refusal in exc.disputed:
            claim = by_leaf.get(refusal.leaf_hash)
            why = (
                "it names no attestation of the batch"
                if claim is None
                else refusal_problem(
                    refusal,
                    leaf_hash=refusal.leaf_hash,
                    job_id=claim.job_id,
                    refuser_key_hashes={exc.refuser},
                )
            )
            if claim is None or why is not None:
                log.warning("a co-signer's segment refusal is no evidence: %s", why)
                continue
            self.disputes[claim.attestation_id] = (claim, refusal, exc.refuser)
        self._settle_disputes()

    def _settle_disputes(self) -> None:
        """Re-check each held attestation's named segments (see the module doc)."""
        if self.referee is None:
            return
        for ident, (claim, refusal, refuser) in list(self.disputes.items()):
            try:
                outcome = self.referee.recheck(claim, refusal.segments)
            except Exception:  # a loop never dies: asked again next tick
                log.exception("re-checking disputed attestation %d failed", ident)
                continue
            if outcome is None:
                continue
            del self.disputes[ident]
            if outcome.outcome == "fails":
                message = (
                    f"segments {list(refusal.segments)} do not replay: named by co-signer "
                    f"{refuser[:16]}'s refusal and confirmed by this oracle's own replay"
                )
                with self.intents.session() as session:
                    reject = getattr(self.intents.queue, "reject_disputed", None)
                    if callable(reject):
                        reject(session, ident, message, outcome.reason)
                    else:
                        self.intents.queue.mark(session, [ident], "rejected")
                log.warning(
                    "attestation %d rejected: %s",
                    ident,
                    message,
                    extra={"job": "propose", "escrow": str(claim.escrow)},
                )
                continue
            # It replays here (or cannot be replayed here): the refusal is unfounded in this
            # oracle's eyes; the co-signer stays on cooldown and the next one is asked.
            self.unfounded.append((refuser, refusal.leaf_hash, refusal.segments))
            log.warning(
                "co-signer %s's refusal of attestation %d is unfounded (%s): segments %s",
                refuser[:16],
                ident,
                outcome.outcome,
                list(refusal.segments),
                extra={"job": "propose", "escrow": str(claim.escrow)},
            )

    def _update_gauges(self) -> None:
        with self.intents.session() as session:
            queue = self.intents.queue
            count = getattr(queue, "count", None)
            if callable(count):
                self.metrics.pending.set(count(session, "verified"))
        self.metrics.open_intents.set(len(self.intents.open_intents()))
