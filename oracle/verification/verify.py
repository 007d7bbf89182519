"""The verification pipeline: one signed attestation in, one frozen verdict out.

`verify(cose, ctx)` is pure with respect to the oracle's own state: it reads the chain, the
API feed and the store through `ctx`, and writes nothing; `oracle.store.AttestationStore.apply`
records the verdict. Checks run in a fixed order and the first failure is reported with a
stable reason code (`Reason`) and a message for humans. A check that could not be made
(chain backend or API unreachable, or a unit's input unit not verified yet) yields outcome
"retry", never a rejection. Units of topology jobs get the checks of `oracle.verification.unit_checks`.
"""

from __future__ import annotations

import dataclasses
import hmac
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import cbor2

from chain.offchain.escrow_terms import EscrowTerms, escrow_refusal
from oracle.inputs.chain import ChainUnavailable, ChainView, EscrowOutput
from oracle.inputs.feed import ApiFeed, AttemptInfo, FeedDataError, FeedError, JobInfo
from oracle.models import escrow_ref, payable_key
from oracle.verification import lost_attempts, resume_checks
from oracle.verification import unit_checks as units
from oracle.verification.metering import (
    DEFAULT_ALLOWANCE_MS,
    DEFAULT_SLACK,
    ProofTiming,
    proof_bound_ms,
)
from oracle.verification.proof_checks import stop_segments
from oracle.verification.reasons import Reason, fault_of
from oracle.verification.spotcheck import SpotChecker, SpotCheckUnavailable, SpotCheckVerdict
from proofnet.messages import merkle
from proofnet.messages.attestation import (
    Attestation,
    BadSignature,
    MalformedAttestation,
    UnknownVersion,
    WrongDomain,
    WrongNetwork,
    WrongScript,
    verify_attestation,
)
from proofnet.messages.auction import AuctionError, clear
from proofnet.messages.jobspec import AuctionPrice, FixedPrice, RateCardPrice
from proofnet.messages.rate_card import RateCardError, price_under
from proofnet.messages.segment_share import STOP_GRACE_SEGMENTS, segment_cap, stopped_share
from proofnet.messages.stop_evidence import StopEvidence
from proofnet.messages.topology import Unit
from proofnet.messages.verification import Fault

# Cardano token quantities in a value are at most 2**63 - 1.
MAX_AMOUNT = 2**63 - 1
POT_PREFIX = "pot/"


# "unproven": a disputed segment nothing proved either way (oracle.verification.referee):
# the provider is unpaid and not slashed, the results are withheld, the escrow refunds.
Outcome = Literal["verified", "rejected", "unproven", "retry"]


class StoreView(Protocol):
    """What the pipeline asks the store (read-only)."""

    def holder_of_leaf(self, leaf_hash: str) -> int | None:
        """Id of the attestation stored with this leaf hash, if any."""
        ...

    def payable_for_escrow(self, escrow: str) -> tuple[int, str] | None:
        """(id, status) of the attestation payable under this key (an escrow out-ref, or
        `<out-ref>/<unit>` for a unit: `oracle.models.payable_key`), if any."""
        ...

    def payable_units(self, escrow: str) -> Mapping[int, units.PayableUnit]:
        """The payable unit attestations of escrow out-ref `escrow`, by unit index."""
        ...

    def cancelled_escrow(self, escrow: str) -> str | None:
        """Why escrow out-ref `escrow` is never paid (this oracle co-signed its cancel), or
        None."""
        ...


