"""Spot checks as verification units: the oracle draws, a verifier replays, the oracle judges.

The oracle runs no job code. For an attestation with a proof of training it checks the
uploaded manifest against the attested root and the spec's schedule (`oracle.verification.proof_checks`,
no code), then draws with its own signature over the attestation (randomness the provider
could not know when it signed) both the segments to replay and a verifier: one of the
online registered workers with the device class the proof was made on, other than the
provider and not paid to its address (`proofnet.messages.verification.draw_verifier`). It
signs a `VerificationTask` and posts it to the API, which relays it to that verifier; for a
sealed job it also asks the provider, through the API, to grant the verifier the keys of
the task's files (`proofnet.messages.key_grant`). Until the verifier's signed report is
back, the verification is postponed ("retry").

The verifier replays the segments with the network's harness in the job's own image under
its hardened container runtime (`worker.verifier`) and signs the hashes it computed. The
oracle checks the report's signature against the drawn verifier's key (the API relays it
and could otherwise make one up) and judges it against its own copy of the manifest
(`oracle.verification.spotcheck.judge`), attributing the fault (`attribute`):

- the job's, when the job's trainer cannot be loaded by the harness at the pinned commit,
  or when two replays of the first segment from the same checkpoint disagree (the job's
  code is not deterministic, so no proof of it can be checked): the provider is paid what
  it attested (its time, under the job's price) and the submitter gets the results;
- the provider's, when any drawn segment does not replay to its commitment, checkpoint 0
  is not what the trainer builds, or the provider withheld the files the verifier needs.

Every co-signer draws for itself with its own key, so each oracle's verdict rests on a
verifier it chose. Reads and writes through the feed only; runs nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from oracle.verification.proof_checks import (
    TOP_BY_NORM,
    Draw,
    ProofRejected,
    Sign,
    check_manifest,
    draw_segments,
)
from oracle.verification.resume_checks import own_first_segment
from oracle.verification.spotcheck import (
    POT_PREFIX,
    SpotCheckUnavailable,
    SpotCheckVerdict,
    judge,
    needed_files,
    replay_timing,
)
from oracle.verification.unit_checks import CHECKPOINT_RESULT_PREFIX
from pot.manifest import MANIFEST_NAME, Manifest, ProofError
from pot.seeds import draw_message, draw_seed
from proofnet.messages.key_grant import KeyRequest
from proofnet.messages.topology import Relay, Unit
from proofnet.messages.verification import (
    CPU,
    FIRST_SEGMENT,
    TaskKind,
    VerificationError,
    VerificationReport,
    VerificationTask,
    draw_verifier,
)
from proofnet.messages.verification_fee import FeeEvidence

if TYPE_CHECKING:
    from nacl.signing import SigningKey

    from oracle.inputs.feed import JobInfo
    from proofnet.messages.attestation import Attestation

log = logging.getLogger("oracle.verifiers")


@dataclass(frozen=True)
class Candidate:
    worker_key: str
    payout_address: str


class VerifierDesk(Protocol):
    """What drawing and hearing from verifiers needs of the API (`HttpApiFeed`)."""

    def artifact(self, job_id: str, name: str) -> bytes: ...

    def worker_payout(self, worker_key: str) -> str | None: ...

    def verifier_candidates(self, device_class: str, exclude: str) -> list[Candidate]: ...

    def post_verification(self, task: VerificationTask) -> dict[str, Any]: ...

    def request_keys(self, request: KeyRequest) -> int: ...


def device_class(att: Attestation, job: JobInfo) -> str:
    """Which workers can replay a proof bit for bit: those with the GPU model it was made
    on, or any worker for a job that leased no GPU."""
    return CPU if job.spec.resources.gpus == 0 else att.gpu_model


def _sealed(job: JobInfo) -> bool:
    return job.sealed


def report_as_harness_json(report: VerificationReport) -> dict[str, Any]:
    """A verifier's report in the shape the harness prints (what `judge` reads)."""
    return {
        "status": report.status,
        "message": report.message,
        "initial_weights_hash": report.initial_weights_hash,
        "results": [r.model_dump(mode="json") for r in report.results],
        "verifier": report.verifier,
        "repeat": None if report.repeat is None else report.repeat.model_dump(mode="json"),
    }


