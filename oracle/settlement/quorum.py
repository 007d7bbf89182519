"""M-of-N co-signing of settlement batches.

The proposer picks which oracles will sign before building (their key hashes are the
transaction's required signers, so they are part of the signed body): itself plus the
first healthy co-signers not in a refusal cool-down. It sends the unsigned transaction and
the attestation bundle to each (`POST /api/v1/quorum/sign`) and assembles once it holds M
witnesses.

A co-signer trusts nothing it is sent. Its witness signs the whole body, so it first checks
that the body is a batch and no more (`oracle.settlement.signing_scope`): nothing at an
address of its own keys is spent or offered as collateral, no script but this deployment's
escrows is spent, and no redeemer but the batch's and its escrows' `Settle` is carried. It
then re-verifies every attestation of the bundle with
its own intake pipeline (its store, its chain view), decodes the transaction and checks that
it pays exactly what the attestations claim: its escrow inputs are exactly the attested
escrows, each redeemer entry names one payout output per attestation of its escrow (one
for a single-unit job, one per unit for a topology job, in bundle order), each paying the
attested provider exactly the attested amount less the verification fees the bundle's
evidence backs, followed by one output per fee share (`proofnet.messages.verification_fee`:
each fee's task signed by one of the batch's signers, its report the drawn verifier's and
passed, and, for a co-signer with an API feed, matching the proof as this oracle reads it),
the rest of each escrow goes back to its
submitter, the redeemer's Merkle root is the bundle's, no NTX of an escrow goes anywhere
else, and nothing is minted or certified. The units of one escrow must chain: every input
checkpoint is the output of another unit of that escrow in the bundle, as auditors check
(`proofnet.messages.unit_chain.chain_breaks`, the auditor's check too). Only then does it return its VKey witness over the body.

A topology job's escrow is settled once, when the job is over: a co-signer checks that
itself (`JobOverCheck`, the proposer's readiness rule applied from the co-signer's own read
of the API, its own store and its own clock; `oracle.settlement.readiness` says how the two
clocks interact), before it verifies the bundle, so that it first rejects the attestations
of superseded leases in its own store as the proposer did. A co-signer without an API feed
(`SignatureVerifier`) cannot tell whether a job is over and signs no unit claims.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import httpx
from pycardano import (
    Address,
    PaymentSigningKey,
    RedeemerMap,
    RedeemerTag,
    ScriptHash,
    Transaction,
    TransactionOutput,
    VerificationKeyHash,
)

from chain.contracts import types as t
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.onchain import address_from_data, datum_cbor
from oracle.intake.announce import Announcer, Verdict
from oracle.verification.unit_checks import PayableUnit
from proofnet.messages.attestation import Attestation, UnitWork
from proofnet.messages.escrow_share import sharing_refusal
from proofnet.messages.segment_refusal import (
    SegmentRefusal,
    SegmentRefusalError,
    parse_refusals,
)
from proofnet.messages.stop_evidence import StopEvidence
from proofnet.messages.storage_receipt import StorageReceipt, receipt_refusal, storage_outputs
from proofnet.messages.unit_chain import chain_breaks
from proofnet.messages.verification_fee import FeeEvidence, Payouts, fee_payouts, fee_refusal
from proofnet.redaction import redact_credentials

from .bundle import BundleError, parse_bundle
from .ports import (
    ChainView,
    Claim,
    OutRef,
    QuorumNotReached,
    Recheck,
    SettlementError,
    UnsignedBatch,
)
from .signing_scope import ResolvedTx, SigningScope, ref_of, scope_refusal

log = logging.getLogger("oracle.settlement")

SIGN_PATH = "/api/v1/quorum/sign"


class QuorumRefusal(SettlementError):
    """This co-signer will not sign the batch; `reason` says which check failed. `fees`:
    (attestation leaf hash, evidence) of the verifiers its own verdicts relied on that the
    batch does not pay (`unpaid_own_verifiers`), for the proposer to add. `disputed`: the
    segment refusals behind a rejection (see `__init__`)."""

    def __init__(
        self,
        reason: str,
        fees: Sequence[tuple[str, FeeEvidence]] = (),
        disputed: Sequence[SegmentRefusal] = (),
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fees = tuple(fees)
        # The segments this co-signer's own drawn verifier found not to replay, with its
        # signed task and report (`proofnet.messages.segment_refusal`): the proposer
        # re-checks exactly those itself instead of shopping for another co-signer.
        self.disputed = tuple(disputed)


class QuorumPending(QuorumRefusal):
    """Not a refusal on the merits: this co-signer's own verification of an attestation of
    the batch is postponed (its drawn verifier, or a disputed provider, has not answered
    yet; `oracle.verification.verify` said "retry"). The proposer asks again soon, rather
    than cooling this co-signer down as it does after a refusal (a co-signer verifies a
    batch's attestations when first asked, so the first ask of each is usually pending)."""


@dataclass(frozen=True)
class VerifiedClaim:
    escrow: OutRef
    payout_address: str
    amount: int
    unit: UnitWork | None = None  # the unit of a topology job
    job_id: str = ""
    worker_key: str = ""
    leaf_hash: str = ""
    # The verification fees the bundle pays on this attestation (checked in `review`).
    fees: tuple[FeeEvidence, ...] = ()
    # The storage receipts the bundle pays beside this attestation (checked in `review`).
    storage: tuple[StorageReceipt, ...] = ()
    attestation: Attestation | None = field(default=None, compare=False, repr=False)
    # The fee evidence of the verifier this oracle's own verdict on the attestation relied
    # on (its own draw), if that verdict kept one: the batch must pay it (`review`).
    own_fee: FeeEvidence | None = field(default=None, compare=False, repr=False)
    # A stopped lease's stop evidence as this oracle's own verification read it: the bundle
    # must publish the same (`proofnet.messages.stop_evidence`).
    stop: StopEvidence | None = field(default=None, compare=False, repr=False)

    def payouts(self) -> Payouts:
        return fee_payouts(self.payout_address, self.amount, self.fees)

    def outputs(self) -> tuple[tuple[str, int], ...]:
        return (*self.payouts().outputs, *storage_outputs(self.storage))


class JobOverCheck(Protocol):
    """`oracle.settlement.readiness.JobEndReadiness.refusal`: why this oracle must not yet
    sign a settlement of `escrow` (job `job_id`) that pays units `bundled`, or None."""

    def refusal(
        self,
        escrow: OutRef,
        job_id: str,
        bundled: Collection[int],
        attempts: Collection[int] = (),
    ) -> str | None: ...


class StorageHoldCheck(Protocol):
    """`oracle.retrieval.ledger.StorageLedger.refusal` over this oracle's store: why a batch
    settling these jobs would spend an escrow whose storage term still runs."""

    def refusal(self, job_ids: Collection[str]) -> str | None: ...


class ReceiptCrossCheck(Protocol):
    """`oracle.retrieval.ledger.StorageLedger.receipt_refusal`: why a receipt must not be
    paid by what others recorded (the API's placement, the chain's blocks), or None."""

    def receipt_refusal(self, receipt: StorageReceipt) -> str | None: ...


@dataclass(frozen=True)
class LedgerHold:
    """`StorageHoldCheck` over the engine's storage ledger, in a session of its store."""

    intents: Any
    ledger: Any

    def refusal(self, job_ids: Collection[str]) -> str | None:
        # The API is read first, outside the session (no HTTP call inside a transaction);
        # the session commits on leaving: the copies it learned of from the API are kept.
        self.ledger.prepare(job_ids)
        with self.intents.session() as session:
            why = self.ledger.refusal(session, job_ids)
        return cast(str | None, why)


class AttestationVerifier(Protocol):
    def verify(self, cose: bytes) -> VerifiedClaim:
        """Raise `QuorumRefusal` unless the attestation passes this oracle's checks."""
        ...


def verify_all(verifier: AttestationVerifier, coses: Sequence[bytes]) -> list[VerifiedClaim]:
    """Every attestation of a bundle, in bundle order. A verifier whose checks need the
    bundle as a whole (a unit's inputs are checked against the other units' verified
    outputs) provides `verify_bundle`; others are asked one attestation at a time."""
    whole = getattr(verifier, "verify_bundle", None)
    if callable(whole):
        return list(whole(coses))
    return [verifier.verify(cose) for cose in coses]


def _own_fee(result: Any) -> FeeEvidence | None:
    """The fee evidence this oracle's verdict kept (`oracle.verification.verifiers.
    with_fee_evidence`: its drawn verifier's matching report), or None."""
    from oracle.verification.verifiers import FEE_EVIDENCE
    from proofnet.messages.verification_fee import FeeError

    spot = getattr(result, "spot_check", None)
    raw = (getattr(spot, "report", None) or {}).get(FEE_EVIDENCE)
    if raw is None:
        return None
    try:
        return FeeEvidence.from_json(raw)
    except FeeError:
        return None


def unpaid_own_verifiers(claims: Sequence[VerifiedClaim]) -> list[tuple[str, FeeEvidence]]:
    """The verifiers this oracle's own verdicts relied on that the batch does not pay, as
    (attestation leaf hash, evidence): a co-signer signs only a batch that pays every
    verifier whose report its verdict rests on (docs/protocol.md, the verification fee)."""
    return [
        (c.leaf_hash, c.own_fee)
        for c in claims
        if c.own_fee is not None and all(e.verifier != c.own_fee.verifier for e in c.fees)
    ]


def _claim(att: Attestation) -> VerifiedClaim:
    ref = att.domain.escrow
    return VerifiedClaim(
        OutRef(ref.tx_id, ref.index),
        att.payout_address,
        att.amount,
        att.unit,
        att.job_id,
        att.worker_key,
        att.leaf_hash().hex(),
        attestation=att,
    )


@dataclass
class _BundleStore:
    """This oracle's store, plus the unit attestations of the bundle verified so far: a
    unit's input units are in the same bundle, and need not have reached this oracle's
    own intake."""

    base: Any
    units: dict[str, dict[int, PayableUnit]] = field(default_factory=dict)

    def holder_of_leaf(self, leaf_hash: str) -> int | None:
        return self.base.holder_of_leaf(leaf_hash)  # type: ignore[no-any-return]

    def payable_for_escrow(self, escrow: str) -> tuple[int, str] | None:
        return self.base.payable_for_escrow(escrow)  # type: ignore[no-any-return]

    def payable_units(self, escrow: str) -> Mapping[int, PayableUnit]:
        return {**self.base.payable_units(escrow), **self.units.get(escrow, {})}

    def cancelled_escrow(self, escrow: str) -> str | None:
        return self.base.cancelled_escrow(escrow)  # type: ignore[no-any-return]


class IntakeVerifier:
    """The intake's pipeline (`oracle.verification.verify.verify`) against this oracle's own store and
    chain view; an attestation this oracle already stored counts as itself, not a replay."""

    def __init__(self, context: Any) -> None:
        self.context = context

    def verify(self, cose: bytes) -> VerifiedClaim:
        return self.verify_bundle([cose])[0]

    def verify_bundle(self, coses: Sequence[bytes]) -> list[VerifiedClaim]:
        """The bundle's attestations in unit order per escrow (input units first), each
        unit's chain checked against the outputs verified before it."""
        from oracle.models import escrow_ref
        from oracle.verification.verify import Rejection, authenticate, verify

        store = _BundleStore(self.context.store)
        context = dataclasses.replace(self.context, store=store)
        atts = []
        for cose in coses:
            try:
                atts.append(authenticate(cose, context))
            except Rejection as exc:
                raise QuorumRefusal(f"attestation refused: {exc}") from exc

        def order(i: int) -> tuple[int, int]:
            unit = atts[i].unit
            return (0, 0) if unit is None else (1, unit.index)

        claims: dict[int, VerifiedClaim] = {}
        # The first attestation whose verification is postponed; the others are verified on
        # (their verifiers drawn in this same ask, not one ask each), but a unit after a
        # postponed one waits too (its inputs' outputs are not known yet).
        pending: str | None = None
        for i in sorted(range(len(coses)), key=order):
            att = atts[i]
            if pending is not None and att.unit is not None:
                continue
            ref = att.domain.escrow
            own_id = store.holder_of_leaf(att.leaf_hash().hex())
            result = verify(coses[i], context, own_id=own_id, authenticated=att)
            if not result.ok:
                what = f"escrow {ref.tx_id}#{ref.index}"
                if att.unit is not None:
                    what = f"unit {att.unit.index} of {what}"
                why = f"attestation for {what} {result.outcome}: {result.reason} {result.message}"
                if result.outcome == "retry":
                    pending = pending or why
                    continue
                raise QuorumRefusal(why, disputed=_refused_segments(att, result.spot_check))
            if att.unit is not None:
                store.units.setdefault(escrow_ref(ref.tx_id, ref.index), {})[att.unit.index] = (
                    PayableUnit(own_id or 0, "verified", att.unit.output, att.nonce)
                )
            claims[i] = dataclasses.replace(_claim(att), own_fee=_own_fee(result), stop=result.stop)
        if pending is not None:
            raise QuorumPending(pending)
        return [claims[i] for i in range(len(coses))]

    def fee_mismatch(self, claim: VerifiedClaim, evidence: FeeEvidence) -> str | None:
        """Why this oracle's own reading of the proof says the report a fee is paid on does
        not match (`oracle.verification.verifiers.fee_mismatch`), or None."""
        from oracle.inputs.feed import FeedError
        from oracle.verification.verifiers import fee_mismatch

        feed = self.context.feed
        try:
            job = feed.job(claim.job_id)
        except FeedError as exc:
            return f"this oracle cannot read job {claim.job_id}: {exc}"
        att = claim.attestation
        if job is None or att is None:
            return "this oracle does not know the attestation's job"
        return fee_mismatch(evidence, att, job, feed)


class IntakeReferee:
    """The proposer's `DisputeReferee`: re-checks the segments a co-signer's refusal named
    by its own verifier draw and referee path (`VerifierSpotChecker.check` with those
    segments), never by running job code on the oracle: an oracle whose spot checker
    replays locally (the demo's) cannot re-check, and says "unchecked"."""

    def __init__(self, context: Any) -> None:
        self.context = context

    def recheck(self, claim: Claim, segments: tuple[int, ...]) -> Recheck | None:
        from oracle.inputs.feed import FeedError
        from oracle.verification.spotcheck import SpotCheckUnavailable
        from oracle.verification.verify import Rejection, authenticate

        checker = self.context.spot_checker
        if checker is None or not getattr(checker, "checks_named_segments", False):
            return Recheck("unchecked")
        try:
            att = authenticate(claim.cose, self.context)
            job = self.context.feed.job(att.job_id)
        except Rejection as exc:
            return Recheck("fails", str(exc.reason))
        except FeedError:
            return None
        if job is None:
            return None
        try:
            verdict = checker.check(att, job, segments=segments)
        except SpotCheckUnavailable:
            return None  # no verifier has answered yet: asked again next tick
        if verdict.passed or verdict.fault != "provider":
            return Recheck("replays")
        return Recheck("fails", str(verdict.reason or "spot_check_failed"))


def stop_evidence_mismatch(claim: VerifiedClaim, published: StopEvidence | None) -> str | None:
    """Why the bundle's stop evidence beside `claim` is not what it must be: present exactly
    for an attestation that claims a stop, and the evidence this oracle's own verification
    read (when it read one: a signature-only co-signer has none to compare)."""
    att = claim.attestation
    claimed = att is not None and att.stop is not None
    if claimed and published is None:
        return "the bundle pays a stopped lease's share without the stop's evidence"
    if not claimed and published is not None:
        return "the bundle carries stop evidence beside an attestation of no stop"
    if claim.stop is not None and published != claim.stop:
        return "the bundle's stop evidence is not what this oracle's own feed shows"
    return None


def _refused_segments(att: Attestation, spot: Any) -> tuple[SegmentRefusal, ...]:
    """The segments this oracle's own drawn verifier found not to replay, as the evidence
    its refusal hands the proposer (none when the rejection was not a failed replay)."""
    from oracle.verification.verifiers import REFUSAL_EVIDENCE

    raw = None if spot is None else (spot.report or {}).get(REFUSAL_EVIDENCE)
    if not isinstance(raw, dict):
        return ()
    try:
        return (SegmentRefusal.from_json({**raw, "leaf_hash": att.leaf_hash().hex()}),)
    except SegmentRefusalError:
        return ()


class SignatureVerifier:
    """Signature, encoding and domain only (network, escrow script): for a co-signer that
    has no API feed to run the full intake pipeline against. The escrow, payout and amount
    are still checked against the chain by `CoSigner`."""

    def __init__(self, network: str, escrow_script_hash: str) -> None:
        self.network = network
        self.escrow_script_hash = escrow_script_hash

    def verify(self, cose: bytes) -> VerifiedClaim:
        from proofnet.messages.attestation import AttestationError, verify_attestation

        try:
            att = verify_attestation(
                cose, expected_network=self.network, expected_script_hash=self.escrow_script_hash
            )
        except AttestationError as exc:
            raise QuorumRefusal(f"attestation refused: {exc}") from exc
        return _claim(att)


@dataclass
class CoSigner:
    """What `POST /api/v1/quorum/sign` runs.

    `readiness` defaults to the readiness rule over the verifier's own API feed and store
    (an `IntakeVerifier`'s context) with this co-signer's chain view; without either there is
    none, and batches with unit claims are refused."""

    deployment: Deployment
    chain: ChainView
    key: PaymentSigningKey
    verifier: AttestationVerifier
    readiness: JobOverCheck | None = None
    # Key hashes of other keys this oracle holds (a separate payer key): a batch may spend
    # nothing at their addresses either.
    other_keys: tuple[VerificationKeyHash, ...] = ()
    # Refuses a batch spending the escrow of a job whose storage term still runs; None: an
    # oracle that pays no storage does not check (it signs no receipt's storage either).
    storage_hold: StorageHoldCheck | None = None
    # Checks each storage receipt against the API's placement and the chain's blocks (its
    # beacons); None: only the receipt's own evidence is checked.
    receipt_check: ReceiptCrossCheck | None = None
    # Posts this oracle's own verdict on each attestation it co-signs to the API, so a
    # `result_release_quorum` above 1 is filled by the signing quorum itself (the API
    # releases results only with enough distinct oracles' verdicts); None: no API feed.
    announcer: Announcer | None = None

    def __post_init__(self) -> None:
        if self.readiness is None:
            self.readiness = _own_readiness(self.verifier, self.chain)

    @classmethod
    def for_engine(cls, engine: Any, app: Any) -> CoSigner:
        builder = engine.builder
        # The engine's rule carries the configured grace period and deadline margin.
        own = engine.readiness if callable(getattr(engine.readiness, "refusal", None)) else None
        payer = getattr(builder, "payer_key", None)
        ledger = getattr(engine.intents.queue, "storage", None)
        feed = getattr(app.state.context, "feed", None)
        sink = feed if callable(getattr(feed, "post_verdict", None)) else None
        return cls(
            builder.deployment,
            engine.chain,
            builder.oracle_key,
            IntakeVerifier(app.state.context),
            own,
            () if payer is None else (payer.to_verification_key().hash(),),
            None if ledger is None else LedgerHold(engine.intents, ledger),
            ledger,
            None if sink is None else Announcer(sink),
        )

    @property
    def key_hash(self) -> VerificationKeyHash:
        return self.key.to_verification_key().hash()

    @property
    def scope(self) -> SigningScope:
        own = frozenset(k.payload for k in (self.key_hash, *self.other_keys))
        return SigningScope(self.deployment, own)

    def review(self, tx_cbor: bytes, bundle_body: bytes) -> bytes:
        """The VKey witness CBOR, or `QuorumRefusal`."""
        try:
            bundle = parse_bundle(bundle_body)
        except BundleError as exc:
            raise QuorumRefusal(str(exc)) from exc
        try:
            tx = Transaction.from_cbor(tx_cbor)
        except Exception as exc:  # pycardano raises assorted types on bad CBOR
            raise QuorumRefusal(f"not a transaction: {exc}") from exc
        body = tx.transaction_body
        if self.key_hash not in (body.required_signers or []):
            raise QuorumRefusal("this oracle is not a required signer of the batch")
        resolved = ResolvedTx(
            tx,
            {ref_of(i): self._resolve(ref_of(i)) for i in (*body.inputs, *(body.collateral or []))},
        )
        refusal = scope_refusal(resolved, self.scope)
        if refusal is not None:
            raise QuorumRefusal(refusal)
        redeemer = _batch_redeemer(tx, self.deployment)
        if bytes(redeemer.merkle_root) != bundle.merkle_root:
            raise QuorumRefusal("the redeemer's Merkle root is not the bundle's")
        jobs = _unit_jobs(bundle.cose)
        self._check_jobs_over(jobs)
        claims = verify_all(self.verifier, bundle.cose)
        if _claimed_jobs(claims) != jobs:  # the same bytes, now verified: cannot differ
            raise QuorumRefusal("the bundle's unit claims read differently once verified")
        breaks = chain_breaks([(str(c.escrow), c.unit) for c in claims if c.unit is not None])
        if breaks:
            raise QuorumRefusal(breaks[0].detail)
        if self.storage_hold is not None:
            held = self.storage_hold.refusal({c.job_id for c in claims})
            if held is not None:
                raise QuorumRefusal(held)
        signers = {k.payload.hex() for k in body.required_signers or []}
        claims = [
            self._with_fees(c, bundle.fees[i] if i < len(bundle.fees) else (), signers)
            for i, c in enumerate(claims)
        ]
        claims = [
            self._with_storage(c, bundle.storage[i] if i < len(bundle.storage) else (), signers)
            for i, c in enumerate(claims)
        ]
        for i, c in enumerate(claims):
            why = stop_evidence_mismatch(c, bundle.stops[i] if i < len(bundle.stops) else None)
            if why is not None:
                raise QuorumRefusal(f"escrow {c.escrow}: {why}")
        unpaid = unpaid_own_verifiers(claims)
        if unpaid:
            leaf, evidence = unpaid[0]
            raise QuorumRefusal(
                f"the batch does not pay verifier {evidence.verifier[:16]}..., whose report "
                f"this oracle's verdict on attestation {leaf[:16]}... relied on",
                fees=unpaid,
            )
        self._check_payments(resolved, redeemer, claims)
        from pycardano import VerificationKeyWitness

        body_hash = body.hash()
        witness = VerificationKeyWitness(self.key.to_verification_key(), self.key.sign(body_hash))
        self._announce(claims)
        log.info(
            "co-signed batch tx %s",
            body_hash.hex(),
            extra={"job": "quorum", "tx_id": body_hash.hex()},
        )
        return bytes(witness.to_cbor())

    def _announce(self, claims: Sequence[VerifiedClaim]) -> None:
        """This oracle's own verdict on each attestation it now signs the payment of: it
        re-verified every one with its own intake pipeline, so each is verified in its eyes
        (a failed post is posted again at the announcer's next retry)."""
        if self.announcer is None:
            return
        self.announcer.retry()
        for c in claims:
            if c.attestation is not None:
                self.announcer.announce(
                    Verdict(c.job_id, c.attestation.nonce, "verified", None, "", "")
                )

    def _with_fees(
        self, claim: VerifiedClaim, fees: Sequence[FeeEvidence], signers: Collection[str]
    ) -> VerifiedClaim:
        """The claim with the fees the bundle pays on it, each checked: a fee the evidence
        does not back (another attestation's task, a report that did not pass, a task no
        signer of this batch drew, the provider paid as its own verifier) is refused, and
        so is one whose report this oracle's own judgement says does not match."""
        seen: set[str] = set()
        for evidence in fees:
            why = fee_refusal(
                evidence,
                leaf_hash=claim.leaf_hash,
                provider=claim.worker_key,
                job_id=claim.job_id,
                oracle_key_hashes=signers,
            )
            if why is None and evidence.verifier in seen:
                why = "the verifier is paid twice for one attestation"
            judge = getattr(self.verifier, "fee_mismatch", None)
            if why is None and callable(judge):
                why = judge(claim, evidence)
            if why is not None:
                raise QuorumRefusal(
                    f"escrow {claim.escrow}: the fee of verifier {evidence.verifier[:16]}... "
                    f"is not earned: {why}"
                )
            seen.add(evidence.verifier)
        return dataclasses.replace(claim, fees=tuple(fees))

    def _with_storage(
        self, claim: VerifiedClaim, receipts: Sequence[StorageReceipt], signers: Collection[str]
    ) -> VerifiedClaim:
        """The claim with the storage the bundle pays beside it, each receipt checked: one
        for another job, not signed by an oracle of this batch, paying more than holding the
        object at its price for the period earns, paying one copy twice, with terms other
        than the API's placement or a beacon that is no block of the chain is refused."""
        seen: set[int] = set()
        network = getattr(getattr(self.verifier, "context", None), "network", None)
        for receipt in receipts:
            why = receipt_refusal(
                receipt, job_id=claim.job_id, oracle_key_hashes=signers, network=network
            )
            if why is None and receipt.body.placement_id in seen:
                why = "the copy is paid twice"
            if why is None and self.receipt_check is not None:
                why = self.receipt_check.receipt_refusal(receipt)
            if why is not None:
                raise QuorumRefusal(
                    f"escrow {claim.escrow}: storage of placement {receipt.body.placement_id} "
                    f"is not payable: {why}"
                )
            seen.add(receipt.body.placement_id)
        return dataclasses.replace(claim, storage=tuple(receipts))

    def _check_jobs_over(self, jobs: UnitJobs) -> None:
        """Refuse unless every topology job (and resumed job) the batch settles may be
        settled now."""
        if not jobs:
            return
        if self.readiness is None:
            raise QuorumRefusal(
                "this oracle has no API feed to tell whether a job is over, so it does not "
                "co-sign settlements of topology jobs"
            )
        for (escrow, job_id), parts in sorted(jobs.items(), key=lambda kv: str(kv[0][0])):
            units = {i for kind, i in parts if kind == UNIT}
            attempts = {i for kind, i in parts if kind == ATTEMPT}
            reason = self.readiness.refusal(escrow, job_id, units, attempts)
            if reason is not None:
                raise QuorumRefusal(f"escrow {escrow} is not ready to settle: {reason}")

    def _check_payments(
        self, resolved: ResolvedTx, redeemer: t.BatchSettle, claims: Sequence[VerifiedClaim]
    ) -> None:
        body = resolved.tx.transaction_body
        inputs = resolved.inputs
        by_escrow: dict[str, list[VerifiedClaim]] = {}
        for c in claims:
            by_escrow.setdefault(str(c.escrow), []).append(c)
        for escrow, claimed in by_escrow.items():
            # Several attestations pay one escrow only as distinct units of one job, or
            # distinct attempts of one resumed job for disjoint segments (each verified
            # above for at most its own segments' share, so together within the price).
            atts = [c.attestation for c in claimed]
            if len(claimed) > 1 and any(a is None for a in atts):
                raise QuorumRefusal(f"two attestations claim escrow {escrow}")
            why = sharing_refusal([a for a in atts if a is not None])
            if why is not None:
                raise QuorumRefusal(f"two attestations claim escrow {escrow}: {why}")
        escrow_hash = ScriptHash(bytes.fromhex(self.deployment.escrow_hash))
        policy, name = (
            bytes.fromhex(self.deployment.ntx_policy),
            bytes.fromhex(self.deployment.ntx_name),
        )
        network = self.deployment.pycardano_network
        outputs = body.outputs
        entries = {e.input_index: e for e in redeemer.entries}
        used_outputs: set[int] = set()
        escrow_ntx = 0
        other_ntx_in = 0
        seen: set[str] = set()
        for index, tx_in in enumerate(inputs):
            ref = ref_of(tx_in)
            output = resolved.output(tx_in)
            if output.address.payment_part != escrow_hash:
                other_ntx_in += _ntx(output, policy, name)
                continue
            group = by_escrow.get(str(ref))
            if group is None:
                raise QuorumRefusal(f"input {ref} is an escrow no attestation claims")
            entry = entries.get(index)
            if entry is None:
                raise QuorumRefusal(f"escrow input {ref} has no redeemer entry")
            seen.add(str(ref))
            try:
                datum = t.EscrowDatum.from_cbor(datum_cbor(output.datum))
            except Exception as exc:  # foreign data
                raise QuorumRefusal(f"escrow {ref} has no EscrowDatum: {exc}") from exc
            held = _ntx(output, policy, name)
            escrow_ntx += held
            # Each attestation's outputs: its provider's part, then its verifiers' fees.
            owed = [(claim, payee) for claim in group for payee in claim.outputs()]
            if len(entry.payouts) != len(owed):
                raise QuorumRefusal(
                    f"escrow {ref} must have exactly its {len(owed)} attested payout(s), "
                    f"fee(s) and storage payout(s), has {len(entry.payouts)}"
                )
            paid_ntx = paid_ada = 0
            for payout_index, (claim, (address, amount)) in zip(entry.payouts, owed, strict=True):
                # The redeemer names only the output (no address, no amount: the script
                # cannot tell a right payee or amount from a wrong one): the output itself
                # must pay the attested address the attested amount, checked here.
                paid_out = _output(outputs, payout_index)
                if (
                    str(paid_out.address) != address
                    or _ntx(paid_out, policy, name) != amount
                    or _token_count(paid_out) != 1
                ):
                    unit = "" if claim.unit is None else f" (unit {claim.unit.index})"
                    raise QuorumRefusal(
                        f"escrow {ref}: output {payout_index} does not pay it{unit}"
                    )
                paid_ntx += amount
                paid_ada += paid_out.amount.coin
            refund = _output(outputs, entry.refund_index)
            submitter = address_from_data(datum.submitter, network)
            if refund.address != submitter or _ntx(refund, policy, name) != held - paid_ntx:
                raise QuorumRefusal(f"escrow {ref}: the remainder does not go to its submitter")
            if refund.amount.coin < output.amount.coin - paid_ada:
                raise QuorumRefusal(f"escrow {ref}: ADA of the escrow leaves elsewhere")
            for i in (*entry.payouts, entry.refund_index):
                if i in used_outputs:
                    raise QuorumRefusal(f"output {i} serves two obligations")
                used_outputs.add(i)
        missing = set(by_escrow) - seen
        if missing:
            raise QuorumRefusal(f"attested escrows not spent by the batch: {sorted(missing)}")
        if len(entries) != len(seen):
            raise QuorumRefusal("the redeemer names inputs that are not escrows")
        # Nothing else leaves the escrows: the NTX outside the entries' outputs is exactly
        # what the non-escrow inputs brought.
        elsewhere = sum(
            _ntx(o, policy, name) for i, o in enumerate(outputs) if i not in used_outputs
        )
        paid_in_entries = sum(_ntx(outputs[i], policy, name) for i in used_outputs)
        if paid_in_entries != escrow_ntx or elsewhere != other_ntx_in:
            raise QuorumRefusal("escrow NTX would leave to outputs no attestation names")

    def _resolve(self, ref: OutRef) -> TransactionOutput:
        spend = self.chain.spend_status(ref)
        if not spend.exists or spend.spent_by is not None:
            raise QuorumRefusal(f"input {ref} is not an unspent output on this oracle's chain")
        raw = self.chain.output_cbor(ref)
        if raw is None:
            raise QuorumRefusal(f"input {ref} is unknown to this oracle's chain")
        return TransactionOutput.from_cbor(raw)


def _own_readiness(verifier: AttestationVerifier, chain: ChainView) -> JobOverCheck | None:
    """The readiness rule over the verifier's API feed and store database, if it has them."""
    context = getattr(verifier, "context", None)
    feed = getattr(context, "feed", None)
    db = getattr(getattr(context, "store", None), "engine", None)
    if feed is None or db is None:
        return None
    from .readiness import JobEndReadiness

    return JobEndReadiness(feed, chain, db)


# What of a job one escrow pays: a unit (its index) or an attempt of a resumed job.
UNIT, ATTEMPT = "unit", "attempt"
Part = tuple[str, int]
UnitJobs = dict[tuple[OutRef, str], frozenset[Part]]


def _part(unit: UnitWork | None, att: Attestation | None) -> Part | None:
    if unit is not None:
        return (UNIT, unit.index)
    if att is not None and att.segments is not None:
        return (ATTEMPT, att.segments.attempt)
    return None


def _unit_jobs(coses: Sequence[bytes]) -> UnitJobs:
    """(escrow, job id) -> the units the bundle pays of it, as its unit attestations say.

    Read before they are verified: it only names the jobs whose end the co-signer checks
    first; every attestation is then verified in full (one that does not decode here is
    refused there with its reason) and `_claimed_jobs` must say the same."""
    import cbor2

    from proofnet.messages.attestation import attestation_from_dict
    from proofnet.messages.canonical import parse_canonical_json

    jobs: dict[tuple[OutRef, str], set[Part]] = {}
    for cose in coses:
        try:
            message = cbor2.loads(cose)
            message = message.value if isinstance(message, cbor2.CBORTag) else message
            att = attestation_from_dict(parse_canonical_json(message[2]))
            part = _part(att.unit, att)
            if part is None:
                continue
            escrow = OutRef(att.domain.escrow.tx_id, att.domain.escrow.index)
        except Exception:  # cbor2, pydantic and OutRef raise assorted types; refused later
            continue
        jobs.setdefault((escrow, att.job_id), set()).add(part)
    return {key: frozenset(parts) for key, parts in jobs.items()}


def _claimed_jobs(claims: Sequence[VerifiedClaim]) -> UnitJobs:
    jobs: dict[tuple[OutRef, str], set[Part]] = {}
    for c in claims:
        part = _part(c.unit, c.attestation)
        if part is not None:
            jobs.setdefault((c.escrow, c.job_id), set()).add(part)
    return {key: frozenset(parts) for key, parts in jobs.items()}


def _batch_redeemer(tx: Transaction, deployment: Deployment) -> t.BatchSettle:
    redeemers = tx.transaction_witness_set.redeemer
    if not isinstance(redeemers, RedeemerMap):
        raise QuorumRefusal("the batch carries no redeemer map")
    withdrawals = [v for k, v in redeemers.items() if k.tag == RedeemerTag.WITHDRAWAL]
    if len(withdrawals) != 1:
        raise QuorumRefusal("a batch has exactly one withdrawal redeemer")
    stake = bytes(deployment.batch_stake_address)
    if list((tx.transaction_body.withdraws or {}).keys()) != [stake]:
        raise QuorumRefusal("the batch withdraws from something other than the batch script")
    try:
        data = withdrawals[0].data
        raw = data.to_cbor() if hasattr(data, "to_cbor") else None
        return t.BatchSettle.from_cbor(raw if raw is not None else datum_cbor(data))
    except Exception as exc:  # foreign data
        raise QuorumRefusal(f"the withdrawal redeemer is not a BatchSettle: {exc}") from exc


def _ntx(output: TransactionOutput, policy: bytes, name: bytes) -> int:
    for p, assets in output.amount.multi_asset.items():
        if p.payload == policy:
            for n, q in assets.items():
                if n.payload == name:
                    return int(q)
    return 0


def _token_count(output: TransactionOutput) -> int:
    return sum(len(a) for a in output.amount.multi_asset.values())


def _output(outputs: Sequence[TransactionOutput], index: int) -> TransactionOutput:
    if not 0 <= index < len(outputs):
        raise QuorumRefusal(f"output index {index} out of range")
    return outputs[index]


# --- the proposer's side ---------------------------------------------------------------------


@dataclass
class CoSignerClient:
    url: str
    key_hash: str  # hex of the co-signer's payment key hash
    timeout_s: float = 60.0
    refused_until: float = 0.0

    def healthy(self) -> bool:
        try:
            return (
                httpx.get(f"{self.url.rstrip('/')}/api/v1/health", timeout=2.0).status_code == 200
            )
        except httpx.HTTPError:
            return False

    def sign(self, unsigned: UnsignedBatch, bundle_body: bytes) -> bytes:
        try:
            response = httpx.post(
                f"{self.url.rstrip('/')}{SIGN_PATH}",
                json={"tx_cbor": unsigned.tx_cbor.hex(), "bundle": bundle_body.decode()},
                timeout=self.timeout_s,
            )
        except httpx.HTTPError as exc:
            raise QuorumRefusal(
                redact_credentials(f"co-signer {self.url} unreachable: {exc}")
            ) from exc
        if response.status_code == 409 and _pending(response):
            raise QuorumPending(
                redact_credentials(f"co-signer {self.url}: pending {response.text[:300]}")
            )
        if response.status_code != 200:
            raise QuorumRefusal(
                redact_credentials(
                    f"co-signer {self.url}: {response.status_code} {response.text[:300]}"
                ),
                fees=_handed_back(response) if response.status_code == 409 else (),
                disputed=_disputed(response) if response.status_code == 409 else (),
            )
        return bytes.fromhex(response.json()["witness"])


def _disputed(response: httpx.Response) -> tuple[SegmentRefusal, ...]:
    """The segment refusals a refusing co-signer handed back (checked by the proposer)."""
    try:
        return parse_refusals(response.json().get("disputed"))
    except (ValueError, AttributeError):
        return ()


def _pending(response: httpx.Response) -> bool:
    """Whether a co-signer's 409 says its own verification is only postponed."""
    try:
        return response.json().get("pending") is True
    except (ValueError, AttributeError):
        return False


def _handed_back(response: httpx.Response) -> tuple[tuple[str, FeeEvidence], ...]:
    """The fee evidence a refusing co-signer handed back (its own verifiers the batch did
    not pay); what does not parse is dropped (the proposer checks the rest again)."""
    from proofnet.messages.verification_fee import FeeError

    try:
        raw = response.json().get("fees") or []
    except (ValueError, AttributeError):
        return ()
    out = []
    for item in raw if isinstance(raw, list) else []:
        try:
            out.append((str(item["leaf_hash"]), FeeEvidence.from_json(item["evidence"])))
        except (KeyError, TypeError, FeeError):
            continue
    return tuple(out)


@dataclass
class QuorumSigner:
    """Collects `threshold` witnesses: this oracle's own plus co-signers'."""

    builder: Any  # CardanoSettlementBuilder (has `witness`, `oracle_pkh`)
    cosigners: list[CoSignerClient]
    threshold: int
    cooldown_s: float = 60.0
    # A co-signer whose own verification is pending (QuorumPending) is asked again after
    # this, not after `cooldown_s`.
    pending_retry_s: float = 5.0
    clock: Callable[[], float] = field(default=time.time)

    def __post_init__(self) -> None:
        if not 1 <= self.threshold <= len(self.cosigners) + 1:
            raise ValueError(f"threshold {self.threshold} not in 1..{len(self.cosigners) + 1}")

    def choose(self) -> list[CoSignerClient]:
        """The co-signers this batch will name as required signers."""
        now = self.clock()
        chosen: list[CoSignerClient] = []
        for c in self.cosigners:
            if len(chosen) == self.threshold - 1:
                break
            if c.refused_until <= now and c.healthy():
                chosen.append(c)
        if len(chosen) < self.threshold - 1:
            raise QuorumNotReached(
                f"only {len(chosen)} of {self.threshold - 1} co-signers are available"
            )
        return chosen

    def signers(self) -> list[bytes]:
        self._chosen = self.choose()
        own = self.builder.oracle_pkh.payload
        return [own] + [bytes.fromhex(c.key_hash) for c in self._chosen]

    def witnesses(self, unsigned: UnsignedBatch, bundle_body: bytes) -> list[bytes]:
        out = [self.builder.witness(unsigned.tx_id)]
        for c in getattr(self, "_chosen", []):
            try:
                out.append(c.sign(unsigned, bundle_body))
            except QuorumPending as exc:
                c.refused_until = self.clock() + self.pending_retry_s
                log.info(
                    "co-signer not done verifying: %s",
                    exc.reason,
                    extra={"job": "quorum", "tx_id": unsigned.tx_id},
                )
                raise QuorumNotReached(exc.reason, pending=True) from exc
            except QuorumRefusal as exc:
                if not exc.fees:  # a batch short of its verifiers is rebuilt at once
                    c.refused_until = self.clock() + self.cooldown_s
                log.warning(
                    "co-signer refused: %s",
                    exc.reason,
                    extra={"job": "quorum", "tx_id": unsigned.tx_id},
                )
                raise QuorumNotReached(
                    exc.reason, fees=exc.fees, disputed=exc.disputed, refuser=c.key_hash
                ) from exc
        if len(out) < self.threshold:
            raise QuorumNotReached(f"{len(out)} of {self.threshold} witnesses")
        return out


def parse_address(text: str) -> Address:
    return Address.from_primitive(text)