@dataclass(frozen=True)
class VerificationResult:
    outcome: Outcome
    reason: Reason | None
    message: str
    checks: tuple[str, ...]  # checks that passed, in order
    attestation: Attestation | None
    spot_check: SpotCheckVerdict | None = None
    # Whose fault the verdict is: a rejection is always someone's; a verified attestation
    # is the job's fault when the job's code could not be replayed (the provider is paid
    # what it attested and the submitter gets the results), else nobody's; never on retry.
    fault: Fault | None = None
    # A stopped lease's verified attestation: what the settlement publishes beside it.
    stop: StopEvidence | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "verified"


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class VerificationContext:
    """Everything a verification reads. Build one per oracle; it is shared across threads."""

    network: str
    escrow_script_hash: str
    chain: ChainView
    feed: ApiFeed
    store: StoreView
    # The NTX unit escrows must lock (hex); None skips the check (configuration not set).
    ntx_policy: str | None = None
    ntx_name: str = "4e5458"
    # The batch-settlement script hash and the oracle config (NFT policy, name hex) escrows
    # must name. The served oracle takes them from its deployment (`oracle.service`); None
    # skips the check (unit tests without a deployment).
    batch_credential: str | None = None
    config_policy: str | None = None
    config_name: str | None = None
    # The oracle set the config holds now (hex; `chain.offchain.oracle_set.of_config`):
    # escrows pinning another are refused (the batch script would not settle them). None
    # skips the check; the batch builder checks it again against the live config.
    oracle_set: str | None = None
    spot_checker: SpotChecker | None = None
    # Tolerance between the worker's clock and the API's for the attested times.
    clock_skew_ms: int = 120_000
    # Metering bounded by proof (oracle.metering): a rate-card attestation is paid for at
    # most committed steps x measured step time x slack (+ the measured start-up and the
    # allowance) per GPU.
    metering_slack: float = DEFAULT_SLACK
    metering_allowance_ms: int = DEFAULT_ALLOWANCE_MS
    # Why this oracle cannot verify at all (no deployment configured), or "": while set,
    # every verification is postponed ("retry") with this message, so nothing is paid.
    unconfigured: str = ""
    now_ms: Callable[[], int] = field(default=_now_ms)


class _Rejected(Exception):
    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _decode(cose: bytes, ctx: VerificationContext) -> Attestation:
    try:
        return verify_attestation(
            cose, expected_network=ctx.network, expected_script_hash=ctx.escrow_script_hash
        )
    except UnknownVersion as exc:
        raise _Rejected(Reason.UNKNOWN_VERSION, str(exc)) from exc
    except BadSignature as exc:
        raise _Rejected(Reason.BAD_SIGNATURE, str(exc)) from exc
    except WrongNetwork as exc:
        raise _Rejected(Reason.WRONG_NETWORK, str(exc)) from exc
    except WrongScript as exc:
        raise _Rejected(Reason.WRONG_SCRIPT, str(exc)) from exc
    except WrongDomain as exc:
        raise _Rejected(Reason.WRONG_DOMAIN, str(exc)) from exc
    except MalformedAttestation as exc:
        raise _Rejected(Reason.MALFORMED, str(exc)) from exc


def authenticate(cose: bytes, ctx: VerificationContext) -> Attestation:
    """The stateless first stage (signature, encoding, domain, amount range): what intake
    runs before storing anything. Raises `Rejection`."""
    try:
        att = _decode(cose, ctx)
        if att.amount > MAX_AMOUNT:
            raise _Rejected(
                Reason.AMOUNT_EXCEEDS_BUDGET, f"amount {att.amount} exceeds what any escrow holds"
            )
    except _Rejected as exc:
        raise Rejection(exc.reason, exc.message) from None
    return att