def attribute(report: VerificationReport) -> str | None:
    """Why the job (not the provider) is at fault, or None: see the module doc."""
    if report.status == "usage_error":
        return f"the job's trainer cannot be loaded by the harness: {report.message[:500]}"
    repeat = report.repeat
    first = next(
        (r for r in report.results if repeat is not None and r.segment == repeat.segment), None
    )
    if first is not None and repeat is not None and first.weights_hash != repeat.weights_hash:
        return (
            "the job's code is not deterministic: two replays of the first segment from the "
            f"same checkpoint gave {first.weights_hash[:16]}... and {repeat.weights_hash[:16]}..."
        )
    return None


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class VerifierSpotChecker:
    """Spot checks run by drawn verifiers (the oracle's only checker outside the demo)."""

    desk: VerifierDesk
    signing_key: SigningKey
    top: int = TOP_BY_NORM
    # A drawn verifier that has not answered this long after the task was first posted is
    # replaced by the next round's draw, at most `max_rounds` verifiers in all.
    answer_within_s: float = 3600.0
    max_rounds: int = 3
    now: Callable[[], datetime] = field(default=_now)

    @property
    def sign(self) -> Sign:
        return lambda message: self.signing_key.sign(message).signature

    def check(self, att: Attestation, job: JobInfo) -> SpotCheckVerdict:
        from oracle.inputs.feed import ArtifactMissing, FeedError
        from oracle.inputs.feed_units import unit_result_name
        from oracle.verification.verify import Reason

        spec = job.spec
        prefix = POT_PREFIX if att.unit is None else unit_result_name(att.unit.index, POT_PREFIX)
        try:
            raw = self.desk.artifact(job.job_id, prefix + MANIFEST_NAME)
        except ArtifactMissing:
            return SpotCheckVerdict(False, Reason.POT_MISSING, "no pot/manifest.json uploaded")
        except FeedError as exc:
            raise SpotCheckUnavailable(str(exc)) from exc
        try:
            manifest = Manifest.from_bytes(raw)
            check_manifest(manifest, att, spec)
        except ProofError as exc:
            return SpotCheckVerdict(False, Reason.POT_INVALID, str(exc))
        except ProofRejected as exc:
            return SpotCheckVerdict(False, exc.reason, exc.message)
        if spec.proof.trainer is None:
            return SpotCheckVerdict(
                False,
                Reason.SPOT_CHECK_FAILED,
                "the spec names no trainer (proof.trainer): no segment can be replayed",
            )
        # A resumed attempt answers for its own segments: the draw and the repeated first
        # segment are among them (oracle.verification.resume_checks).
        first = FIRST_SEGMENT if att.unit is not None else own_first_segment(att, job)
        draw = draw_segments(manifest, att, spec, self.sign, top=self.top, first=first)
        segments = tuple(sorted({first, *draw.segments}))
        draw = replace(draw, segments=segments)
        # The manifest too: the harness checks the files against it, and it against the root.
        files = tuple(prefix + n for n in (MANIFEST_NAME, *needed_files(segments)))
        task, report, payout = self._await_report(
            att, job, "replay", segments, files, (), draw.signature, draw.seed
        )
        verdict = judge_report(report, manifest, draw, spec.proof.tolerance_ppm, att)
        return with_fee_evidence(verdict, task, report, payout)

    def _await_report(
        self,
        att: Attestation,
        job: JobInfo,
        kind: TaskKind,
        segments: tuple[int, ...],
        files: tuple[str, ...],
        inputs: tuple[str, ...],
        draw_signature: bytes,
        seed: bytes,
    ) -> tuple[VerificationTask, VerificationReport, str]:
        """Draw a verifier (the next round's when one stays silent), post its task and
        return it with its checked report and the verifier's registered payout address;
        SpotCheckUnavailable while there is none yet."""
        from oracle.inputs.feed import FeedError

        devices = device_class(att, job)
        try:
            payout = self.desk.worker_payout(att.worker_key)
            found = [
                c
                for c in self.desk.verifier_candidates(devices, att.worker_key)
                if c.worker_key != att.worker_key and c.payout_address != payout
            ]
        except FeedError as exc:
            raise SpotCheckUnavailable(str(exc)) from exc
        if not found:
            raise SpotCheckUnavailable(
                f"no online verifier with device class {devices!r} other than the provider"
            )
        what = f"replay segments {list(segments)}" if kind == "replay" else f"recompute ({kind})"
        now = self.now()
        drawn: list[str] = []
        first: datetime | None = None
        for round_ in range(self.max_rounds):
            left = [c.worker_key for c in found if c.worker_key not in drawn]
            if not left:
                break
            verifier = draw_verifier(left, seed, round_)
            drawn.append(verifier)
            task = self._task(
                att, job, devices, kind, segments, files, inputs, draw_signature, verifier, round_
            )
            state = self._post(task, att, job, files)
            if state.get("report") is not None:
                try:
                    report = VerificationReport.from_json(state["report"])
                    report.verify_for(task)
                except VerificationError as exc:
                    # Not the drawn verifier's answer (the API relays it): wait for one.
                    log.warning("ignoring a report for task %s: %s", task.digest, exc)
                    raise SpotCheckUnavailable(f"the relayed report does not hold: {exc}") from exc
                payout = next(c.payout_address for c in found if c.worker_key == verifier)
                return task, report, payout
            # Round r's verifier has until (r + 1) answer periods after the first task.
            posted = _time(state.get("created_at"))
            first = posted if first is None else first
            if first is None or (now - first).total_seconds() < (round_ + 1) * self.answer_within_s:
                raise SpotCheckUnavailable(
                    f"waiting for verifier {verifier[:16]}... to {what}"
                    + (f" (round {round_})" if round_ else "")
                )
            log.info("verifier %s did not answer task %s in time", verifier[:16], task.digest)
        raise SpotCheckUnavailable(
            f"none of the {len(drawn)} verifier(s) drawn answered within {self.answer_within_s:.0f}s"
        )

    def check_unit(self, att: Attestation, job: JobInfo, unit: Unit) -> SpotCheckVerdict:
        """Recompute an aggregation or an evaluation unit by a drawn verifier from the
        unit's input checkpoints (`att.unit.inputs`, already chained to the verified
        outputs of its input units by `oracle.verification.unit_checks.check_chain`)."""
        from oracle.inputs.feed_units import unit_result_name

        topology = job.spec.topology
        work = att.unit
        assert isinstance(topology, Relay) and work is not None
        kind: TaskKind = "aggregate" if unit.kind == "aggregate" else "eval"
        name = CHECKPOINT_RESULT_PREFIX + topology.checkpoint
        files = tuple(unit_result_name(i, name) for i in unit.inputs)
        signature = self.sign(draw_message(att.leaf_hash()))
        seed = draw_seed(signature)
        task, report, payout = self._await_report(
            att, job, kind, (), files, tuple(work.inputs), signature, seed
        )
        verdict = judge_recomputation(report, att, job, kind, signature.hex())
        return with_fee_evidence(verdict, task, report, payout)

    def _task(
        self,
        att: Attestation,
        job: JobInfo,
        devices: str,
        kind: TaskKind,
        segments: tuple[int, ...],
        files: tuple[str, ...],
        inputs: tuple[str, ...],
        draw_signature: bytes,
        verifier: str,
        round_: int,
    ) -> VerificationTask:
        try:
            return VerificationTask.sign(
                self.signing_key,
                job_id=job.job_id,
                nonce=att.nonce,
                unit=None if att.unit is None else att.unit.index,
                attestation=att.leaf_hash().hex(),
                pot_root=att.pot_root,
                provider=att.worker_key,
                verifier=verifier,
                device_class=devices,
                kind=kind,
                segments=list(segments),
                files=list(files),
                inputs=list(inputs),
                draw_signature=draw_signature.hex(),
                round=round_,
            )
        except VerificationError as exc:
            raise SpotCheckUnavailable(f"cannot make a verification task: {exc}") from exc

    def _post(
        self, task: VerificationTask, att: Attestation, job: JobInfo, files: tuple[str, ...]
    ) -> dict[str, Any]:
        """Post the task (again: the same unit), and for a sealed job the key request for
        its checkpoints (the manifest is not sealed); the unit's state."""
        from oracle.inputs.feed import FeedError

        try:
            if _sealed(job) and task.kind == "replay":
                # A unit's input checkpoints are never sealed: the next provider reads them.
                self.desk.request_keys(
                    KeyRequest.sign(
                        self.signing_key,
                        job_id=job.job_id,
                        nonce=att.nonce,
                        recipient=task.verifier,
                        # The checkpoints (the manifest is not sealed), as the lease named
                        # them (a relay stage's uploads are units/<index>/... to others).
                        files=[task.lease_name(f) for f in files[1:]],
                    )
                )
            return self.desk.post_verification(task)
        except FeedError as exc:
            raise SpotCheckUnavailable(str(exc)) from exc


