"""What an oracle checks of a proof of training without running job code.

Before any segment is replayed, the uploaded manifest must be the one the provider attested
(its root) and commit the schedule the spec declared (`pot.conformance`: the checkpoint
interval, the number of segments, the step of every checkpoint, and the data indices of
every segment recomputed from the job seed and the claim nonce). A spec without a schedule
cannot be checked, so its proof is refused: nothing ties it to an amount of training.

A partial proof (fewer segments than the schedule) is accepted for one lease only: one the
oracle quorum stopped for the job's fault (`stop_segments`, the segments its uploaded
prefix committed when the API stopped it, from the API's feed). It must then commit at
least those; it is paid for them plus a grace segment at most
(`proofnet.messages.segment_share.stopped_share`, checked with the amount). Otherwise a
provider could stop where it likes and claim a truncated schedule: `pot_schedule_mismatch`.

Then the segments to replay are drawn from all of them with randomness the provider could
not know when it signed: the oracle's Ed25519 signature over the attestation's leaf hash
(`pot.seeds.draw_message`), hashed into a seed. Ed25519 signs deterministically, so the
oracle cannot draw twice to pick its segments either, and anyone with its public key can
check a draw. Reads and writes nothing: callers pass the manifest and a signing function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from oracle.inputs.feed import JobInfo
from oracle.verification.reasons import Reason
from pot import conformance
from pot.manifest import Manifest
from pot.seeds import derive_data_seed, draw_message, draw_seed, select_spot_checks
from proofnet.messages.attestation import Attestation
from proofnet.messages.jobspec import JobSpec

# The segments with the largest committed update norm, replayed on top of the random picks.
TOP_BY_NORM = 2

Sign = Callable[[bytes], bytes]


class ProofRejected(Exception):
    """The proof is refused before any replay; `reason` is an `oracle.verification.verify.Reason`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _reason(kind: str) -> str:
    return {
        conformance.CHECKPOINT_INTERVAL: Reason.POT_SCHEDULE_MISMATCH,
        conformance.SEGMENT_COUNT: Reason.POT_SCHEDULE_MISMATCH,
        conformance.STEP_ORDER: Reason.POT_STEPS_OUT_OF_ORDER,
        conformance.DATA_SEED: Reason.POT_DATA_ORDER_MISMATCH,
        conformance.DATA_ORDER: Reason.POT_DATA_ORDER_MISMATCH,
    }[kind]


def check_manifest(
    manifest: Manifest, att: Attestation, spec: JobSpec, *, stop_segments: int | None = None
) -> None:
    """Raise `ProofRejected` unless `manifest` is the attested one and follows the spec's
    schedule under the attested nonce; a partial one only for a lease stopped for the job's
    fault with `stop_segments` committed (see the module doc)."""
    if manifest.root != att.pot_root:
        raise ProofRejected(
            Reason.POT_ROOT_MISMATCH,
            f"manifest root {manifest.root} is not the attested root {att.pot_root}",
        )
    schedule = spec.schedule
    if schedule is None:
        raise ProofRejected(
            Reason.POT_NO_SCHEDULE,
            "the spec declares no training schedule (proof.schedule): the proof cannot be "
            "tied to the training the job asked for",
        )
    data_seed = derive_data_seed(spec.seed, bytes.fromhex(att.nonce))
    partial = stop_segments is not None
    violation = conformance.check_conformance(manifest, schedule, data_seed, partial=partial)
    if violation is not None:
        raise ProofRejected(_reason(violation.kind), violation.message)
    if stop_segments is not None and manifest.segments < stop_segments:
        raise ProofRejected(
            Reason.POT_SCHEDULE_MISMATCH,
            f"the proof commits {manifest.segments} segments; the lease had committed "
            f"{stop_segments} when it was stopped",
        )


def stop_segments(att: Attestation, job: JobInfo) -> int | None:
    """The segments committed when the attested lease was stopped for the job's fault (what
    a partial proof must commit at least), or None when it was not: a whole proof is due."""
    if att.unit is not None:  # a unit of a split job is never stopped as a whole lease
        return None
    lease = job.lease
    if lease is None or lease.nonce != att.nonce:
        return None
    if lease.stop is None or not lease.stop.job_fault:
        return None
    return lease.stop.segments


@dataclass(frozen=True)
class Draw:
    """Which segments an oracle replays, and the signature that fixed them."""

    signature: bytes
    seed: bytes
    segments: tuple[int, ...]


def draw_segments(
    manifest: Manifest,
    att: Attestation,
    spec: JobSpec,
    sign: Sign,
    *,
    top: int = TOP_BY_NORM,
    first: int = 1,
) -> Draw:
    """The spec's `spot_checks` segments drawn at random from segments `first`.. (all of
    them unless the attempt resumed another: those before are the earlier attempt's), plus
    the `top` largest by committed update norm among them, from the oracle's signature over
    the attestation."""
    signature = sign(draw_message(att.leaf_hash()))
    seed = draw_seed(signature)
    picked = select_spot_checks(
        manifest.update_norms()[first - 1 :],
        seed=seed,
        random_count=spec.proof.spot_checks,
        top=top,
    )
    segments = tuple(s + first - 1 for s in picked)
    return Draw(signature=signature, seed=seed, segments=segments)
