"""The checks `oracle.verification.verify` adds for an attestation of one unit of a topology job.

A unit is paid by the plan (`proofnet.messages.topology.plan`), not by the API's word: its
index and kind must be planned, its amount at most the unit's planned amount, and its
lease, uploads and output those the feed reports for that unit. Its `inputs` must be the
`output`s of the attestations this oracle itself verified for the unit's planned input
units, in plan order: a relay stage's attestation chains to the previous stages' final
checkpoints. While an input unit has no verified attestation here, the check cannot be made
yet and the verification is retried (`UnitsPending`); it is never rejected for that. Node
units of one cluster run must all attest the same output.

A node's completion stands only for its cluster attempt: when the attempt fails after a node
completed, the API queues every node again. A payable attestation of such a superseded
lease does not turn away the attestation of the lease that now stands: that one waits
(`check_superseded`) until the settlement releases the stale one when the job is over
(`oracle.settlement.readiness`).

Failures raise `UnitRejected` with a stable reason code (the values are members of
`oracle.verification.verify.Reason`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from oracle.inputs.feed import JobInfo
from proofnet.messages.attestation import Attestation
from proofnet.messages.topology import Relay, Unit, plan, total_amount

UNIT_MISSING = "unit_missing"
UNIT_UNEXPECTED = "unit_unexpected"
UNIT_NOT_PLANNED = "unit_not_planned"
UNIT_NOT_COMPLETED = "unit_not_completed"
UNIT_OUTPUT_MISMATCH = "unit_output_mismatch"
UNIT_CHAIN_BROKEN = "unit_chain_broken"
NODE_OUTPUT_DISAGREES = "node_output_disagrees"
# A drawn verifier recomputed an aggregation or evaluation unit to another output or metric.
UNIT_RECOMPUTE_MISMATCH = "unit_recompute_mismatch"
# Set by the settlement on a verified attestation whose lease the API no longer counts.
LEASE_SUPERSEDED = "lease_superseded"
AMOUNT_EXCEEDS_PRICE = "amount_exceeds_price"
AMOUNT_EXCEEDS_BUDGET = "amount_exceeds_budget"

CHECKPOINT_RESULT_PREFIX = "checkpoint/"


class UnitRejected(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class UnitsPending(Exception):
    """An input unit's attestation is not verified here yet: verify again later."""


@dataclass(frozen=True)
class PayableUnit:
    """A unit attestation the store holds as payable (verified, batched or settled)."""

    attestation_id: int
    status: str
    output: str | None
    nonce: str | None = None  # its lease's nonce (None when not known)


def attested_nonce(cose: bytes) -> str | None:
    """The nonce a stored attestation attests (its payload, without verifying again)."""
    import json

    import cbor2

    try:
        message = cbor2.loads(cose)
        message = message.value if isinstance(message, cbor2.CBORTag) else message
        nonce = json.loads(message[2])["nonce"]
    except Exception:  # stored rows were authenticated; garbage here means no answer
        return None
    return nonce if isinstance(nonce, str) else None


def planned_unit(att: Attestation, job: JobInfo) -> Unit | None:
    """The planned unit `att` attests (None for a single-unit job)."""
    topology = job.spec.topology
    if topology is None:
        if att.unit is not None:
            raise UnitRejected(
                UNIT_UNEXPECTED,
                f"job {job.job_id} has no topology, but the attestation names unit "
                f"{att.unit.index}",
            )
        return None
    if att.unit is None:
        raise UnitRejected(
            UNIT_MISSING, f"job {job.job_id} is split into units; the attestation names none"
        )
    unit = next((u for u in plan(topology) if u.index == att.unit.index), None)
    if unit is None or unit.kind != att.unit.kind:
        planned = "not planned" if unit is None else f"planned as {unit.kind}"
        raise UnitRejected(
            UNIT_NOT_PLANNED,
            f"unit {att.unit.index} ({att.unit.kind}) is {planned} in job {job.job_id}",
        )
    return unit


def escrow_covers_plan(att: Attestation, job: JobInfo, datum_budget: int, locked: int) -> None:
    """The escrow must hold what paying every planned unit costs: unit claims of one escrow
    are settled together, and one that could not all be paid would pay none."""
    assert job.spec.topology is not None
    total = total_amount(job.spec.topology)
    if datum_budget < total or locked < total:
        ref = att.domain.escrow
        raise UnitRejected(
            AMOUNT_EXCEEDS_BUDGET,
            f"escrow {ref.tx_id}#{ref.index} (budget {datum_budget}, locked {locked}) does not "
            f"cover the job's {total} for all of its units",
        )


