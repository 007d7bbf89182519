"""The worker as a drawn verifier: replay the segments an oracle drew, sign what came out.

`Verifier.run_once` reads the verification tasks the API relays to this worker
(`proofnet/messages/verification.py`), and for each:

1. checks the task is signed by an oracle this worker trusts and names this worker, and
   that the job spec the API served hashes to the task's job id (the API relays it);
2. checks out the job's repository at the pinned commit and downloads the proof files the
   task names (checked against the hashes the API recorded); a sealed file is opened with
   the key the provider granted this worker (`worker.key_grants.open_granted`); files it
   cannot get make the report "withheld";
3. runs the network's harness (`python -m pot replay`, this worker's copy of `pot`) in the
   job's own digest-pinned image under this worker's runtime: no network, read-only root,
   only the task's directory mounted, the job's resources and environment, nothing of the
   worker's (its key file, settings and other jobs are outside the container); the drawn
   segments once, then the first segment again (`repeat`: nondeterministic job code is the
   job's fault);
4. signs the harness's hashes as a `VerificationReport` and posts it.

The same worker answers the disputes of its own proofs (`answer_disputes`,
oracle/verification/referee.py): it replays the disputed segments exactly as a verifier
would, from the files the verifiers got, and signs a commitment to the hashes, then their
reveal.

The process runtime does not isolate job code (it runs as this worker's user, beside its
key): a `Verifier` refuses it unless `allow_unisolated` is set, which only tests and the
local demo on the devnet do (`PROOFNET_WORKER_DEMO_PROCESS_VERIFY`). A
relay stage's task replays with the stage's own shards of the job's data (fetched and
SHA-256 checked) and the stage's unit environment.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from pot import launch
from pot.env import INPUT_CHECKPOINTS, SHARDS, UNIT_INDEX, UNIT_KIND, UnitEnv
from proofnet.messages.dispute import (
    DisputeAnswer,
    DisputeCommitment,
    DisputeError,
    DisputeReveal,
    DisputeTask,
    commitment_of,
    new_salt,
)
from proofnet.messages.envelope import MAGIC_BYTES, SealingError, is_sealed
from proofnet.messages.jobspec import JobSpec, JobSpecError
from proofnet.messages.shards import DataShard
from proofnet.messages.topology import Relay, plan
from proofnet.messages.verification import (
    PREFIX_KINDS,
    NodeSegmentResult,
    SegmentResult,
    VerificationError,
    VerificationReport,
    VerificationTask,
)
from worker import harness
from worker.api_client import ApiClient, ApiRefused, ApiUnavailable
from worker.data_fetch import DataFetchPolicy, fetch_data
from worker.identity import WorkerKey
from worker.key_grants import open_granted
from worker.results import sha256_file
from worker.runtime import (
    LogLine,
    Resources,
    RunReason,
    RunResult,
    RunSpec,
    Runtime,
    RuntimeErrorBase,
)
from worker.units import INPUTS_DIR, METRICS_FILE, UnitError, parse_metrics
from worker.workspace import RepoCache, WorkspaceError

log = logging.getLogger(__name__)

MOUNT_POINT = "/work"
HARNESS_STATUSES = ("passed", "failed", "error", "proof_error", "usage_error")


class VerifierRefused(Exception):
    """This worker cannot verify as configured (an unisolated runtime outside the demo)."""


class Verifier:
    def __init__(
        self,
        api: ApiClient,
        runtime: Runtime,
        key: WorkerKey,
        work_dir: Path,
        repos: RepoCache,
        *,
        trusted_oracle_keys: Collection[str],
        allow_unisolated: bool = False,
        timeout_s: float = 1800.0,
        pids_limit: int | None = 4096,
        data_policy: DataFetchPolicy | None = None,
        payout_address: str | None = None,
    ) -> None:
        if not runtime.isolated and not allow_unisolated:
            raise VerifierRefused(
                f"the {runtime.name} runtime does not isolate job code: verification runs "
                "only under a container runtime (the process runtime only in the local demo)"
            )
        if not trusted_oracle_keys:
            raise VerifierRefused("a verifier answers only tasks of oracles it trusts: none set")
        self.api, self.runtime, self.key, self.repos = api, runtime, key, repos
        self.work_dir = Path(work_dir).resolve()
        self.trusted = tuple(trusted_oracle_keys)
        self.timeout_s = timeout_s
        self.pids_limit = pids_limit
        # How a relay stage's data reaches this host: the provider's own rules for jobs.
        self.data_policy = data_policy
        # Where this worker's verification fees go (its registered payout address): named
        # in every report it signs (proofnet.messages.verification_fee).
        self.payout_address = payout_address

    def run_once(self) -> list[VerificationReport]:
        """Answer every pending task that can be answered now; the reports posted."""
        posted = []
        for pending in self.api.verification_tasks():
            try:
                report = self.verify(pending)
            except (VerificationError, JobSpecError, KeyError, ValueError) as e:
                log.warning("not answering verification task %s: %s", pending.get("id"), e)
                continue
            if report is None:
                continue
            try:
                self.api.report_verification(int(pending["id"]), report.to_json())
            except ApiRefused as e:
                log.warning("the API refused the report of task %s: %s", pending.get("id"), e)
                continue
            posted.append(report)
        return posted

    def verify(self, pending: dict[str, Any]) -> VerificationReport | None:
        task = VerificationTask.from_json(pending["task"])
        task.verify(self.trusted)
        if task.verifier != self.key.public_key_hex:
            raise VerificationError("the task names another verifier")
        spec = JobSpec.from_dict(pending["spec"])
        if spec.job_id != task.job_id:
            raise VerificationError("the API served a spec that is not the task's job")
        work = self.work_dir / "verify" / task.digest[:32]
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        try:
            if not task.replays:
                return self._recompute_task(task, spec, pending, work)
            return self._replay_task(task, spec, pending, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _report(self, task: VerificationTask, **fields: Any) -> VerificationReport:
        if self.payout_address is not None:
            fields.setdefault("payout_address", self.payout_address)
        return VerificationReport.sign(self.key.signing_key, task, **fields)

    def _replay_task(
        self, task: VerificationTask, spec: JobSpec, pending: dict[str, Any], work: Path
    ) -> VerificationReport:
        try:
            self.repos.checkout(spec.model.repo_url, spec.model.commit, work)
        except WorkspaceError as e:
            raise VerificationError(f"cannot check out the job's code: {e}") from e
        for own in (work / "pot", work / "granted"):
            # The repository's own `pot` (a symlink out of the work dir, say) is not where
            # the proof files go: the verifier's are the only ones there.
            if own.is_symlink() or own.is_file():
                own.unlink()
            elif own.exists():
                shutil.rmtree(own)
        withheld = self._fetch_files(task, pending, work)
        if withheld:
            return self._report(task, status="withheld", message=withheld)
        if task.kind == "node":
            return self._node_task(task, spec, work)
        shards: tuple[Path, ...] = ()
        if task.unit is not None:
            shards = self._stage_data(task.unit, spec, work)
        started = time.monotonic()
        drawn = self._run(task, spec, work, task.segments, "drawn", shards)
        replay_ms = int((time.monotonic() - started) * 1000)
        status = str(drawn.get("status"))
        if status not in HARNESS_STATUSES:
            status = "error"
        fields: dict[str, Any] = {
            "status": status,
            "message": str(drawn.get("message", ""))[:2000],
            "initial_weights_hash": drawn.get("initial_weights_hash"),
            "results": [
                SegmentResult.from_harness(r).model_dump(mode="json")
                for r in drawn.get("results") or []
                if isinstance(r, dict)
            ],
            "replay_ms": replay_ms,
        }
        if status in ("passed", "failed"):
            # The provider's first segment (the task's first), replayed again, timed like
            # the drawn run: the difference is the other segments' steps alone.
            started = time.monotonic()
            again = self._run(task, spec, work, task.segments[:1], "repeat", shards)
            fields["repeat_ms"] = int((time.monotonic() - started) * 1000)
            first = [r for r in again.get("results") or [] if isinstance(r, dict)]
            if first:
                fields["repeat"] = SegmentResult.from_harness(first[0]).model_dump(mode="json")
        return self._report(task, **fields)

    def _node_task(self, task: VerificationTask, spec: JobSpec, work: Path) -> VerificationReport:
        """A cluster node's drawn segments, every rank's contribution recomputed
        (`python -m pot replay-node`); the report says what it computed, the oracles judge."""
        started = time.monotonic()
        drawn = self._run(task, spec, work, task.segments, "drawn")
        replay_ms = int((time.monotonic() - started) * 1000)
        status = str(drawn.get("status"))
        # The replay computed what it reports ("replayed"); whether that matches the nodes'
        # commitments is for the oracles to say.
        status = "passed" if status == "replayed" else status
        if status not in HARNESS_STATUSES:
            status = "error"
        results = [
            NodeSegmentResult.from_harness(r).model_dump(mode="json")
            for r in drawn.get("results") or []
            if isinstance(r, dict)
        ]
        return self._report(
            task,
            status=status,
            message=str(drawn.get("message", ""))[:2000],
            initial_weights_hash=drawn.get("initial_weights_hash"),
            node_results=results,
            replay_ms=replay_ms,
        )

    # -- disputes of this worker's own proofs (oracle/verification/referee.py) ------------

    def answer_disputes(self) -> list[DisputeReveal]:
        """Answer every dispute of this worker's proofs that can be answered now: replay
        the disputed segments in a verifier's sandbox, commit to the hashes, then reveal
        them; the reveals posted. A provider that never answers concedes."""
        revealed = []
        for pending in self.api.disputes():
            try:
                reveal = self.answer_dispute(pending)
            except (DisputeError, VerificationError, JobSpecError, KeyError, ValueError) as e:
                log.warning("not answering dispute %s: %s", pending.get("id"), e)
                continue
            if reveal is not None:
                revealed.append(reveal)
        return revealed

    def answer_dispute(self, pending: dict[str, Any]) -> DisputeReveal | None:
        task = DisputeTask.from_json(pending["task"])
        task.verify(self.trusted)
        if task.provider != self.key.public_key_hex:
            raise DisputeError("the dispute names another provider")
        spec = JobSpec.from_dict(pending["spec"])
        if spec.job_id != task.job_id:
            raise DisputeError("the API served a spec that is not the dispute's job")
        unit_id = int(pending["id"])
        # The answer and its salt outlive a restart between the commitment and the reveal:
        # a commitment this worker cannot open would count as silence.
        kept = self.work_dir / "disputes" / f"{task.digest}.json"
        if kept.exists():
            saved = json.loads(kept.read_text(encoding="utf-8"))
            answer, salt = DisputeAnswer.model_validate(saved["answer"]), str(saved["salt"])
        else:
            answer, salt = self._replay_disputed(task, spec, pending), new_salt()
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(
                json.dumps({"answer": answer.model_dump(mode="json"), "salt": salt}),
                encoding="utf-8",
            )
        commitment = DisputeCommitment.sign(
            self.key.signing_key, task, commitment_of(answer, salt, task)
        )
        reveal = DisputeReveal.sign(self.key.signing_key, task, answer, salt)
        try:
            if not pending.get("committed"):
                self.api.answer_dispute(unit_id, "commitment", commitment.to_json())
            self.api.answer_dispute(unit_id, "reveal", reveal.to_json())
        except ApiRefused as e:
            log.warning("the API refused the answer to dispute %s: %s", unit_id, e)
            return None
        kept.unlink(missing_ok=True)
        return reveal

    def _replay_disputed(
        self, task: DisputeTask, spec: JobSpec, pending: dict[str, Any]
    ) -> DisputeAnswer:
        """The disputed segments replayed as a verifier replays them: a fresh container of
        the job's image, no network, the very files the verifiers got."""
        work = self.work_dir / "dispute" / task.digest[:32]
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        try:
            try:
                self.repos.checkout(spec.model.repo_url, spec.model.commit, work)
            except WorkspaceError as e:
                raise VerificationError(f"cannot check out the job's code: {e}") from e
            own = work / "pot"
            if own.is_symlink() or own.is_file():
                own.unlink()
            elif own.exists():
                shutil.rmtree(own)
            refs = {str(f["name"]): str(f["sha256"]) for f in pending.get("files") or []}
            for name in task.files:
                if name not in refs:
                    raise VerificationError(f"the API lists no {name} for the dispute")
                dest = work / "pot" / Path(name).name
                try:
                    self.api.download_dispute_file(int(pending["id"]), name, dest, refs[name])
                except ApiRefused as e:
                    raise VerificationError(f"cannot download {name}: {e}") from e
                with dest.open("rb") as f:
                    if is_sealed(f.read(MAGIC_BYTES)):
                        # Its own sealed proof: not replayed here yet (a silence concedes).
                        raise VerificationError(f"{name} is sealed: not replayed in a dispute")
            shards: tuple[Path, ...] = ()
            if task.unit is not None:
                shards = self._stage_data(task.unit, spec, work)
            ran = self._run(task, spec, work, task.segments, "dispute", shards)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        status = str(ran.get("status"))
        return DisputeAnswer.model_validate(
            {
                "status": status if status in HARNESS_STATUSES else "error",
                "initial_weights_hash": ran.get("initial_weights_hash"),
                "results": [
                    SegmentResult.from_harness(r).model_dump(mode="json")
                    for r in ran.get("results") or []
                    if isinstance(r, dict)
                ],
            }
        )

    def _stage_data(self, index: int, spec: JobSpec, work: Path) -> tuple[Path, ...]:
        """A relay stage trained on its planned shards of `spec.data`: fetch them (SHA-256
        checked) into `work/data/`, in the stage's order."""
        units = {u.index: u for u in plan(spec.topology)} if spec.topology is not None else {}
        unit = units.get(index)
        if unit is None or unit.kind != "stage":
            raise VerificationError(f"unit {index} is not a planned stage of the job")
        return self._fetch([spec.data[i] for i in unit.shards], work, f"stage {index}", spec)

    def _fetch(
        self, shards: list[DataShard], work: Path, what: str, spec: JobSpec
    ) -> tuple[Path, ...]:
        """Fetch `shards` (SHA-256 checked) into `work/data/`, in order."""
        try:
            paths = fetch_data(
                shards,
                work / "data",
                disk_mb=spec.resources.disk_mb,
                policy=self.data_policy,
                cache_dir=self.work_dir / "cache" / "data",
            )
        except WorkspaceError as e:
            # The data host failing (or serving other bytes) is not the provider's doing.
            raise VerificationError(f"{what}'s data: {e}") from e
        return tuple(paths)

    def _fetch_files(self, task: VerificationTask, pending: dict[str, Any], work: Path) -> str:
        """Download (and open, if sealed) the task's files into `work/pot`; why the provider
        withheld them (a grant that opens nothing), or "". VerificationError when they
        cannot be had now (the API's trouble, or a grant not answered yet)."""
        refs = {str(f["name"]): str(f["sha256"]) for f in pending.get("files") or []}
        sealed = []
        for name in task.files:
            if name not in refs:
                # The API checked the lease uploaded it when it took the task: its trouble.
                raise VerificationError(f"the API lists no {name} for the task")
            dest = work / "pot" / Path(name).name  # a stage's are units/<i>/pot/<name>
            try:
                self.api.download_task_file(int(pending["id"]), name, dest, refs[name])
            except ApiRefused as e:
                # Not the bytes the API recorded (and the provider attested), or none: the
                # API host's trouble, not the provider's; the task stays unanswered.
                raise VerificationError(f"cannot download {name}: {e}") from e
            with dest.open("rb") as f:
                if is_sealed(f.read(MAGIC_BYTES)):
                    sealed.append(name)
        if not sealed:
            return ""
        for request_id in pending.get("key_requests") or []:
            try:
                opened = open_granted(
                    self.api, int(request_id), work / "granted", self.key.signing_key
                )
                for o in opened:
                    (work / "granted" / o.name).replace(work / "pot" / Path(o.name).name)
            except ApiRefused as e:  # 409: the provider has not answered yet
                raise VerificationError(f"key grant {request_id} not ready: {e}") from e
            except SealingError as e:
                return f"the provider's key grant does not open its files: {e}"
            sealed = [n for n in sealed if n not in {o.name for o in opened}]
        if sealed:
            raise VerificationError(f"no key granted yet for {sealed[:3]}")
        return ""

    def _run(
        self,
        task: VerificationTask | DisputeTask,
        spec: JobSpec,
        work: Path,
        segments: tuple[int, ...],
        label: str,
        shards: tuple[Path, ...] = (),
    ) -> dict[str, Any]:
        seen = Path(MOUNT_POINT) if self.runtime.isolated else work
        environ = spec.job_env(seen, bytes.fromhex(task.nonce)).to_environ()
        if task.unit is not None and task.kind != "node":
            # A stage replays from the committed checkpoint that opens each segment: no
            # input checkpoints, its own shards.
            environ.update(
                {
                    UNIT_KIND: "stage",
                    UNIT_INDEX: str(task.unit),
                    SHARDS: ":".join(str(seen / p.relative_to(work)) for p in shards),
                    INPUT_CHECKPOINTS: "",
                }
            )
        node = task.kind == "node"
        tolerance = () if node else ("--tolerance-ppm", str(spec.proof.tolerance_ppm))
        argv = launch.harness_argv(
            harness.PYTHON,
            "replay-node" if node else "replay",
            "--root",
            task.pot_root,
            "--segments",
            ",".join(str(s) for s in segments),
            *tolerance,
            "--code-dir",
            str(seen),
            "--pot-dir",
            str(seen / "pot"),
            # An early task replays from the committed prefix of a run still training, a
            # claim task from the one a lost attempt left.
            *(("--prefix",) if task.kind in PREFIX_KINDS else ()),
            # The proof of a lease stopped for its job's fault may commit fewer segments.
            *(("--partial",) if isinstance(task, VerificationTask) and task.partial else ()),
        )
        result, lines = self._execute(task, spec, work, tuple(argv), environ, label)
        if result.reason is RunReason.RUNTIME_ERROR:
            # This machine could not run it (image, engine): nobody's fault but ours; the
            # task stays pending and is tried again.
            raise VerificationError(f"{self.runtime.name} runtime: {result.message}")
        for text in reversed(lines):
            try:
                report = json.loads(text)
            except ValueError:
                continue
            if isinstance(report, dict):
                return report
        return {"status": "error", "message": f"the replay printed no report: {result.message}"}

    def _execute(
        self,
        task: VerificationTask | DisputeTask,
        spec: JobSpec,
        work: Path,
        argv: tuple[str, ...],
        environ: dict[str, str],
        label: str,
    ) -> tuple[RunResult, list[str]]:
        """Run `argv` in the job's image under this worker's runtime (no network, read-only
        root, only `work` mounted); the result and the JSON-looking stdout lines."""
        lines: list[str] = []

        def collect(line: LogLine) -> None:
            if line.stream == "stdout" and line.text.startswith("{"):
                lines.append(line.text)

        run_spec = RunSpec(
            image=spec.image,
            argv=argv,
            work_dir=work,
            env=environ,
            resources=Resources(
                cpus=float(spec.resources.cpus),
                memory_bytes=spec.resources.ram_mb * 2**20,
                pids_limit=self.pids_limit,
                gpus=spec.resources.gpus,
            ),
            network_egress=False,
            read_only_root=True,
            wall_clock_limit_s=self.timeout_s,
            mount_point=MOUNT_POINT,
            job_id=f"verify-{task.digest[:12]}-{label}",
            python_lib=harness.provide_library(self.work_dir / "harness"),
        )
        try:
            return self.runtime.execute(run_spec, on_log=collect), lines
        except RuntimeErrorBase as e:
            raise VerificationError(f"{self.runtime.name} runtime: {e}") from e

    def _recompute_task(
        self, task: VerificationTask, spec: JobSpec, pending: dict[str, Any], work: Path
    ) -> VerificationReport:
        """Recompute an aggregation or evaluation unit: its command, in the job's image,
        on the input checkpoints the task names (downloaded and SHA-256 checked against the
        task's `inputs`) and, for an evaluation, the held-out data; report the checkpoint's
        hash or the metric it computed. The command failing is reported as "error" (the
        oracle holds it against the job, as a replay that cannot run)."""
        topology = spec.topology
        unit = next((u for u in plan(topology) if u.index == task.unit), None) if topology else None
        if not isinstance(topology, Relay) or unit is None or unit.kind != task.kind:
            raise VerificationError(f"unit {task.unit} is not a planned {task.kind} of the job")
        try:
            self.repos.checkout(spec.model.repo_url, spec.model.commit, work)
        except WorkspaceError as e:
            raise VerificationError(f"cannot check out the job's code: {e}") from e
        refs = {str(f["name"]): str(f["sha256"]) for f in pending.get("files") or []}
        inputs_dir = work / INPUTS_DIR
        if inputs_dir.is_symlink() or inputs_dir.exists():
            raise VerificationError(f"the job's repository has its own {INPUTS_DIR}")
        inputs = []
        for position, (name, digest) in enumerate(zip(task.files, task.inputs, strict=True)):
            if refs.get(name) != digest:
                raise VerificationError(f"the API lists no {name} with hash {digest}")
            dest = inputs_dir / f"input-{position}"
            try:
                self.api.download_task_file(int(pending["id"]), name, dest, digest)
            except ApiRefused as e:
                raise VerificationError(f"cannot download {name}: {e}") from e
            inputs.append(dest)
        shards: tuple[Path, ...] = ()
        if task.kind == "eval":
            assert topology.evaluation is not None
            held_out = [topology.evaluation.data[i] for i in unit.shards]
            shards = self._fetch(held_out, work, f"evaluation {unit.index}", spec)
        seen = Path(MOUNT_POINT) if self.runtime.isolated else work

        def mounted(path: Path) -> Path:
            return seen / path.relative_to(work)

        environ = spec.job_env(seen, bytes.fromhex(task.nonce)).to_environ()
        environ.update(
            UnitEnv(
                kind=task.kind,
                index=unit.index,
                input_checkpoints=tuple(mounted(p) for p in inputs),
                checkpoint_out=mounted(work / topology.checkpoint),
                shards=tuple(mounted(p) for p in shards),
                metrics_out=mounted(work / METRICS_FILE) if task.kind == "eval" else None,
            ).to_environ()
        )
        if task.kind == "eval":
            assert topology.evaluation is not None
            argv = tuple(topology.evaluation.command)
        else:
            assert topology.aggregate_command is not None
            argv = tuple(topology.aggregate_command)
        result, _ = self._execute(task, spec, work, argv, environ, task.kind)
        if result.reason is RunReason.RUNTIME_ERROR:
            raise VerificationError(f"{self.runtime.name} runtime: {result.message}")
        if not result.ok:
            return self._report(
                task, status="error", message=f"the {task.kind} command: {result.message}"
            )
        try:
            if task.kind == "aggregate":
                path = work / topology.checkpoint
                if not path.is_file() or path.is_symlink():
                    raise UnitError(f"the aggregation wrote no checkpoint {topology.checkpoint}")
                return self._report(task, status="passed", output_hash=sha256_file(path))
            assert topology.evaluation is not None
            path = work / METRICS_FILE
            if not path.is_file() or path.is_symlink():
                raise UnitError(f"the evaluation wrote no metrics ({METRICS_FILE})")
            metrics = parse_metrics(path.read_bytes(), required=topology.evaluation.metric)
        except UnitError as e:
            return self._report(task, status="error", message=str(e))
        return self._report(task, status="passed", metric=str(metrics[topology.evaluation.metric]))


