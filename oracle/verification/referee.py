"""The referee of a disputed segment: what decides a replay that does not reach its
commitment, when the job's code may be what departs on the verifiers.

A submitter can write job code that computes one thing on the provider and another on a
verifier (keyed on its process's history, the files around it, the clock or the machine:
nothing a harness can hide). Judged at once, its honest provider would be rejected and
slashed while the submitter keeps the results and its money. So a drawn segment whose
replay does not reach its commitment (`DISPUTED`: the segment, or checkpoint 0, while the
first segment's two replays agreed, else the code is not deterministic and the job is at
fault) is disputed (`oracle.verification.verifiers.VerifierSpotChecker`):

1. a second verifier is drawn (another worker, key and payout address than the provider
   and the first verifier, seeded by `referee_seed`) and replays the same segments;
2. when it agrees with the first on the departure (`departure`, `same_departure`), the
   provider's worker is asked to replay the disputed segments in a verifier's exact
   sandbox (`proofnet.messages.dispute`: it commits to its hashes, then reveals them).

The verdict (`arbitrate`), the design's table:

| second verifier | provider's sandbox replay | verdict |
|---|---|---|
| reproduces the commitment | - | verified (the second verifier's report; the first earns nothing) |
| departs otherwise than the first | - | unproven, nobody's fault (the replays disagree across machines) |
| agrees with the first | agrees with them, another hash, no answer in time | unproven, the provider's: unpaid, not slashed |
| agrees with the first | reproduces the commitment | rejected, `refereed_replay_failed`: slashed, the share burnt |

Silence counts as conceding: the provider cannot stall the escrow past the window
(`dispute_within_s`: the setting `PROOFNET_ORACLE_DISPUTE_WITHIN_S`, an hour by default),
and no submitter can force a slash (a provider is slashed only on its own signed claim that
the sandbox reproduces what two verifiers did not). An answer that is neither the
commitment nor the verifiers' is a concession too, so no answer is better for the provider
than the truth. Pure functions over the reports and the relay's state; the
draw and the relay calls are the checker's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from oracle.verification.reasons import Reason
from oracle.verification.spotcheck import SpotCheckVerdict, segment_replays
from pot.manifest import Manifest
from proofnet.messages.dispute import (
    DisputeAnswer,
    DisputeCommitment,
    DisputeError,
    DisputeReveal,
    DisputeTask,
)

# Verdicts on a replay that are disputed before they are judged: computed hashes that are
# not the committed ones (a withheld file, a crash or nondeterminism are not disputes).
DISPUTED = frozenset({Reason.SPOT_CHECK_FAILED, Reason.POT_INITIAL_STATE_MISMATCH})
REFEREE_DRAW = b"proofnet/referee-draw/v1"
# Where a verdict's report keeps the dispute (both verifiers' reports, the provider's task
# and answer), for the audit and the attestation's page.
DISPUTE = "dispute"

Answer = Literal["reproduces", "concedes", "other", "silent"]


class DisputeDesk(Protocol):
    """The relay between the oracle and a disputed provider's worker (the API)."""

    def post_dispute(self, task: DisputeTask) -> dict[str, Any]:
        """Post `task` (again: the same dispute); its state: `commitment` and `reveal` (the
        provider's signed JSON, or None) and `created_at` (when first posted)."""
        ...


def disputable(verdict: SpotCheckVerdict) -> bool:
    """A verdict the referee decides, not the first verifier alone."""
    return not verdict.passed and verdict.fault == "provider" and verdict.reason in DISPUTED


def referee_seed(seed: bytes) -> bytes:
    """The second verifier's draw seed, from the first draw's (another stream of picks)."""
    return hashlib.sha256(REFEREE_DRAW + seed).digest()


@dataclass(frozen=True)
class Departure:
    """Where a replay did not reach the commitment, and what it computed there."""

    segments: tuple[tuple[int, str], ...]  # (segment, the weights hash computed), in order
    initial: str | None = None  # checkpoint 0 as built, when it is not the committed one

    @property
    def any(self) -> bool:
        return bool(self.segments) or self.initial is not None

    @property
    def disputed(self) -> tuple[int, ...]:
        return tuple(s for s, _ in self.segments)