def unit_scope(job: JobInfo, unit: Unit) -> JobInfo:
    """The job as the lease, upload and proof checks see one unit: the unit's completing
    lease and its uploads in place of the job's."""
    info = job.unit(unit.index)
    if info is None or not info.completed or info.lease is None:
        status = "unknown to the API" if info is None else info.status
        raise UnitRejected(
            UNIT_NOT_COMPLETED, f"unit {unit.index} of job {job.job_id} is {status}, not completed"
        )
    return dataclasses.replace(job, status="completed", lease=info.lease, results=info.results)


def check_superseded(
    att: Attestation,
    job: JobInfo,
    unit: Unit,
    payable: Mapping[int, PayableUnit],
    own_id: int | None,
) -> None:
    """Wait (do not reject) when this unit's payable attestation belongs to a lease the API
    no longer counts and `att` belongs to the one it does."""
    info = job.unit(unit.index)
    held = payable.get(unit.index)
    if info is None or info.lease is None or held is None or held.attestation_id == own_id:
        return
    if held.nonce is not None and held.nonce != info.lease.nonce and att.nonce == info.lease.nonce:
        raise UnitsPending(
            f"unit {unit.index}'s payable attestation {held.attestation_id} is of a superseded "
            "lease; it is released when the job is over"
        )


def check_amount(att: Attestation, unit: Unit) -> None:
    if att.amount > unit.amount:
        raise UnitRejected(
            AMOUNT_EXCEEDS_PRICE,
            f"amount {att.amount} exceeds unit {unit.index}'s planned amount {unit.amount}",
        )


def check_output(att: Attestation, job: JobInfo, unit: Unit) -> None:
    """The attested output is the checkpoint the API recorded for the unit (and uploaded)."""
    work = att.unit
    info = job.unit(unit.index)
    assert work is not None and info is not None
    if unit.produces_checkpoint and work.output is None:
        raise UnitRejected(
            UNIT_OUTPUT_MISMATCH, f"unit {unit.index} ({unit.kind}) must attest its checkpoint"
        )
    if unit.kind == "eval" and work.output is not None:
        raise UnitRejected(UNIT_OUTPUT_MISMATCH, "an evaluation produces no checkpoint")
    topology = job.spec.topology
    if unit.kind == "eval" and isinstance(topology, Relay) and topology.evaluation is not None:
        # The pipeline went on (or stopped) on the metric the API recorded: the attested one
        # (which a verifier recomputes) must be that one.
        metric = topology.evaluation.metric
        if att.metrics.get(metric) != info.metrics.get(metric):
            raise UnitRejected(
                UNIT_OUTPUT_MISMATCH,
                f"unit {unit.index} attests {metric}={att.metrics.get(metric)}, but reported "
                f"{info.metrics.get(metric)} to the API, which gated the pipeline on it",
            )
    if work.output != info.output:
        raise UnitRejected(
            UNIT_OUTPUT_MISMATCH,
            f"attested output {work.output} of unit {unit.index} is not the checkpoint the API "
            f"recorded ({info.output})",
        )
    if isinstance(topology, Relay) and unit.produces_checkpoint:
        name = CHECKPOINT_RESULT_PREFIX + topology.checkpoint
        attested = att.result_hashes.get(name)
        if attested is not None and attested != work.output:
            raise UnitRejected(
                UNIT_OUTPUT_MISMATCH,
                f"the attested upload {name!r} is not the attested output {work.output}",
            )


def current(job: JobInfo, index: int, held: PayableUnit) -> bool:
    """Whether `held` belongs to the lease the API counts for unit `index` now."""
    info = job.unit(index)
    if info is None or info.lease is None or held.nonce is None:
        return True  # nothing says otherwise
    return held.nonce == info.lease.nonce


def check_chain(
    att: Attestation, job: JobInfo, unit: Unit, payable: Mapping[int, PayableUnit]
) -> None:
    """`payable`: this escrow's payable unit attestations in the oracle's own store."""
    work = att.unit
    assert work is not None
    outputs: list[str | None] = []
    for position, source in enumerate(unit.inputs):
        held = payable.get(source)
        if held is None:
            raise UnitsPending(
                f"input {position} of unit {unit.index} is unit {source}'s checkpoint, and no "
                f"attestation of unit {source} is verified yet"
            )
        outputs.append(held.output)
    if tuple(work.inputs) != tuple(outputs):
        raise UnitRejected(
            UNIT_CHAIN_BROKEN,
            f"unit {unit.index} attests inputs {list(work.inputs)}, but the verified "
            f"attestations of its input units {list(unit.inputs)} produced {outputs}",
        )
    if unit.kind == "node":
        for other, held in sorted(payable.items()):
            if other == unit.index or not current(job, other, held):
                continue  # a node of a failed cluster attempt is not of this run
            if held.output != work.output:
                raise UnitRejected(
                    NODE_OUTPUT_DISAGREES,
                    f"node {unit.index} attests output {work.output}, node {other}'s verified "
                    f"attestation {held.output}",
                )