# Where a verdict's report keeps the signed task and report a verification fee is paid on.
FEE_EVIDENCE = "fee_evidence"


def with_fee_evidence(
    verdict: SpotCheckVerdict,
    task: VerificationTask,
    report: VerificationReport,
    registered_payout: str,
) -> SpotCheckVerdict:
    """The verdict, carrying the evidence of the verifier's fee when it earned one: the
    oracle's verdict on its report passed and the report names the payout address the
    verifier registered (`proofnet.messages.verification_fee`). A report that does not
    match, or is not the job's proof of work, earns nothing."""
    if not verdict.passed or report.payout_address != registered_payout:
        if verdict.passed:
            log.info(
                "verifier %s named payout %s, not its registered %s: no fee",
                report.verifier[:16],
                report.payout_address,
                registered_payout,
            )
        return verdict
    details = dict(verdict.report or {})
    details[FEE_EVIDENCE] = FeeEvidence(task, report).to_json()
    return replace(verdict, report=details, verifier=report.verifier)


def fee_mismatch(
    evidence: FeeEvidence, att: Attestation, job: JobInfo, feed: VerifierDesk
) -> str | None:
    """Why a co-signer's own reading says the report a fee is paid on does not match the
    attestation's commitments, or None: a replay's hashes against the manifest this oracle
    fetches itself, an aggregation's checkpoint against the attested output, an
    evaluation's metric against the attested one within the spec's tolerance."""
    from oracle.inputs.feed import FeedError
    from oracle.inputs.feed_units import unit_result_name

    task, report = evidence.task, evidence.report
    if task.kind != "replay":
        work = att.unit
        if work is None:
            return "a recomputation pays a fee only on a unit"
        verdict = judge_recomputation(report, att, job, task.kind, task.draw_signature)
        return None if verdict.passed else verdict.message
    prefix = POT_PREFIX if att.unit is None else unit_result_name(att.unit.index, POT_PREFIX)
    try:
        manifest = Manifest.from_bytes(feed.artifact(job.job_id, prefix + MANIFEST_NAME))
    except (FeedError, ProofError) as exc:
        return f"this oracle cannot read the proof's manifest: {exc}"
    if any(not 0 < s < len(manifest.leaves) for s in task.segments):
        return "the task draws segments the manifest does not have"
    draw = Draw(bytes.fromhex(task.draw_signature), b"", task.segments)
    verdict = judge(
        report_as_harness_json(report),
        manifest,
        draw,
        job.spec.proof.tolerance_ppm,
        from_scratch=att.unit is None or not att.unit.inputs,
    )
    return None if verdict.passed else verdict.message


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def judge_report(
    report: VerificationReport, manifest: Manifest, draw: Any, tolerance_ppm: int, att: Attestation
) -> SpotCheckVerdict:
    """The verdict on a verifier's report, with whose fault it is."""
    from oracle.verification.verify import Reason

    seed, segments = draw.seed.hex(), draw.segments
    details = report_as_harness_json(report)
    details["draw_signature"] = draw.signature.hex()
    job_fault = attribute(report)
    if job_fault is not None:
        return SpotCheckVerdict(
            False, Reason.JOB_NOT_REPLAYABLE, job_fault, seed, segments, details, fault="job"
        )
    if report.status == "withheld":
        return SpotCheckVerdict(
            False,
            Reason.POT_WITHHELD,
            f"the verifier could not get the proof files: {report.message[:500]}",
            seed,
            segments,
            details,
            fault="provider",
        )
    from_scratch = att.unit is None or not att.unit.inputs
    verdict = judge(details, manifest, draw, tolerance_ppm, from_scratch=from_scratch)
    fault = None if verdict.passed else "provider"
    # The verifier's measured replay bounds a rate-card job's payable GPU time.
    timing = (
        None
        if report.replay_ms is None
        else replay_timing(manifest, draw.segments, report.replay_ms, report.repeat_ms)
    )
    return replace(verdict, report=details, verifier=report.verifier, fault=fault, timing=timing)