class Rejection(ValueError):
    """Raised by `authenticate`: the attestation is refused before it is stored."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


def leaf_of(cose: bytes) -> str:
    """The leaf hash (hex) of an attestation `authenticate` accepted: its payload already is
    the canonical encoding, so hashing it equals `Attestation.leaf_hash()` without
    re-encoding."""
    payload = cbor2.loads(cose)
    if isinstance(payload, cbor2.CBORTag):
        payload = payload.value
    return merkle.leaf_hash(payload[2]).hex()


def verify(
    cose: bytes,
    ctx: VerificationContext,
    *,
    own_id: int | None = None,
    authenticated: Attestation | None = None,
) -> VerificationResult:
    """Run every check on `cose`. `own_id` is the attestation's row id when it is already
    stored, so the replay checks do not count the attestation against itself.

    `authenticated` is what `authenticate(cose, ctx)` returned for these very bytes in this
    process (intake verifying what it just accepted); the signature and domain checks are
    then not repeated. Anyone else (a co-signer, a retry after restart) passes only `cose`.

    A verified attestation of a lease stopped for the job's fault carries the stop's
    evidence (`VerificationResult.stop`), which its settlement publishes.
    """
    stops: list[StopEvidence] = []
    result = _verify(cose, ctx, own_id, authenticated, stops)
    if result.ok and stops:
        return dataclasses.replace(result, stop=stops[0])
    return result


def _verify(
    cose: bytes,
    ctx: VerificationContext,
    own_id: int | None,
    authenticated: Attestation | None,
    stops: list[StopEvidence],
) -> VerificationResult:
    passed: list[str] = []
    att: Attestation | None = None
    spot: SpotCheckVerdict | None = None
    if ctx.unconfigured:
        return VerificationResult("retry", None, ctx.unconfigured, (), authenticated)
    try:
        att = authenticated if authenticated is not None else _decode(cose, ctx)
        passed.append("signature_and_domain")
        _check_worker(att, ctx)
        passed.append("worker_registered")
        job = _check_job(att, ctx)
        passed.append("job_escrow_recorded")
        unit = units.planned_unit(att, job)
        if unit is not None:
            passed.append("unit_planned")
        escrow = _check_escrow_on_chain(att, ctx)
        if unit is not None:
            assert escrow.datum is not None
            locked = escrow.quantity(
                bytes(escrow.datum.ntx_policy).hex(), bytes(escrow.datum.ntx_name).hex()
            )
            units.escrow_covers_plan(att, job, escrow.datum.budget, locked)
        passed.append("escrow_on_chain")
        _check_not_cancelled(att, ctx)
        passed.append("escrow_not_cancelled")
        payable = None
        if unit is not None:
            ref = att.domain.escrow
            payable = ctx.store.payable_units(escrow_ref(ref.tx_id, ref.index))
            units.check_superseded(att, job, unit, payable, own_id)
        lost = _lost_attempt(att, job)
        _check_store(att, ctx, own_id, leaf_of(cose))
        passed.append("not_replayed")
        if lost is not None:
            # A lost attempt's claim: its own lease, uploads and segments, not the job's.
            spot = _verify_lost(att, job, lost, ctx, passed)
            if spot is not None and not spot.passed:
                # The job's code cannot be replayed: not the provider's doing (as below).
                return VerificationResult(
                    "verified", None, spot.message, tuple(passed), att, spot, fault="job"
                )
            return VerificationResult("verified", None, "", tuple(passed), att, spot)
        # A unit's lease, uploads and proof are the unit's, not the job's.
        scope = job if unit is None else units.unit_scope(job, unit)
        _check_lease(att, scope, ctx)
        passed.append("lease")
        _check_work(att, job)
        passed.append("work_matches_spec")
        if unit is None:
            _check_gpu_model(att, job)
        _check_stop_claim(att, job)
        _check_amount(att, job, unit)
        passed.append("amount")
        if att.stop is not None:
            stops.append(_stop_evidence(att, job))
        _check_results(att, scope)
        passed.append("result_hashes")
        if unit is None:
            _check_resumed(att, job, ctx)
            if resume_checks.resumed_from(att, job) is not None:
                passed.append("resumed_from_committed_prefix")
        if unit is not None and payable is not None:
            units.check_output(att, job, unit)
            units.check_chain(att, job, unit, payable)
            passed.append("unit_chain")
        recomputer = ctx.spot_checker if isinstance(ctx.spot_checker, UnitRecomputer) else None
        nodes = ctx.spot_checker if isinstance(ctx.spot_checker, NodeChecker) else None
        if nodes is not None and unit is not None and _node_replayable(unit, job):
            # A cluster node is spot-checked on its shard: a drawn segment's replay
            # recomputes every rank's contribution; the node whose own does not replay is
            # the one at fault (oracle.verification.cluster_checks).
            spot = nodes.check_node(att, scope, unit, job)
            if not spot.passed and spot.fault == "job":
                passed.append("node_proof_job_fault")
                return VerificationResult(
                    "verified", None, spot.message, tuple(passed), att, spot, fault="job"
                )
            if not spot.passed:
                raise _Rejected(Reason(spot.reason or Reason.SPOT_CHECK_FAILED), spot.message)
            passed.append("node_proof_of_training")
        elif recomputer is not None and unit is not None and unit.kind in RECOMPUTED:
            # An aggregation or evaluation is recomputed by a drawn verifier from the inputs
            # check_chain just tied to verified outputs (oracle.verifiers.check_unit).
            spot = recomputer.check_unit(att, scope, unit)
            if not spot.passed and spot.fault == "job":
                passed.append("unit_recomputed_job_fault")
                return VerificationResult(
                    "verified", None, spot.message, tuple(passed), att, spot, fault="job"
                )
            if not spot.passed:
                raise _Rejected(Reason(spot.reason or Reason.UNIT_RECOMPUTE_MISMATCH), spot.message)
            passed.append("unit_recomputed")
        elif ctx.spot_checker is not None and _replayable(unit):
            spot = ctx.spot_checker.check(att, scope)
            if not spot.passed and spot.fault == "job":
                # Not the provider's doing: paid for its work, results released, and why.
                passed.append("proof_of_training_job_fault")
                return VerificationResult(
                    "verified", None, spot.message, tuple(passed), att, spot, fault="job"
                )
            if spot.reason == Reason.REPLAY_UNPROVEN:
                passed.append("proof_of_training_disputed")
                return VerificationResult(
                    "unproven",
                    Reason.REPLAY_UNPROVEN,
                    spot.message,
                    tuple(passed),
                    att,
                    spot,
                    fault=spot.fault,  # type: ignore[arg-type]
                )
            if not spot.passed:
                raise _Rejected(Reason(spot.reason or Reason.SPOT_CHECK_FAILED), spot.message)
            passed.append("proof_of_training")
            if unit is None and spot.timing is not None:
                _check_metered_by_proof(att, job, spot.timing, ctx)
                passed.append("metered_by_proof")
    except _Rejected as exc:
        return VerificationResult(
            "rejected", exc.reason, exc.message, tuple(passed), att, spot, fault_of(exc.reason)
        )
    except units.UnitRejected as exc:
        reason = Reason(exc.reason)
        return VerificationResult(
            "rejected", reason, exc.message, tuple(passed), att, spot, fault_of(reason)
        )
    except (
        ChainUnavailable,
        FeedError,
        SpotCheckUnavailable,
        units.UnitsPending,
        lost_attempts.ClaimPending,
    ) as exc:
        return VerificationResult("retry", None, str(exc), tuple(passed), att, spot)
    return VerificationResult("verified", None, "", tuple(passed), att, spot)


# Units that train nothing and are recomputed by a drawn verifier instead of replayed.
RECOMPUTED = frozenset({"aggregate", "eval"})


@runtime_checkable
class UnitRecomputer(Protocol):
    """A spot checker that also recomputes aggregation and evaluation units by drawn
    verifiers (`oracle.verification.verifiers.VerifierSpotChecker`). The demo's in-process checker is
    not one: there, those units stay on the provider's word (the demo only)."""

    def check(self, att: Attestation, job: JobInfo) -> SpotCheckVerdict: ...

    def check_unit(self, att: Attestation, job: JobInfo, unit: Unit) -> SpotCheckVerdict: ...