class VerifierLoop:
    """Answers verification tasks from a background thread until stopped, every
    `interval_s`, whatever job runs here; never dies of an error.

    Asking for tasks is what keeps this worker a candidate verifier (the API's
    `verifier_online_s`), and a replay of real segments outlasts that window while the
    round is busy with it. An oracle that finds the drawn verifier gone draws again from the
    workers online then, which leaves the busy verifier's replay unused and unpaid; so while a
    round runs, a second thread keeps asking every `interval_s` (the tasks it hears of wait
    for the next round)."""

    def __init__(self, verifier: Verifier, *, interval_s: float = 30.0) -> None:
        self.verifier = verifier
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._busy = threading.Event()
        self._threads: list[threading.Thread] = []
        self.rounds = 0
        self.announcements = 0

    def start(self) -> None:
        self._threads = [
            threading.Thread(target=self._run, name="verifier", daemon=True),
            threading.Thread(target=self._keep_online, name="verifier-online", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._busy.set()
            try:
                self.verifier.run_once()
                # Disputes of this worker's own proofs: silence past the oracle's window
                # concedes (unpaid), so they are answered in the same rounds.
                self.verifier.answer_disputes()
            except ApiUnavailable as e:
                log.info("cannot read verification tasks now: %s", e)
            except Exception:  # keep verifying: one bad round must not end the thread
                log.exception("answering verification tasks failed")
            finally:
                self._busy.clear()
            self.rounds += 1
            self._stop.wait(self.interval_s)

    def _keep_online(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self._busy.is_set():
                continue
            try:
                self.verifier.api.verification_tasks()
                self.announcements += 1
            except Exception as e:  # the next round asks again; never end the thread
                log.info("cannot tell the API this verifier is still online: %s", e)