def judge_recomputation(
    report: VerificationReport, att: Attestation, job: JobInfo, kind: TaskKind, draw: str
) -> SpotCheckVerdict:
    """The verdict on a verifier's recomputation of an aggregation or evaluation unit.

    The job's code failing on the verifier (its command errs, writes nothing, or the
    aggregation does not reproduce itself) is the job's fault, as for a replay
    (`attribute`); a recomputed output that the provider's attested one is not is the
    provider's."""
    from oracle.verification.verify import Reason

    details = {
        "kind": kind,
        "status": report.status,
        "message": report.message,
        "output_hash": report.output_hash,
        "metric": report.metric,
        "verifier": report.verifier,
        "draw_signature": draw,
    }
    work = att.unit
    assert work is not None

    def verdict(
        passed: bool, reason: str | None, message: str, fault: str | None
    ) -> SpotCheckVerdict:
        return SpotCheckVerdict(
            passed, reason, message, report=details, verifier=report.verifier, fault=fault
        )

    if report.status == "withheld":
        # Input checkpoints are the API's uploads of verified units: not the provider's.
        raise SpotCheckUnavailable(f"the verifier could not get the inputs: {report.message[:200]}")
    if report.status != "passed":
        return verdict(
            False,
            Reason.JOB_NOT_REPLAYABLE,
            f"the job's {kind} command failed on the verifier: {report.message[:500]}",
            "job",
        )
    if kind == "aggregate":
        if report.output_hash is None:
            return verdict(
                False, Reason.JOB_NOT_REPLAYABLE, "the aggregation wrote no checkpoint", "job"
            )
        if report.output_hash != work.output:
            return verdict(
                False,
                Reason.UNIT_RECOMPUTE_MISMATCH,
                f"aggregation unit {work.index} attests output {work.output}, but its inputs "
                f"aggregate to {report.output_hash} (verifier {report.verifier[:16]}...)",
                "provider",
            )
        return verdict(True, None, "", None)
    topology = job.spec.topology
    assert isinstance(topology, Relay) and topology.evaluation is not None
    evaluation = topology.evaluation
    claimed = att.metrics.get(evaluation.metric)
    if report.metric is None:
        return verdict(
            False,
            Reason.JOB_NOT_REPLAYABLE,
            f"the evaluation reported no {evaluation.metric!r} on the verifier",
            "job",
        )
    if claimed is None or not evaluation.within_tolerance(claimed, report.metric):
        return verdict(
            False,
            Reason.UNIT_RECOMPUTE_MISMATCH,
            f"evaluation unit {work.index} attests {evaluation.metric}={claimed}, but the "
            f"verifier computed {report.metric} (tolerance {evaluation.metric_tolerance})",
            "provider",
        )
    return verdict(True, None, "", None)