@runtime_checkable
class NodeChecker(Protocol):
    """A spot checker that also checks cluster nodes on their shards (`check_node`: `job` is
    the whole job, for the other nodes' leases and uploads; `scope` the node's)."""

    def check(self, att: Attestation, job: JobInfo) -> SpotCheckVerdict: ...

    def check_node(
        self, att: Attestation, scope: JobInfo, unit: Unit, job: JobInfo
    ) -> SpotCheckVerdict: ...


def _node_replayable(unit: Unit, job: JobInfo) -> bool:
    """Whether a cluster node is spot-checked: its spec names the data-parallel trainer
    verifiers replay with. A spec without one (a job that records its own per-node proof,
    such as `pot/examples/torch_ddp.py`) leaves its nodes on their word, the submitter's
    choice (docs/protocol.md, "Cluster nodes")."""
    return unit.kind == "node" and job.spec.proof.trainer is not None


def _replayable(unit: Unit | None) -> bool:
    """Whether proof of training is spot-checked as one run: single-unit jobs and relay
    stages train; evaluations and aggregations do not; a cluster node's proof is checked by
    a `NodeChecker` (every rank's contribution replayed), never as a single run."""
    return unit is None or unit.kind == "stage"


def _check_worker(att: Attestation, ctx: VerificationContext) -> None:
    worker = ctx.feed.worker(att.worker_key)
    if worker is None:
        raise _Rejected(
            Reason.WORKER_UNREGISTERED, f"worker {att.worker_key} is not registered with the API"
        )
    if worker.payout_address != att.payout_address:
        raise _Rejected(
            Reason.PAYOUT_MISMATCH,
            f"attested payout address {att.payout_address} is not the worker's bound address "
            f"{worker.payout_address}",
        )


