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

from oracle.verification.cluster_checks import (
    CLUSTER_FILE,
    check_node_proof,
    judge_node_report,
    lease_nonces,
    node_fetcher,
)
from oracle.verification.proof_checks import (
    TOP_BY_NORM,
    Draw,
    ProofRejected,
    Sign,
    check_manifest,
    draw_segments,
    stop_segments,
)
from oracle.verification.referee import (
    DISPUTE,
    DisputeDesk,
    arbitrate,
    classify,
    departure,
    disputable,
    read_answer,
    referee_seed,
    unproven,
)
from oracle.verification.resume_checks import own_first_segment
from oracle.verification.spotcheck import (
    FAILED_SEGMENTS,
    POT_PREFIX,
    SpotCheckUnavailable,
    SpotCheckVerdict,
    judge,
    needed_files,
    read_claimed_prefix,
    replay_timing,
)
from oracle.verification.unit_checks import CHECKPOINT_RESULT_PREFIX
from pot.cluster import NodeProof
from pot.manifest import MANIFEST_NAME, Manifest, ProofError
from pot.seeds import draw_message, draw_seed
from proofnet.messages.dispute import DisputeError, DisputeTask
from proofnet.messages.key_grant import KeyRequest
from proofnet.messages.topology import MultiNode, Relay, Unit
from proofnet.messages.verification import (
    CPU,
    FIRST_SEGMENT,
    PREFIX_FILE,
    TaskKind,
    VerificationError,
    VerificationReport,
    VerificationTask,
    draw_verifier,
)
from proofnet.messages.verification_fee import FeeEvidence

if TYPE_CHECKING:
    from nacl.signing import SigningKey

    from oracle.inputs.feed import AttemptInfo, JobInfo
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


