"""Why the oracle rejects an attestation (`Reason`, stable codes clients match on) and whose
fault each rejection is. Its own module so every stage of verification (the pipeline, the
spot checks, the unit checks) names reasons without importing the pipeline.
"""

from __future__ import annotations

from enum import StrEnum

from oracle.verification import lost_attempts, resume_checks
from oracle.verification import unit_checks as units
from proofnet.messages.verification import Fault


class Reason(StrEnum):
    """Why an attestation was rejected. Stable: clients and dashboards match on these."""

    MALFORMED = "malformed"
    UNKNOWN_VERSION = "unknown_version"
    BAD_SIGNATURE = "bad_signature"
    WRONG_DOMAIN = "wrong_domain"
    WRONG_NETWORK = "wrong_network"
    WRONG_SCRIPT = "wrong_script"
    WORKER_UNREGISTERED = "worker_unregistered"
    PAYOUT_MISMATCH = "payout_mismatch"
    JOB_UNKNOWN = "job_unknown"
    ESCROW_UNRECORDED = "escrow_unrecorded"
    ESCROW_MISMATCH = "escrow_mismatch"
    ESCROW_MISSING = "escrow_missing"
    ESCROW_SPENT = "escrow_spent"
    ESCROW_WRONG_ADDRESS = "escrow_wrong_address"
    ESCROW_DATUM_INVALID = "escrow_datum_invalid"
    ESCROW_JOB_MISMATCH = "escrow_job_mismatch"
    ESCROW_WRONG_UNIT = "escrow_wrong_unit"
    ESCROW_WRONG_BATCH = "escrow_wrong_batch"
    ESCROW_EXPIRED = "escrow_expired"
    ESCROW_CANCELLED = "escrow_cancelled"
    ESCROW_WRONG_CONFIG = "escrow_wrong_config"
    ESCROW_WRONG_ORACLE_SET = "escrow_wrong_oracle_set"
    ESCROW_STRAY_TOKENS = "escrow_stray_tokens"
    ESCROW_SUBMITTER_MISMATCH = "escrow_submitter_mismatch"
    ESCROW_DEADLINE_TOO_NEAR = "escrow_deadline_too_near"
    REPLAYED = "replayed"
    ALREADY_SETTLED = "already_settled"
    ESCROW_ALREADY_CLAIMED = "escrow_already_claimed"
    JOB_NOT_COMPLETED = "job_not_completed"
    LEASE_OTHER_WORKER = "lease_other_worker"
    NONCE_MISMATCH = "nonce_mismatch"
    TIMES_OUTSIDE_LEASE = "times_outside_lease"
    GPU_TIME_IMPLAUSIBLE = "gpu_time_implausible"
    # Rate-card GPU time beyond what the proof's committed steps back (oracle.metering).
    GPU_TIME_EXCEEDS_PROOF = "gpu_time_exceeds_proof"
    # A rate-card attestation naming a GPU model none of the lease's checked GPUs had.
    GPU_MODEL_UNCHECKED = "gpu_model_unchecked"
    IMAGE_MISMATCH = "image_mismatch"
    COMMAND_MISMATCH = "command_mismatch"
    AMOUNT_EXCEEDS_PRICE = "amount_exceeds_price"
    # The attestation's stop claim (`Attestation.stop`) is not the lease's recorded stop.
    STOP_CLAIM_MISMATCH = "stop_claim_mismatch"
    # An auction-priced job: the attesting worker did not win its auction (or none did).
    AUCTION_NOT_WON = "auction_not_won"
    AMOUNT_EXCEEDS_BUDGET = "amount_exceeds_budget"
    RESULT_HASHES_MISMATCH = "result_hashes_mismatch"
    POT_MISSING = "pot_missing"
    POT_INVALID = "pot_invalid"
    POT_ROOT_MISMATCH = "pot_root_mismatch"
    # The proof against the spec's schedule (oracle.proof_checks, pot.conformance).
    POT_NO_SCHEDULE = "pot_no_schedule"
    POT_SCHEDULE_MISMATCH = "pot_schedule_mismatch"
    POT_STEPS_OUT_OF_ORDER = "pot_steps_out_of_order"
    POT_DATA_ORDER_MISMATCH = "pot_data_order_mismatch"
    POT_INITIAL_STATE_MISMATCH = "pot_initial_state_mismatch"
    # A resumed attempt's proof does not start from the checkpoint the lost attempt
    # committed (oracle.verification.resume_checks): a forged checkpoint, another step.
    POT_RESUME_MISMATCH = resume_checks.POT_RESUME_MISMATCH
    # The segments an attempt of a resumed job names are not the ones it proved, or a
    # resumed attempt names none (oracle.verification.resume_checks, .lost_attempts).
    SEGMENTS_MISMATCH = resume_checks.SEGMENTS_MISMATCH
    # A claim for segments of an attempt the API does not list as lost.
    ATTEMPT_NOT_LOST = lost_attempts.ATTEMPT_NOT_LOST
    SPOT_CHECK_FAILED = "spot_check_failed"
    # A cluster node's proof (oracle.verification.cluster_checks): its shard indices are not
    # the seed-derived ones for its rank, or it commits other nodes' nonces than the
    # cluster attempt's leases.
    NODE_SHARD_MISMATCH = "node_shard_mismatch"
    NODE_NONCES_MISMATCH = "node_nonces_mismatch"
    # A disputed segment (oracle.verification.referee): two verifiers agree it does not
    # reach its commitment and the provider's own sandbox replay says it does. The
    # provider's fault, a fraud a bond pays for, but never to the submitter (whose job
    # code may be what departs on the verifiers): the slash burns.
    REFEREED_REPLAY_FAILED = "refereed_replay_failed"
    # A disputed segment the provider conceded (or did not answer for in time), or that the
    # two verifiers replayed differently: nothing is proven either way. Outcome
    # "unproven": the provider is unpaid and not slashed, the results are withheld from
    # the submitter and the escrow refunds.
    REPLAY_UNPROVEN = "replay_unproven"
    # The replay ran but crashed or printed no report: the proof is not confirmed (the
    # provider is not paid), yet nothing shows a committed segment to be false, so it is no
    # fraud a bond pays for (a crash can be the job's code, or the verifier's machine).
    REPLAY_ERROR = "replay_error"
    # Verification units (oracle.verifiers): the provider withheld the proof files a drawn
    # verifier needs; the job's code cannot be replayed (the job's fault, not the provider's).
    POT_WITHHELD = "pot_withheld"
    JOB_NOT_REPLAYABLE = "job_not_replayable"
    # Units of topology jobs (oracle.unit_checks).
    UNIT_MISSING = units.UNIT_MISSING
    UNIT_UNEXPECTED = units.UNIT_UNEXPECTED
    UNIT_NOT_PLANNED = units.UNIT_NOT_PLANNED
    UNIT_NOT_COMPLETED = units.UNIT_NOT_COMPLETED
    UNIT_OUTPUT_MISMATCH = units.UNIT_OUTPUT_MISMATCH
    UNIT_CHAIN_BROKEN = units.UNIT_CHAIN_BROKEN
    NODE_OUTPUT_DISAGREES = units.NODE_OUTPUT_DISAGREES
    UNIT_RECOMPUTE_MISMATCH = units.UNIT_RECOMPUTE_MISMATCH
    LEASE_SUPERSEDED = units.LEASE_SUPERSEDED


# Rejections that are the job's (its submitter's) doing, not the provider's: the job's
# escrow is not there or cannot pay, or the job's code cannot be replayed. Every other
# rejection is the provider's: its attestation or proof does not hold.
JOB_FAULTS = frozenset(
    {
        Reason.ESCROW_UNRECORDED,
        Reason.ESCROW_MISSING,
        Reason.ESCROW_CANCELLED,
        Reason.ESCROW_DATUM_INVALID,
        Reason.ESCROW_WRONG_ADDRESS,
        Reason.ESCROW_JOB_MISMATCH,
        Reason.ESCROW_WRONG_CONFIG,
        Reason.ESCROW_STRAY_TOKENS,
        Reason.ESCROW_SUBMITTER_MISMATCH,
        Reason.JOB_NOT_REPLAYABLE,
    }
)


def fault_of(reason: Reason) -> Fault:
    """Whose fault a rejection is (see `JOB_FAULTS`)."""
    return "job" if reason in JOB_FAULTS else "provider"