def _check_job(att: Attestation, ctx: VerificationContext) -> JobInfo:
    job = ctx.feed.job(att.job_id)
    if job is None:
        raise _Rejected(Reason.JOB_UNKNOWN, f"the API does not know job {att.job_id}")
    escrow = att.domain.escrow
    if job.escrow is None:
        raise _Rejected(
            Reason.ESCROW_UNRECORDED,
            f"the submitter has not recorded an escrow for job {job.job_id}",
        )
    if job.escrow != escrow:
        raise _Rejected(
            Reason.ESCROW_MISMATCH,
            f"attested escrow {escrow_ref(escrow.tx_id, escrow.index)} is not job {job.job_id}'s "
            f"escrow {escrow_ref(job.escrow.tx_id, job.escrow.index)}",
        )
    return job


def escrow_terms(att: Attestation, ctx: VerificationContext) -> EscrowTerms:
    """What the attested escrow must satisfy (`chain.offchain.escrow_terms`, the definition
    the API applies too): this deployment's escrow, pays the attested amount, not expired."""
    return EscrowTerms(
        escrow_hash=ctx.escrow_script_hash,
        job_id=att.job_id,
        pays=att.amount,
        now_ms=ctx.now_ms(),
        ntx_policy=ctx.ntx_policy,
        ntx_name=ctx.ntx_name,
        batch_hash=ctx.batch_credential,
        config_policy=ctx.config_policy,
        config_name=ctx.config_name,
        oracle_set=ctx.oracle_set,
    )


def _check_escrow_on_chain(att: Attestation, ctx: VerificationContext) -> EscrowOutput:
    lookup = ctx.chain.escrow_output(att.domain.escrow)
    out = lookup.output
    if lookup.status == "missing" or out is None:
        ref = att.domain.escrow
        name = escrow_ref(ref.tx_id, ref.index)
        raise _Rejected(Reason.ESCROW_MISSING, f"escrow {name} does not exist on chain")
    spent_by = (lookup.spent_by or "another transaction") if lookup.status == "spent" else None
    refusal = escrow_refusal(out.facts(spent_by), escrow_terms(att, ctx))
    if refusal is not None:
        raise _Rejected(Reason(refusal.reason.value), refusal.message)
    return out


def _check_not_cancelled(att: Attestation, ctx: VerificationContext) -> None:
    ref = att.domain.escrow
    why = ctx.store.cancelled_escrow(escrow_ref(ref.tx_id, ref.index))
    if why is not None:
        raise _Rejected(Reason.ESCROW_CANCELLED, why)


def _check_store(att: Attestation, ctx: VerificationContext, own_id: int | None, leaf: str) -> None:
    holder = ctx.store.holder_of_leaf(leaf)
    if holder is not None and holder != own_id:
        raise _Rejected(Reason.REPLAYED, f"this attestation was already received (id {holder})")
    ref = att.domain.escrow
    name = f"escrow {escrow_ref(ref.tx_id, ref.index)}"
    unit = None if att.unit is None else att.unit.index
    attempt = None if att.segments is None else att.segments.attempt
    if unit is not None:
        name = f"unit {unit} of {name}"
    elif attempt is not None:
        name = f"attempt {attempt} of {name}"
    key = payable_key(escrow_ref(ref.tx_id, ref.index), unit, attempt)
    payable = ctx.store.payable_for_escrow(key)
    if payable is not None and payable[0] != own_id:
        other, status = payable
        if status == "settled":
            raise _Rejected(Reason.ALREADY_SETTLED, f"{name} was settled (attestation {other})")
        raise _Rejected(
            Reason.ESCROW_ALREADY_CLAIMED,
            f"{name} is already claimed by attestation {other}",
        )