@dataclass(frozen=True)
class Subject:
    """What a verification task checks: an attestation's proof (`of`), or the committed
    prefix of a lease still training (an early task, `oracle.verification.early`)."""

    nonce: str
    provider: str  # the provider's worker key
    unit: int | None
    leaf: str  # the attestation's leaf (hex), or the early subject
    pot_root: str
    devices: str  # the device class verifiers need
    # The proof of a lease stopped for the job's fault: its manifest may be partial.
    partial: bool = False

    @classmethod
    def of(cls, att: Attestation, job: JobInfo) -> Subject:
        return cls(
            att.nonce,
            att.worker_key,
            None if att.unit is None else att.unit.index,
            att.leaf_hash().hex(),
            att.pot_root,
            device_class(att, job),
            stop_segments(att, job) is not None,
        )


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

    # Replays named segments by a drawn verifier (`check(..., segments=...)`): what a
    # proposer re-checking a co-signer's refusal uses (`oracle.settlement.quorum`).
    checks_named_segments = True

    desk: VerifierDesk
    signing_key: SigningKey
    top: int = TOP_BY_NORM
    # A drawn verifier that has not answered this long after the task was first posted is
    # replaced by the next round's draw, at most `max_rounds` verifiers in all (served:
    # `PROOFNET_ORACLE_VERIFIER_ANSWER_WITHIN_S`).
    answer_within_s: float = 3600.0
    max_rounds: int = 3
    now: Callable[[], datetime] = field(default=_now)
    # The verifiers drawn so far for a subject's task ((leaf, kind, segments, excluded
    # worker) -> one per round): kept for this process's life, so retries ask the same
    # verifier (await_report).
    _drawn: dict[tuple[str, str, tuple[int, ...], str], list[str]] = field(
        default_factory=dict, init=False, repr=False
    )
    # The relay to a disputed provider's worker (`oracle.verification.referee`); None when
    # the API relays no disputes: the provider cannot answer, so a dispute the second
    # verifier confirms is unproven (never a slash).
    disputes: DisputeDesk | None = None
    # How long a disputed provider has to commit to and reveal its sandbox replay, from
    # the dispute's first posting; silence after it counts as conceding (served:
    # `PROOFNET_ORACLE_DISPUTE_WITHIN_S`).
    dispute_within_s: float = 3600.0

    @property
    def sign(self) -> Sign:
        return lambda message: self.signing_key.sign(message).signature

    def check(
        self, att: Attestation, job: JobInfo, segments: tuple[int, ...] | None = None
    ) -> SpotCheckVerdict:
        """Replay the drawn segments by a drawn verifier (refereed when disputed); with
        `segments`, exactly those instead: a proposer re-checking the segments a
        co-signer's refusal named (`proofnet.messages.segment_refusal`). A provider-fault
        failure carries the signed task and report (`REFUSAL_EVIDENCE`)."""
        from oracle.inputs.feed import ArtifactMissing, FeedError
        from oracle.inputs.feed_units import unit_result_name
        from oracle.verification.reasons import Reason

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
            check_manifest(manifest, att, spec, stop_segments=stop_segments(att, job))
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
        if segments is None:
            segments = tuple(sorted({first, *draw.segments}))
        elif not segments or not all(first <= n <= manifest.segments for n in segments):
            return SpotCheckVerdict(
                False, Reason.POT_INVALID, f"segments {segments} are not the attempt's"
            )
        else:
            segments = tuple(sorted(set(segments)))
        draw = replace(draw, segments=segments)
        # The manifest too: the harness checks the files against it, and it against the root.
        files = tuple(prefix + n for n in (MANIFEST_NAME, *needed_files(segments)))
        task, report, payout = self.await_report(
            Subject.of(att, job), job, "replay", segments, files, (), draw.signature, draw.seed
        )
        verdict = judge_report(report, manifest, draw, spec.proof.tolerance_ppm, att)
        if disputable(verdict):
            refereed = self._referee(
                att, job, manifest, draw, files, (task, report, payout), verdict
            )
            return with_refusal_evidence(refereed, verdict, task, report)
        return with_fee_evidence(verdict, task, report, payout)

    def check_attempt(
        self, att: Attestation, job: JobInfo, attempt: AttemptInfo
    ) -> SpotCheckVerdict:
        """The spot check of a lost attempt's claim (`oracle.verification.lost_attempts`):
        the prefix it committed follows the schedule's data order under its nonce; a drawn
        verifier replays segments drawn from the claimed ones only (and the first of them
        twice) from that attempt's uploads, with the prefix as the manifest (a "claim"
        task, found by the lease's nonce and worker). For a sealed job the checkpoints'
        keys are asked of the lost attempt's own provider (`_post`); until its worker
        grants them the verifier cannot answer and the claim waits."""
        claimed = att.segments
        assert claimed is not None
        spec = job.spec
        read = read_claimed_prefix(self.desk, att, job, attempt)
        if isinstance(read, SpotCheckVerdict):
            return read
        _, prefix, claimed_part = read
        draw = draw_segments(claimed_part, att, spec, self.sign, top=self.top, first=claimed.first)
        segments = tuple(sorted({claimed.first, *draw.segments}))
        draw = replace(draw, segments=segments)
        files = (PREFIX_FILE, *(POT_PREFIX + n for n in needed_files(segments)))
        # The harness checks the uploaded prefix against its own root (it may go on past
        # the claim's last checkpoint; the claimed part's root was checked before).
        subject = replace(Subject.of(att, job), pot_root=prefix.root)
        task, report, payout = self.await_report(
            subject, job, "claim", segments, files, (), draw.signature, draw.seed
        )
        verdict = judge_report(report, prefix, draw, spec.proof.tolerance_ppm, att)
        return with_fee_evidence(verdict, task, report, payout)

    def _referee(
        self,
        att: Attestation,
        job: JobInfo,
        manifest: Manifest,
        draw: Draw,
        files: tuple[str, ...],
        first: tuple[VerificationTask, VerificationReport, str],
        verdict: SpotCheckVerdict,
    ) -> SpotCheckVerdict:
        """A disputed replay (`oracle.verification.referee`): a second verifier, then the
        provider's own sandbox replay, decide it."""
        task, report, payout = first
        tolerance = job.spec.proof.tolerance_ppm
        from_scratch = att.unit is None or not att.unit.inputs
        subject = Subject.of(att, job)
        # Another worker than the provider and the first verifier, paid elsewhere than both.
        task2, report2, payout2 = self.await_report(
            subject,
            job,
            "replay",
            draw.segments,
            files,
            (),
            draw.signature,
            referee_seed(draw.seed),
            exclude=(task.verifier, payout),
        )
        second = judge_report(report2, manifest, draw, tolerance, att)
        details: dict[str, Any] = dict(second.report or {})
        details[DISPUTE] = {
            "first_task": task.to_json(),
            "first_report": report.to_json(),
            "first_message": verdict.message,
            "second_task": task2.to_json(),
        }
        if not disputable(second):
            # Verified (the first verifier is outvoted and earns nothing), or the second's
            # own verdict: a job fault, withheld files, a crash.
            kept = replace(second, report=details)
            return with_fee_evidence(kept, task2, report2, payout2)
        one = departure(
            report_as_harness_json(report),
            manifest,
            draw.segments,
            tolerance,
            from_scratch=from_scratch,
        )
        two = departure(
            report_as_harness_json(report2),
            manifest,
            draw.segments,
            tolerance,
            from_scratch=from_scratch,
        )
        if one != two or not one.any:
            return unproven(
                second,
                "the two verifiers' replays depart from the commitment differently: the "
                "job's code computes otherwise on each machine, or a verifier lied; "
                "unproven (the provider is unpaid, not slashed; the escrow refunds)",
                None,
                details,
            )
        if self.disputes is None:
            return arbitrate("silent", second, one, details)
        dispute = self._dispute_task(subject, job, one.disputed, manifest, files, task, task2)
        details[DISPUTE]["task"] = dispute.to_json()
        answer, state = self._provider_answer(dispute)
        details[DISPUTE]["commitment"] = state.get("commitment")
        details[DISPUTE]["reveal"] = state.get("reveal")
        return arbitrate(classify(answer, one, manifest, tolerance), second, one, details)

    def _dispute_task(
        self,
        subject: Subject,
        job: JobInfo,
        segments: tuple[int, ...],
        manifest: Manifest,
        files: tuple[str, ...],
        task: VerificationTask,
        task2: VerificationTask,
    ) -> DisputeTask:
        """What the provider replays: the disputed segments (the first one, whose repeat
        the verifiers ran, when only checkpoint 0 is disputed), from the same files."""
        replayed = segments or (task.segments[0],)
        names = needed_files(replayed)
        prefix = files[0][: -len(MANIFEST_NAME)]
        try:
            return DisputeTask.sign(
                self.signing_key,
                job_id=job.job_id,
                nonce=subject.nonce,
                unit=subject.unit,
                attestation=subject.leaf,
                pot_root=manifest.root,
                provider=subject.provider,
                segments=list(replayed),
                files=[files[0], *(prefix + n for n in names)],
                verifier_tasks=[task.digest, task2.digest],
            )
        except DisputeError as exc:
            raise SpotCheckUnavailable(f"cannot make a dispute task: {exc}") from exc

    def _provider_answer(self, dispute: DisputeTask) -> tuple[Any, dict[str, Any]]:
        """The provider's opened answer (None once the window passed without one); waits
        (SpotCheckUnavailable) while the window is open."""
        from oracle.inputs.feed import FeedError

        assert self.disputes is not None
        try:
            state = self.disputes.post_dispute(dispute)
        except FeedError as exc:
            raise SpotCheckUnavailable(str(exc)) from exc
        answer = read_answer(dispute, state)
        if answer is not None:
            return answer, state
        posted = _time(state.get("created_at"))
        if posted is None or (self.now() - posted).total_seconds() < self.dispute_within_s:
            raise SpotCheckUnavailable(
                f"waiting for provider {dispute.provider[:16]}... to answer the dispute of "
                f"segments {list(dispute.segments)}"
            )
        return None, state

    def await_report(
        self,
        subject: Subject,
        job: JobInfo,
        kind: TaskKind,
        segments: tuple[int, ...],
        files: tuple[str, ...],
        inputs: tuple[str, ...],
        draw_signature: bytes,
        seed: bytes,
        exclude: tuple[str, str] | None = None,
    ) -> tuple[VerificationTask, VerificationReport, str]:
        """Draw a verifier (the next round's when one stays silent), post its task and
        return it with its checked report and the verifier's registered payout address;
        SpotCheckUnavailable while there is none yet. `exclude` (a worker key and its
        payout address: a disputed replay's first verifier) is never drawn either, nor
        any worker paid to that address.

        The draw is stable: round r's verifier, once drawn for this subject's task, is
        the one asked on every retry until its answer period is over, online or not (a
        verifier mid-replay asks for no new tasks, and so drops off the online list; a
        redraw then would orphan its replay). Only then is round r + 1 drawn among the
        candidates not drawn yet. Every earlier round's task is asked again first, so a
        superseded verifier's late report is still the one used (its work is paid, the
        later round's verifier, not yet answered, is not)."""

        devices, provider = subject.devices, subject.provider
        drawn = self._drawn.setdefault(
            (subject.leaf, kind, segments, exclude[0] if exclude else ""), []
        )
        found: list[Candidate] | None = None
        what = (
            f"replay segments {list(segments)}"
            if kind != "aggregate" and kind != "eval"
            else f"recompute ({kind})"
        )
        now = self.now()
        first: datetime | None = None
        for round_ in range(self.max_rounds):
            if round_ < len(drawn) and not self._still_eligible(drawn[round_], subject, exclude):
                # Paid to the provider's (or the excluded verifier's) address since it was
                # drawn: never asked again, the round drawn afresh.
                del drawn[round_:]
            if round_ >= len(drawn):
                if found is None:
                    found = self._candidates(devices, provider, exclude)
                left = [c.worker_key for c in found if c.worker_key not in drawn]
                if not left:
                    if not drawn:
                        raise SpotCheckUnavailable(
                            f"no online verifier with device class {devices!r} other than "
                            "the provider"
                        )
                    break
                drawn.append(draw_verifier(left, seed, round_))
            verifier = drawn[round_]
            task = self._task(
                subject, job, kind, segments, files, inputs, draw_signature, verifier, round_
            )
            state = self._post(task, job, files)
            if state.get("report") is not None:
                try:
                    report = VerificationReport.from_json(state["report"])
                    report.verify_for(task)
                except VerificationError as exc:
                    # Not the drawn verifier's answer (the API relays it): wait for one.
                    log.warning("ignoring a report for task %s: %s", task.digest, exc)
                    raise SpotCheckUnavailable(f"the relayed report does not hold: {exc}") from exc
                return task, report, self._payout(verifier, found)
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

    def _still_eligible(
        self, verifier: str, subject: Subject, exclude: tuple[str, str] | None
    ) -> bool:
        """A verifier kept from an earlier draw is asked again only while it is paid to
        neither the provider's address nor the excluded verifier's (registrations change)."""
        from oracle.inputs.feed import FeedError

        other_key, other_payout = exclude or ("", "")
        try:
            payout = self.desk.worker_payout(verifier)
            provider_payout = self.desk.worker_payout(subject.provider)
        except FeedError as exc:
            raise SpotCheckUnavailable(str(exc)) from exc
        barred = {p for p in (provider_payout, other_payout) if p}
        return verifier not in (subject.provider, other_key) and payout not in barred

    def _candidates(
        self, devices: str, provider: str, exclude: tuple[str, str] | None
    ) -> list[Candidate]:
        """Who may be drawn now: online, of the device class, neither the provider (nor
        `exclude`) nor paid to its address."""
        from oracle.inputs.feed import FeedError

        other_key, other_payout = exclude or ("", "")
        try:
            payout = self.desk.worker_payout(provider)
            return [
                c
                for c in self.desk.verifier_candidates(devices, provider)
                if c.worker_key not in (provider, other_key)
                and c.payout_address not in (payout, other_payout)
            ]
        except FeedError as exc:
            raise SpotCheckUnavailable(str(exc)) from exc

    def _payout(self, verifier: str, found: list[Candidate] | None) -> str:
        """The payout address `verifier` registered (its report earns a fee only there):
        the candidate list's when this call read it, else the API's (a verifier drawn on an
        earlier retry may no longer be online)."""
        from oracle.inputs.feed import FeedError

        listed = next((c.payout_address for c in found or () if c.worker_key == verifier), None)
        if listed is not None:
            return listed
        try:
            return self.desk.worker_payout(verifier) or ""
        except FeedError as exc:
            raise SpotCheckUnavailable(str(exc)) from exc

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
        task, report, payout = self.await_report(
            Subject.of(att, job), job, kind, (), files, tuple(work.inputs), signature, seed
        )
        verdict = judge_recomputation(report, att, job, kind, signature.hex())
        return with_fee_evidence(verdict, task, report, payout)

    def check_node(
        self, att: Attestation, scope: JobInfo, unit: Unit, job: JobInfo
    ) -> SpotCheckVerdict:
        """Spot-check a cluster node on its shard: the node checks without code, the draw,
        a drawn verifier's replay of every rank's contribution, and the verdict against
        every node's commitments (`oracle.verification.cluster_checks`)."""
        from oracle.inputs.feed import FeedError
        from oracle.verification.reasons import Reason

        spec = job.spec
        topology = spec.topology
        assert isinstance(topology, MultiNode) and unit.rank is not None
        fetch = node_fetcher(self.desk, job.job_id)
        try:
            raw = [fetch(unit.index, CLUSTER_FILE), fetch(unit.index, MANIFEST_NAME)]
            if raw[0] is None or raw[1] is None:
                return SpotCheckVerdict(
                    False, Reason.POT_MISSING, f"no pot/{CLUSTER_FILE} and manifest uploaded"
                )
            proof = NodeProof.from_bytes(raw[0])
            manifest = Manifest.from_bytes(raw[1])
            check_node_proof(proof, manifest, att, spec, unit, lease_nonces(job, topology))
        except ProofError as exc:
            return SpotCheckVerdict(False, Reason.POT_INVALID, str(exc))
        except ProofRejected as exc:
            return SpotCheckVerdict(False, exc.reason, exc.message)
        except FeedError as exc:
            raise SpotCheckUnavailable(str(exc)) from exc
        if spec.proof.trainer is None:
            return SpotCheckVerdict(
                False, Reason.SPOT_CHECK_FAILED, "the spec names no trainer (proof.trainer)"
            )
        draw = draw_segments(manifest, att, spec, self.sign, top=self.top)
        prefix = f"units/{unit.index}/{POT_PREFIX}"
        names = (CLUSTER_FILE, MANIFEST_NAME, *needed_files(draw.segments))
        files = tuple(prefix + n for n in names)
        task, report, payout = self.await_report(
            Subject.of(att, job), job, "node", draw.segments, files, (), draw.signature, draw.seed
        )
        verdict = judge_node_report(
            report,
            unit.rank,
            manifest,
            draw,
            fetch,
            topology.nodes,
            att.pot_root,
            attribute(report),
        )
        return with_fee_evidence(verdict, task, report, payout)

    def _task(
        self,
        subject: Subject,
        job: JobInfo,
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
                nonce=subject.nonce,
                unit=subject.unit,
                attestation=subject.leaf,
                pot_root=subject.pot_root,
                provider=subject.provider,
                verifier=verifier,
                device_class=subject.devices,
                kind=kind,
                segments=list(segments),
                files=list(files),
                inputs=list(inputs),
                draw_signature=draw_signature.hex(),
                round=round_,
                partial=subject.partial,
            )
        except VerificationError as exc:
            raise SpotCheckUnavailable(f"cannot make a verification task: {exc}") from exc

    def _post(self, task: VerificationTask, job: JobInfo, files: tuple[str, ...]) -> dict[str, Any]:
        """Post the task (again: the same unit), and for a sealed job the key request for
        its checkpoints (the manifest or prefix is not sealed), naming the lease's provider;
        the unit's state."""
        from oracle.inputs.feed import FeedError

        try:
            if _sealed(job) and task.kind in ("replay", "node", "claim"):
                # A unit's input checkpoints are never sealed: the next provider reads them.
                # A lost attempt's claim is asked of its own provider: the attempts of a
                # resumed job share a nonce, and only the lost one's secret opens its files.
                self.desk.request_keys(
                    KeyRequest.sign(
                        self.signing_key,
                        job_id=job.job_id,
                        nonce=task.nonce,
                        recipient=task.verifier,
                        provider=task.provider,
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


REFUSAL_EVIDENCE = "refusal_evidence"


def with_refusal_evidence(
    final: SpotCheckVerdict,
    first: SpotCheckVerdict,
    task: VerificationTask,
    report: VerificationReport,
) -> SpotCheckVerdict:
    """The refereed verdict, carrying the first verifier's signed task and report and the
    segments it found not to replay when the referee path ended at the provider's fault: a
    co-signer's refusal names them (`proofnet.messages.segment_refusal`)."""
    failed = (first.report or {}).get(FAILED_SEGMENTS)
    if final.passed or final.fault != "provider" or not failed:
        return final
    details = dict(final.report or {})
    details[REFUSAL_EVIDENCE] = {
        "segments": list(failed),
        "task": task.to_json(),
        "report": report.to_json(),
    }
    return replace(final, report=details)


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
    if task.kind == "node":
        topology = job.spec.topology
        work = att.unit
        if not isinstance(topology, MultiNode) or work is None:
            return "a node replay pays a fee only on a cluster node"
        prefix = f"units/{work.index}/{POT_PREFIX}"
        try:
            manifest = Manifest.from_bytes(feed.artifact(job.job_id, prefix + MANIFEST_NAME))
        except (FeedError, ProofError) as exc:
            return f"this oracle cannot read the node's manifest: {exc}"
        if any(not 0 < s < len(manifest.leaves) for s in task.segments):
            return "the task draws segments the manifest does not have"
        draw = Draw(bytes.fromhex(task.draw_signature), b"", task.segments)
        try:
            fetch = node_fetcher(feed, job.job_id)
            verdict = judge_node_report(
                report,
                work.index,
                manifest,
                draw,
                fetch,
                topology.nodes,
                att.pot_root,
                attribute(report),
            )
        except SpotCheckUnavailable as exc:
            return f"this oracle cannot read the cluster's evidence: {exc}"
        return None if verdict.passed else verdict.message
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
    from oracle.verification.reasons import Reason

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
    from oracle.verification.reasons import Reason

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