def departure(
    report: Mapping[str, Any],
    manifest: Manifest,
    segments: tuple[int, ...],
    tolerance_ppm: int,
    *,
    from_scratch: bool,
) -> Departure:
    """Where the replay in `report` (harness JSON) departs from the manifest."""
    results = report.get("results")
    by_segment = {r.get("segment"): r for r in (results if isinstance(results, list) else [])}
    departed = []
    for s in segments:
        result = by_segment.get(s)
        if not segment_replays(result, manifest.leaves[s], tolerance_ppm):
            computed = result.get("weights_hash") if isinstance(result, Mapping) else None
            departed.append((s, str(computed)))
    initial = report.get("initial_weights_hash")
    bad_start = from_scratch and initial != manifest.leaves[0].weights
    return Departure(tuple(departed), str(initial) if bad_start else None)


def read_answer(task: DisputeTask, state: Mapping[str, Any]) -> DisputeAnswer | None:
    """The provider's answer to `task` in the relay's `state`: its reveal, when it opens a
    commitment the provider signed for this very task; None otherwise (not yet, or made up
    by someone else, or for another dispute)."""
    raw_commitment, raw_reveal = state.get("commitment"), state.get("reveal")
    if raw_commitment is None or raw_reveal is None:
        return None
    try:
        commitment = DisputeCommitment.from_json(raw_commitment)
        reveal = DisputeReveal.from_json(raw_reveal)
        reveal.opens(task, commitment)
    except DisputeError:
        return None
    return reveal.answer


def classify(
    answer: DisputeAnswer | None,
    verifiers: Departure,
    manifest: Manifest,
    tolerance_ppm: int,
) -> Answer:
    """What the provider's sandbox replay says of the disputed segments: it reproduces the
    commitment, it agrees with the verifiers (concedes), something else, or nothing."""
    if answer is None:
        return "silent"
    by_segment = {r.segment: r for r in answer.results}
    reproduced = answer.status in ("passed", "failed") and all(
        s in by_segment
        and segment_replays(
            by_segment[s].model_dump(mode="json"), manifest.leaves[s], tolerance_ppm
        )
        for s in verifiers.disputed
    )
    if verifiers.initial is not None:
        reproduced = reproduced and answer.initial_weights_hash == manifest.leaves[0].weights
    if reproduced:
        return "reproduces"
    conceded = all(
        s in by_segment and by_segment[s].weights_hash == computed
        for s, computed in verifiers.segments
    ) and (verifiers.initial is None or answer.initial_weights_hash == verifiers.initial)
    return "concedes" if conceded else "other"


def unproven(
    second: SpotCheckVerdict,
    message: str,
    fault: Literal["provider"] | None,
    details: dict[str, Any],
) -> SpotCheckVerdict:
    return SpotCheckVerdict(
        False,
        Reason.REPLAY_UNPROVEN,
        message,
        second.seed,
        second.segments,
        details,
        fault=fault,
        verifier=second.verifier,
        timing=second.timing,
    )


def arbitrate(
    answer: Answer, second: SpotCheckVerdict, verifiers: Departure, details: dict[str, Any]
) -> SpotCheckVerdict:
    """The verdict on a dispute both verifiers agree on, by the provider's answer."""
    where = f"segments {list(verifiers.disputed)}" + (
        " and checkpoint 0" if verifiers.initial is not None else ""
    )
    if answer == "reproduces":
        return SpotCheckVerdict(
            False,
            Reason.REFEREED_REPLAY_FAILED,
            f"two verifiers replayed {where} alike and not to the commitment, while the "
            "provider's own sandbox replay claims the commitment: the provider's fault "
            "(its bond is slashed, the share burnt, never paid to the submitter)",
            second.seed,
            second.segments,
            details,
            fault="provider",
            verifier=second.verifier,
            timing=second.timing,
        )
    said = {
        "concedes": "the provider's sandbox replay agrees with them",
        "other": "the provider's sandbox replay is neither the commitment nor theirs",
        "silent": "the provider did not answer the dispute in time",
    }[answer]
    return unproven(
        second,
        f"two verifiers replayed {where} alike and not to the commitment, and {said}: "
        "unproven (the provider is unpaid, not slashed; the results are withheld and the "
        "escrow refunds)",
        "provider",
        details,
    )