def _check_lease(att: Attestation, job: JobInfo, ctx: VerificationContext) -> None:
    lease = job.lease
    if job.status != "completed" or lease is None:
        raise _Rejected(
            Reason.JOB_NOT_COMPLETED, f"job {job.job_id} is {job.status}, not completed"
        )
    if lease.worker_key != att.worker_key:
        raise _Rejected(
            Reason.LEASE_OTHER_WORKER, f"job {job.job_id} was completed by another worker"
        )
    if not hmac.compare_digest(lease.nonce, att.nonce):
        raise _Rejected(
            Reason.NONCE_MISMATCH, "nonce is not the one revealed when the job was claimed"
        )
    if lease.payout_address != att.payout_address:
        raise _Rejected(
            Reason.PAYOUT_MISMATCH,
            "payout address differs from the provider's binding at completion",
        )
    skew = ctx.clock_skew_ms
    if att.started_ms < lease.started_ms - skew or att.ended_ms > lease.completed_ms + skew:
        raise _Rejected(
            Reason.TIMES_OUTSIDE_LEASE,
            f"attested run {att.started_ms}..{att.ended_ms} ms lies outside the lease "
            f"{lease.started_ms}..{lease.completed_ms} ms",
        )
    wall = att.ended_ms - att.started_ms
    if att.gpu_milliseconds > wall * lease.gpus:
        raise _Rejected(
            Reason.GPU_TIME_IMPLAUSIBLE,
            f"{att.gpu_milliseconds} GPU-ms in {wall} ms of wall time on {lease.gpus} GPU(s)",
        )


def _check_resumed(att: Attestation, job: JobInfo, ctx: VerificationContext) -> None:
    """A resumed attempt names its segments, and its proof chains to the prefix it resumed
    (no job code runs)."""
    try:
        resume_checks.check_segments_named(att, job)
        resume_checks.check_resumed_proof(att, job, ctx.feed)
    except resume_checks.ResumeRejected as exc:
        raise _Rejected(Reason(exc.reason), exc.message) from exc


def _lost_attempt(att: Attestation, job: JobInfo) -> AttemptInfo | None:
    try:
        return lost_attempts.lost_attempt(att, job)
    except lost_attempts.LostClaimRejected as exc:
        raise _Rejected(Reason(exc.reason), exc.message) from exc


@runtime_checkable
class AttemptReplayer(Protocol):
    """A spot checker that also replays a lost attempt's segments from its uploaded prefix
    (`oracle.verification.spotcheck.LocalSpotChecker`)."""

    def check_attempt(
        self, att: Attestation, job: JobInfo, attempt: AttemptInfo
    ) -> SpotCheckVerdict: ...


def _verify_lost(
    att: Attestation,
    job: JobInfo,
    attempt: AttemptInfo,
    ctx: VerificationContext,
    passed: list[str],
) -> SpotCheckVerdict | None:
    """The checks of a lost attempt's claim after the escrow's (`oracle.verification.
    lost_attempts`), its amount within its share, and the spot check of its segments.
    Appends to `passed`; raises `_Rejected` (or a retry's exception)."""
    claim = lost_attempts.LostClaim(att, job, attempt, ctx.feed, ctx.clock_skew_ms, ctx.now_ms())
    try:
        passed += lost_attempts.check_lost_claim(claim)
    except lost_attempts.LostClaimRejected as exc:
        raise _Rejected(Reason(exc.reason), exc.message) from exc
    _check_work(att, job)
    passed.append("work_matches_spec")
    segments = att.segments
    assert segments is not None
    cap = price_cap(job, att)
    share = segment_cap(job.spec, cap, segments.first, segments.last)
    if att.amount > share:
        raise _Rejected(
            Reason.AMOUNT_EXCEEDS_PRICE,
            f"amount {att.amount} exceeds {share}, attempt {segments.attempt}'s share of the "
            f"job's price {cap} for segments {segments.first}..{segments.last}",
        )
    passed.append("amount")
    if ctx.spot_checker is None:
        return None
    if not isinstance(ctx.spot_checker, AttemptReplayer):
        raise SpotCheckUnavailable(
            "this oracle's spot checker cannot replay a lost attempt's segments yet"
        )
    spot = ctx.spot_checker.check_attempt(att, job, attempt)
    if not spot.passed and spot.fault == "job":
        passed.append("proof_of_training_job_fault")
        return spot
    if not spot.passed:
        raise _Rejected(Reason(spot.reason or Reason.SPOT_CHECK_FAILED), spot.message)
    passed.append("proof_of_training")
    return spot


def _check_work(att: Attestation, job: JobInfo) -> None:
    if att.image_digest != job.image_digest:
        raise _Rejected(Reason.IMAGE_MISMATCH, f"image {att.image_digest} is not the spec's")
    if att.command_hash != job.command_hash:
        raise _Rejected(Reason.COMMAND_MISMATCH, "command hash is not the spec's commands")


def price_cap(job: JobInfo, att: Attestation) -> int:
    """The most the job's pricing rule lets this attestation claim.

    Rate-card jobs pay the attested GPU time at the document's rate for the attested GPU
    model, capped at `max_amount`, recomputed here from the document (checked against the
    spec's digest when the feed was parsed) rather than taken from the API."""
    pricing = job.spec.pricing
    if isinstance(pricing, FixedPrice):
        return pricing.amount
    if isinstance(pricing, AuctionPrice):
        return _auction_price(job, pricing, att)
    if job.rate_card is None:
        raise FeedDataError(f"the API feed carries no rate card document for job {job.job_id}")
    try:
        return price_under(
            job.rate_card,
            max_amount=pricing.max_amount,
            worker_key=att.worker_key,
            gpu_model=att.gpu_model,
            gpu_milliseconds=att.gpu_milliseconds,
        )
    except RateCardError as exc:
        raise _Rejected(Reason.AMOUNT_EXCEEDS_PRICE, f"nothing is payable: {exc}") from exc


def _check_gpu_model(att: Attestation, job: JobInfo) -> None:
    """A GPU model's rate is paid only for GPUs that passed that model's checks: a rate-card
    attestation must name a model among the checked GPUs the lease was made on."""
    if not isinstance(job.spec.pricing, RateCardPrice) or job.lease is None:
        return
    models = job.lease.gpu_models
    if models is None or att.gpu_model in models:
        return
    raise _Rejected(
        Reason.GPU_MODEL_UNCHECKED,
        f"the attestation names GPU model {att.gpu_model!r}, but the lease was made on checked "
        f"GPUs of {', '.join(repr(m) for m in models) or 'no model'} only",
    )


def _check_metered_by_proof(
    att: Attestation, job: JobInfo, timing: ProofTiming, ctx: VerificationContext
) -> None:
    """A rate-card job pays GPU time only as far as the proof backs it: the attested time
    beyond committed steps x the step time the spot check measured (with the slack and the
    allowance) is not payable, so an amount priced on it is refused."""
    pricing = job.spec.pricing
    if not isinstance(pricing, RateCardPrice) or job.rate_card is None:
        return  # a fixed or auction price does not pay by the GPU-hour
    gpus = job.lease.gpus if job.lease is not None else job.spec.resources.gpus
    bound = proof_bound_ms(
        timing, gpus=gpus, slack=ctx.metering_slack, allowance_ms=ctx.metering_allowance_ms
    )
    if bound is None or att.gpu_milliseconds <= bound:
        return
    try:
        cap = price_under(
            job.rate_card,
            max_amount=pricing.max_amount,
            worker_key=att.worker_key,
            gpu_model=att.gpu_model,
            gpu_milliseconds=bound,
        )
    except RateCardError as exc:  # pragma: no cover - price_cap refused it already
        raise _Rejected(Reason.AMOUNT_EXCEEDS_PRICE, f"nothing is payable: {exc}") from exc
    if att.amount > cap:
        raise _Rejected(
            Reason.GPU_TIME_EXCEEDS_PROOF,
            f"{att.gpu_milliseconds} GPU-ms attested, but the proof backs at most {bound} "
            f"({timing.committed_steps} committed steps at {timing.step_ms:.3f} ms per step "
            f"as replayed, x{ctx.metering_slack:g}, + {timing.startup_ms:.0f} ms start-up "
            f"+ {ctx.metering_allowance_ms} ms, on "
            f"{gpus} GPU(s)): at most {cap} is payable, not {att.amount}",
        )


def _auction_price(job: JobInfo, pricing: AuctionPrice, att: Attestation) -> int:
    """The clearing price, recomputed here from the signed bids the feed carries (each
    signature re-verified), for the worker that won, or for another bidder of the ranking
    whose attempt came after the winner lost one (a resumed auction job: its share of the
    segments it proved is capped in `_check_amount`)."""
    if job.auction is None:
        raise FeedDataError(f"the API feed carries no auction record for job {job.job_id}")
    try:
        outcome = clear(
            job_id=job.job_id,
            reserve=pricing.reserve,
            bids=job.auction.bids,
            commitments=job.auction.commitments,
        )
    except AuctionError as exc:
        raise _Rejected(Reason.AUCTION_NOT_WON, f"the auction record is invalid: {exc}") from exc
    if outcome.winner is None or outcome.price is None:
        raise _Rejected(Reason.AUCTION_NOT_WON, f"the auction has no winner: {outcome.reason}")
    if outcome.winner != att.worker_key:
        why = resume_checks.auction_fallback_refusal(att, job, outcome.winner, outcome.ranking)
        if why is not None:
            raise _Rejected(
                Reason.AUCTION_NOT_WON,
                f"worker {att.worker_key} did not win the auction ({outcome.winner} did) "
                f"and may not stand in for it: {why}",
            )
    return outcome.price


def _check_stop_claim(att: Attestation, job: JobInfo) -> None:
    """The attestation claims a stop (`Attestation.stop`) exactly when its lease was
    stopped for the job's fault, with the segments the API recorded at the stop."""
    stopped = stop_segments(att, job)
    claimed = None if att.stop is None else att.stop.segments
    if claimed != stopped:
        raise _Rejected(
            Reason.STOP_CLAIM_MISMATCH,
            f"the attestation claims {'no stop' if claimed is None else f'a stop at {claimed}'}"
            f" segment(s); the lease was "
            f"{'not stopped for the job fault' if stopped is None else f'stopped at {stopped}'}",
        )


def _stop_evidence(att: Attestation, job: JobInfo) -> StopEvidence:
    """What justifies paying `att` as a stopped lease: the quorum's signed verdicts, the
    spec and the segments at the stop (`proofnet.messages.stop_evidence`). A feed that
    carries no verdicts is retried: the settlement could not show why it pays a part."""
    lease, stop = job.lease, att.stop
    assert lease is not None and lease.stop is not None and stop is not None
    if not lease.stop.verdicts:
        raise FeedDataError(f"the API feed carries no verdicts of job {job.job_id}'s stop")
    return StopEvidence(
        spec=job.spec.canonical_bytes().decode("utf-8"),
        segments=stop.segments,
        verdicts=lease.stop.verdicts,
    )


def _check_amount(att: Attestation, job: JobInfo, unit: Unit | None = None) -> None:
    if unit is not None:
        # A unit is paid its planned amount at most, whatever the job's total price.
        units.check_amount(att, unit)
        return
    cap = price_cap(job, att)
    first = resume_checks.own_first_segment(att, job)
    stopped = stop_segments(att, job)
    if stopped is not None:
        # Stopped for the job's fault: paid for the segments committed by the stop (and the
        # grace segment), however long it trained on after it.
        share = stopped_share(job.spec, cap, first, stopped)
        if att.amount > share:
            raise _Rejected(
                Reason.AMOUNT_EXCEEDS_PRICE,
                f"amount {att.amount} exceeds {share}, the share of the job's price {cap} for "
                f"the {stopped} segment(s) committed when the lease was stopped for the "
                f"job's fault (+{STOP_GRACE_SEGMENTS} grace)",
            )
        return
    if first > 1:
        # A resumed attempt is paid for the segments it proved, never the earlier ones.
        share = segment_cap(job.spec, cap, first)
        if att.amount > share:
            raise _Rejected(
                Reason.AMOUNT_EXCEEDS_PRICE,
                f"amount {att.amount} exceeds {share}, this attempt's share of the job's price "
                f"{cap} for the segments it proved ({first}.. of the schedule; the ones "
                "before are the attempt's it resumed)",
            )
        return
    if att.amount > cap:
        raise _Rejected(
            Reason.AMOUNT_EXCEEDS_PRICE, f"amount {att.amount} exceeds the job's price {cap}"
        )


def _check_results(att: Attestation, job: JobInfo) -> None:
    uploads = job.results
    for name, digest in att.result_hashes.items():
        stored = uploads.get(name)
        if stored is None:
            raise _Rejected(
                Reason.RESULT_HASHES_MISMATCH, f"result {name!r} was never uploaded to the API"
            )
        if stored != digest:
            raise _Rejected(
                Reason.RESULT_HASHES_MISMATCH, f"result {name!r} differs from the uploaded file"
            )
    # Proof-of-training files are uploaded alongside and checked by the spot check.
    extra = sorted(
        n for n in uploads if n not in att.result_hashes and not n.startswith(POT_PREFIX)
    )
    if extra:
        raise _Rejected(
            Reason.RESULT_HASHES_MISMATCH, f"uploaded results missing from the attestation: {extra}"
        )
