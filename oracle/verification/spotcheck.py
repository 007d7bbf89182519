"""Proof-of-training spot checks: the verdict on a replay (`judge`), the files a replay reads
(`needed_files`), and the local demo's replay on the oracle's own host (`LocalSpotChecker`).

Outside the local demo on the devnet (`PROOFNET_ORACLE_DEMO_LOCAL_REPLAY`) no oracle runs
job code: drawn verifier workers replay (`oracle.verification.verifiers`), and this module's `judge`
reads their signed reports. What follows describes the demo's local replay.

The oracle fetches the job's manifest from the API's content store (the worker uploads its
`pot/` directory as results named `pot/<file>`) and checks it without job code
(`oracle.verification.proof_checks`: the attested root, the declared schedule, the seed-derived data
order). It then draws the segments to replay with its own signature over the attestation
(randomness the provider could not know when it signed), fetches the checkpoint files they
need and the job's trainer at the pinned commit, and replays them with the network's
harness (`python -m pot replay`, from this installation's copy of `pot`) in a subprocess
under a time limit, in a clean environment. The oracle judges the hashes the replay
reports against its own copy of the manifest.

The work is described by a `SpotCheckRequest` (JSON) and answered by the harness's JSON
report, so it can be handed to a verifier worker instead of run here: whoever runs the
harness with the request's environment, in a directory holding the repository and the
proof files, gives the same report.

A relay stage trained on its own shards of `spec.data`, so its replay needs them: the oracle
fetches the stage's planned shards (SHA-256 checked) into `data/` of the work dir, and the
harness runs with the stage's unit environment (`PROOFNET_UNIT_KIND`, `PROOFNET_UNIT_INDEX`,
`PROOFNET_SHARDS`; no input checkpoints: a replayed segment starts from the committed
checkpoint that opens it).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from oracle.verification.metering import ProofTiming
from oracle.verification.proof_checks import (
    TOP_BY_NORM,
    Draw,
    ProofRejected,
    Sign,
    check_manifest,
    draw_segments,
    stop_segments,
)
from oracle.verification.reasons import Reason
from oracle.verification.resume_checks import own_first_segment
from oracle.verification.stage_data import StageDataError, fetch_shards
from pot import launch
from pot.conformance import check_prefix_conformance
from pot.env import INPUT_CHECKPOINTS, SHARDS, UNIT_INDEX, UNIT_KIND, JobEnv, determinism_environ
from pot.manifest import (
    MANIFEST_NAME,
    PREFIX_NAME,
    Manifest,
    ProofError,
    optimizer_path,
    rng_path,
    weights_path,
)
from pot.schedule import Schedule
from pot.seeds import derive_data_seed
from pot.tensors import parse_decimal
from proofnet.egress import EgressPolicy, EgressRefused, Resolver, system_resolver
from proofnet.messages.envelope import MAGIC_BYTES, is_sealed
from proofnet.messages.result_paths import attempt_result_name
from proofnet.pinned_git import PROXY_VARIABLES, pinned_git_options
from proofnet.redaction import redact_credentials
from proofnet.shard_fetch import DataFetchPolicy

if TYPE_CHECKING:
    from oracle.inputs.feed import ApiFeed, AttemptInfo, JobInfo
    from proofnet.messages.attestation import Attestation, UnitWork

POT_PREFIX = "pot/"


class SpotCheckUnavailable(Exception):
    """The check could not be made now (fetch failed, replay timed out): retry later."""


# The key of a failed verdict's report that lists the drawn segments that did not replay.
FAILED_SEGMENTS = "failed_segments"


@dataclass(frozen=True)
class SpotCheckVerdict:
    passed: bool
    reason: str | None  # an oracle.verification.verify.Reason value when not passed
    message: str
    seed: str = ""  # hex; drawn by the oracle after the root was committed
    segments: tuple[int, ...] = ()
    report: dict[str, Any] | None = None
    # Whose fault a failed check is ("provider" or "job"), and the verifier that replayed.
    fault: str | None = None
    verifier: str = ""
    # What the replay measured, for metering bounded by proof (oracle.metering).
    timing: ProofTiming | None = None


class SpotChecker(Protocol):
    def check(self, att: Attestation, job: JobInfo) -> SpotCheckVerdict: ...


@dataclass(frozen=True)
class SpotCheckRequest:
    """A self-contained replay job: whose trainer, which proof, which segments."""

    job_id: str
    repo_url: str
    commit: str
    pot_root: str
    job_seed: int
    nonce: str
    trainer: str
    config: dict[str, Any]
    schedule: dict[str, int]  # total_steps, steps_per_checkpoint, dataset_size, batch_size
    segments: tuple[int, ...]
    tolerance_ppm: int
    # A relay stage's replay: its unit index and its data files (relative to the work dir,
    # in the stage's order). Absent for a single-unit job.
    unit_index: int | None = None
    shards: tuple[str, ...] = ()
    # The proof of a lease stopped for the job's fault: its manifest may be partial.
    partial: bool = False
    # The manifest replayed from: a lost attempt's claim is replayed from its committed
    # prefix (which may commit fewer segments than the schedule), any other from its proof.
    manifest: str = MANIFEST_NAME

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> SpotCheckRequest:
        obj = json.loads(text)
        obj["segments"] = tuple(obj["segments"])
        obj["shards"] = tuple(obj.get("shards", ()))
        return cls(**obj)

    def job_env(self, job_dir: Path) -> JobEnv:
        schedule = Schedule(**self.schedule)
        return JobEnv(
            job_dir=job_dir,
            job_seed=self.job_seed,
            nonce=bytes.fromhex(self.nonce),
            steps_per_checkpoint=schedule.steps_per_checkpoint,
            schedule=schedule,
            trainer=self.trainer,
            config=self.config,
        )


def needed_files(segments: tuple[int, ...]) -> list[str]:
    """The proof files (names inside pot/) replaying `segments` reads: the checkpoints that
    open and close each (the data indices are recomputed from the seed)."""
    names: set[str] = set()
    for s in segments:
        for i in (s - 1, s):
            names.update(
                p.name
                for p in (weights_path(Path(), i), optimizer_path(Path(), i), rng_path(Path(), i))
            )
    return sorted(names)


class RepoCache:
    """Clones of model repositories keyed by URL; checkouts are exported per commit.

    `url_map` (whole URLs) and `rewrites` (prefixes, like git's `insteadOf`) send a spec's
    repository URL to a mirror the operator chose, for oracles that keep local mirrors or
    cannot reach the repository's host. A URL neither maps is the job's choice: it is
    fetched over https only, from its host's address resolved once and checked by `egress`
    (`proofnet.pinned_git`: public addresses only), never from this host's own network.
    """

    def __init__(
        self,
        root: Path,
        *,
        git: str = "git",
        timeout_s: float = 300.0,
        url_map: Mapping[str, str] | None = None,
        rewrites: Mapping[str, str] | None = None,
        egress: EgressPolicy | None = None,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.root = Path(root)
        self.url_map = dict(url_map or {})
        self.rewrites = sorted((rewrites or {}).items(), key=lambda kv: -len(kv[0]))
        self.egress = egress or EgressPolicy()
        self.resolver = resolver
        self.git = git
        self.timeout_s = timeout_s
        self._lock = threading.Lock()

    def source(self, url: str) -> str:
        """Where `url` is fetched from: the operator's mirror, or `url` itself."""
        if url in self.url_map:
            return self.url_map[url]
        for prefix, replacement in self.rewrites:
            if url.startswith(prefix):
                return replacement + url[len(prefix) :]
        return url

    def _options(self, url: str, source: str) -> tuple[str, ...]:
        if source != url:  # the operator's mirror (local paths included)
            return ("-c", "protocol.file.allow=always")
        try:
            return pinned_git_options(url, self.egress, self.resolver)
        except EgressRefused as exc:
            raise SpotCheckUnavailable(
                f"repository {redact_credentials(url)[:120]} is refused: {exc}"
            ) from exc

    def _run(self, *args: str, cwd: Path | None = None, options: tuple[str, ...] = ()) -> str:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        if "protocol.allow=never" in options:  # pinned: no proxy makes its own lookup
            for name in PROXY_VARIABLES:
                env.pop(name, None)
        try:
            done = subprocess.run(
                [self.git, *(options or ("-c", "protocol.file.allow=always")), *args],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SpotCheckUnavailable(f"git {args[0]} failed: {exc}") from exc
        if done.returncode != 0:
            said = redact_credentials(done.stderr.strip()[:500])
            raise SpotCheckUnavailable(f"git {args[0]} failed: {said}")
        return done.stdout

    def export(self, url: str, commit: str, dest: Path) -> None:
        """Write the tree of `commit` into `dest` (the commit id pins the content)."""
        source = self.source(url)
        mirror = self.root / hashlib.sha256(source.encode()).hexdigest()[:32]
        with self._lock:
            if not mirror.exists():
                options = self._options(url, source)
                self.root.mkdir(parents=True, exist_ok=True)
                self._run("clone", "--quiet", "--mirror", source, str(mirror), options=options)
            try:
                resolved = self._run("--git-dir", str(mirror), "rev-parse", f"{commit}^{{commit}}")
            except SpotCheckUnavailable:
                options = self._options(url, source)
                self._run("--git-dir", str(mirror), "fetch", "--quiet", "origin", options=options)
                resolved = self._run("--git-dir", str(mirror), "rev-parse", f"{commit}^{{commit}}")
        if resolved.strip() != commit:
            raise SpotCheckUnavailable(f"commit {commit} resolved to {resolved.strip()}")
        dest.mkdir(parents=True, exist_ok=True)
        archive = dest / ".tree.tar"
        self._run("--git-dir", str(mirror), "archive", "--format=tar", "-o", str(archive), commit)
        shutil.unpack_archive(str(archive), str(dest), format="tar")
        archive.unlink()


def replay_environ(request: SpotCheckRequest, work_dir: Path, python_lib: Path) -> dict[str, str]:
    """The harness's whole environment: the job's variables and a bare minimum, nothing
    of the oracle's own (settings, keys, tokens) beyond the numeric libraries' kernel and
    thread settings (`pot.env.DETERMINISM_VARIABLES`), as the worker's runtimes pass them."""
    environ = {
        **determinism_environ(os.environ),
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(work_dir),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": str(python_lib),
        launch.PYTHON_LIB: str(python_lib),
        **request.job_env(work_dir).to_environ(),
    }
    if request.unit_index is not None:
        environ.update(
            {
                UNIT_KIND: "stage",
                UNIT_INDEX: str(request.unit_index),
                SHARDS: ":".join(str(work_dir / s) for s in request.shards),
                INPUT_CHECKPOINTS: "",
            }
        )
    return environ


def run_request(
    request: SpotCheckRequest,
    work_dir: Path,
    *,
    timeout_s: float,
    python_lib: Path,
    python: str = sys.executable,
    command: str = "replay",
) -> dict[str, Any]:
    """Run the harness's replay in `work_dir` (holding `repo/` and `pot/`); its JSON report.
    `command` "replay-node" replays a cluster node's proof (`pot.cluster_harness`)."""
    tolerance = () if command == "replay-node" else ("--tolerance-ppm", str(request.tolerance_ppm))
    argv = launch.harness_argv(
        python,
        command,
        "--root",
        request.pot_root,
        "--segments",
        ",".join(str(s) for s in request.segments),
        *tolerance,
        "--code-dir",
        str(work_dir / "repo"),
        "--pot-dir",
        str(work_dir / "pot"),
        *(("--partial",) if request.partial else ()),
        *(("--prefix",) if request.manifest == PREFIX_NAME else ()),
    )
    try:
        done = subprocess.run(
            list(argv),
            cwd=work_dir / "repo",
            env=replay_environ(request, work_dir, python_lib),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise SpotCheckUnavailable(f"replay exceeded {timeout_s:.0f}s") from exc
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {
            "status": "error",
            "message": f"replay exited {done.returncode}: {done.stderr.strip()[-1000:]}",
        }
    report: dict[str, Any] = json.loads(lines[-1])
    return report


@dataclass
class LocalSpotChecker:
    """Runs spot checks on this machine: the local demo's only (job code on the oracle's
    host; `oracle.service` refuses it on any network but the devnet).

    `sign` is the oracle key's signing function: its signature over each attestation
    draws the segments replayed (`oracle.verification.proof_checks`).
    """

    feed: ApiFeed
    repos: RepoCache
    sign: Sign
    timeout_s: float = 600.0
    top: int = TOP_BY_NORM
    work_root: Path | None = None
    python: str = sys.executable
    # Where fetched data shards are kept by SHA-256 (a stage's shards are fetched once).
    data_cache: Path | None = None
    # Where this oracle's copy of the harness is kept (a temporary directory if None).
    harness_root: Path | None = None
    # How a stage's data reaches this host (the operator's rules: schemes, addresses,
    # local directories, size and time limits).
    data_policy: DataFetchPolicy = field(default_factory=DataFetchPolicy)

    def check(self, att: Attestation, job: JobInfo) -> SpotCheckVerdict:
        from oracle.inputs.feed import ArtifactMissing, FeedError
        from oracle.inputs.feed_units import unit_result_name

        spec = job.spec
        # A relay stage's proof is among its own uploads (`units/<index>/pot/...`).
        prefix = POT_PREFIX if att.unit is None else unit_result_name(att.unit.index, POT_PREFIX)
        try:
            raw = self.feed.artifact(job.job_id, prefix + MANIFEST_NAME)
        except ArtifactMissing:
            return SpotCheckVerdict(False, Reason.POT_MISSING, "no pot/manifest.json uploaded")
        except FeedError as exc:
            raise SpotCheckUnavailable(str(exc)) from exc
        try:
            manifest = Manifest.from_bytes(raw)
        except ProofError as exc:
            return SpotCheckVerdict(False, Reason.POT_INVALID, str(exc))
        try:
            check_manifest(manifest, att, spec, stop_segments=stop_segments(att, job))
        except ProofRejected as exc:
            return SpotCheckVerdict(False, exc.reason, exc.message)
        if spec.proof.trainer is None:
            return SpotCheckVerdict(
                False,
                Reason.SPOT_CHECK_FAILED,
                "the spec names no trainer (proof.trainer): no segment can be replayed",
            )
        first = 1 if att.unit is not None else own_first_segment(att, job)
        draw = draw_segments(manifest, att, spec, self.sign, top=self.top, first=first)
        assert spec.schedule is not None  # check_manifest refuses a spec without one
        request = self._request(att, job, draw)
        # A job, or a stage that opens a branch, starts from what the trainer builds.
        from_scratch = att.unit is None or not att.unit.inputs
        return self._replay(
            job, request, draw, manifest, raw, prefix, unit=att.unit, from_scratch=from_scratch
        )

    def check_attempt(
        self, att: Attestation, job: JobInfo, attempt: AttemptInfo
    ) -> SpotCheckVerdict:
        """The spot check of a lost attempt's claim (`oracle.verification.lost_attempts`):
        segments drawn from the ones it claims only, replayed from its own uploads with its
        committed prefix as the manifest (the prefix may go on past the claim's last
        checkpoint; leaves up to it are the attested root's, checked before)."""
        claimed = att.segments
        assert claimed is not None
        spec = job.spec
        prefix = attempt_result_name(attempt.attempt, POT_PREFIX)
        read = read_claimed_prefix(self.feed, att, job, attempt)
        if isinstance(read, SpotCheckVerdict):
            return read
        raw, manifest, claimed_part = read
        draw = draw_segments(claimed_part, att, spec, self.sign, top=self.top, first=claimed.first)
        request = replace(
            self._request(att, job, draw), pot_root=manifest.root, manifest=PREFIX_NAME
        )
        return self._replay(
            job, request, draw, manifest, raw, prefix, unit=None, from_scratch=claimed.first == 1
        )

    def _request(self, att: Attestation, job: JobInfo, draw: Draw) -> SpotCheckRequest:
        return replay_request(
            att,
            job,
            draw,
            tolerance_ppm=job.spec.proof.tolerance_ppm,
            partial=stop_segments(att, job) is not None,
        )

    def _replay(
        self,
        job: JobInfo,
        request: SpotCheckRequest,
        draw: Draw,
        manifest: Manifest,
        raw: bytes,
        prefix: str,
        *,
        unit: UnitWork | None,
        from_scratch: bool,
    ) -> SpotCheckVerdict:
        """Fetch the drawn segments' files under `prefix`, replay them, judge the report."""
        from oracle.inputs.feed import ArtifactMissing, FeedError

        spec = job.spec
        with tempfile.TemporaryDirectory(prefix="spotcheck-", dir=self.work_root) as tmp:
            work = Path(tmp)
            if unit is not None:
                request = self._with_stage_data(request, unit.index, job, work)
            pot = work / "pot"
            pot.mkdir()
            (pot / request.manifest).write_bytes(raw)
            for name in needed_files(draw.segments):
                try:
                    self.feed.save_artifact(job.job_id, prefix + name, pot / name)
                    with (pot / name).open("rb") as f:
                        if is_sealed(f.read(MAGIC_BYTES)):
                            # A sealed job's proof files are for its submitter and the
                            # verifiers the oracles draw; an oracle never opens them.
                            raise SpotCheckUnavailable(
                                f"pot/{name} is sealed: a drawn verifier must replay it"
                            )
                except ArtifactMissing:
                    return SpotCheckVerdict(
                        False,
                        Reason.POT_MISSING,
                        f"pot/{name} was not uploaded",
                        draw.seed.hex(),
                        draw.segments,
                    )
                except FeedError as exc:
                    raise SpotCheckUnavailable(str(exc)) from exc
            self.repos.export(spec.model.repo_url, spec.model.commit, work / "repo")
            lib = launch.install(self.harness_root or work / ".harness")
            started = time.monotonic()
            report = run_request(
                request, work, timeout_s=self.timeout_s, python_lib=lib, python=self.python
            )
            replay_ms = int((time.monotonic() - started) * 1000)
        report["draw_signature"] = draw.signature.hex()
        verdict = judge(report, manifest, draw, request.tolerance_ppm, from_scratch=from_scratch)
        return replace(verdict, timing=replay_timing(manifest, draw.segments, replay_ms))

    def _with_stage_data(
        self, request: SpotCheckRequest, index: int, job: JobInfo, work: Path
    ) -> SpotCheckRequest:
        """Fetch the planned shards of stage `index` into `work/data/`; the request that
        replays with them. (The unit was checked against the plan before the spot check.)"""
        from proofnet.messages.topology import plan

        spec = job.spec
        if spec.topology is None:
            raise SpotCheckUnavailable(f"job {job.job_id} has no topology, yet a unit attested")
        units = {u.index: u for u in plan(spec.topology)}
        unit = units.get(index)
        if unit is None or unit.kind != "stage":
            raise SpotCheckUnavailable(f"unit {index} is not a planned stage of {job.job_id}")
        shards = [spec.data[i] for i in unit.shards]
        try:
            paths = fetch_shards(
                shards,
                work / "data",
                disk_mb=spec.resources.disk_mb,
                policy=self.data_policy,
                cache_dir=self.data_cache,
            )
        except StageDataError as exc:
            # The data host failing (or serving other bytes) is not the provider's doing.
            raise SpotCheckUnavailable(f"stage {index}'s data: {exc}") from exc
        return replace(
            request,
            unit_index=index,
            shards=tuple(str(p.relative_to(work)) for p in paths),
        )


def replay_timing(
    manifest: Manifest, segments: tuple[int, ...], replay_ms: int, first_ms: int | None = None
) -> ProofTiming:
    """The steps the manifest commits (its last checkpoint's step) and the steps the replay
    of `segments` ran, with the replay's wall time; `first_ms`, the repeat of the first of
    `segments` alone when the verifier timed it (`oracle.verification.metering`)."""
    leaves = manifest.leaves
    replayed = sum(leaves[s].step - leaves[s - 1].step for s in segments if 0 < s < len(leaves))
    committed = leaves[-1].step if leaves else 0
    head = min(segments, default=0)
    first = leaves[head].step - leaves[head - 1].step if 0 < head < len(leaves) else 0
    return ProofTiming(
        committed_steps=committed,
        replayed_steps=replayed,
        replay_ms=replay_ms,
        first_steps=first,
        first_ms=first_ms if first else None,
    )


def _replayed(result: Mapping[str, Any], leaf_weights: str, tolerance_ppm: int) -> bool:
    if result.get("weights_hash") == leaf_weights:
        return True
    try:
        distance = float(parse_decimal(str(result.get("distance"))))
    except ArithmeticError:
        return False
    return tolerance_ppm > 0 and distance * 1_000_000 <= tolerance_ppm


def _norm_consistent(result: Mapping[str, Any], committed: str | None) -> bool:
    if committed is None:
        return False
    try:
        claimed = float(parse_decimal(committed))
        recomputed = float(parse_decimal(str(result.get("update_norm"))))
    except ArithmeticError:
        return False
    return math.isclose(claimed, recomputed, rel_tol=1e-6, abs_tol=1e-12)


def segment_replays(result: object, leaf: Any, tolerance_ppm: int) -> bool:
    """Whether one segment's replay result reached its committed leaf: the weights (or
    within the tolerance) with a consistent update norm."""
    return (
        isinstance(result, Mapping)
        and _replayed(result, leaf.weights, tolerance_ppm)
        and _norm_consistent(result, leaf.update_norm)
    )


def judge(
    report: dict[str, Any],
    manifest: Manifest,
    draw: Draw,
    tolerance_ppm: int,
    *,
    from_scratch: bool,
) -> SpotCheckVerdict:
    """The verdict on a replay's report, against the oracle's own copy of the manifest:
    every drawn segment replayed to its committed weights with a consistent update norm,
    and (for a job that starts from scratch) checkpoint 0 is what the trainer builds."""
    seed, segments = draw.seed.hex(), draw.segments
    status = report.get("status")
    message = str(report.get("message", ""))[:2000]
    if status == "proof_error":
        return SpotCheckVerdict(False, Reason.POT_INVALID, message, seed, segments, report)
    if status not in ("passed", "failed"):
        # The replay crashed or printed no report: the proof cannot be confirmed, and no
        # committed segment is shown to be false (not a fraud: `Reason.REPLAY_ERROR`).
        return SpotCheckVerdict(
            False, Reason.REPLAY_ERROR, f"replay error: {message}", seed, segments, report
        )
    results = report.get("results")
    by_segment = {r.get("segment"): r for r in (results if isinstance(results, list) else [])}
    failed = []
    for segment in segments:
        if not segment_replays(by_segment.get(segment), manifest.leaves[segment], tolerance_ppm):
            failed.append(segment)
    if failed:
        return SpotCheckVerdict(
            False,
            Reason.SPOT_CHECK_FAILED,
            f"segments {failed} do not replay to their committed checkpoints",
            seed,
            segments,
            # Named in a co-signer's refusal (proofnet.messages.segment_refusal).
            {**report, FAILED_SEGMENTS: failed},
        )
    if from_scratch and report.get("initial_weights_hash") != manifest.leaves[0].weights:
        return SpotCheckVerdict(
            False,
            Reason.POT_INITIAL_STATE_MISMATCH,
            "checkpoint 0 is not the state the job's trainer builds from the job seed",
            seed,
            segments,
            report,
        )
    return SpotCheckVerdict(True, None, "", seed, segments, report)


def read_claimed_prefix(
    feed: Any, att: Attestation, job: JobInfo, attempt: AttemptInfo
) -> tuple[bytes, Manifest, Manifest] | SpotCheckVerdict:
    """A lost attempt's committed prefix as uploaded (its bytes, the manifest, and the part
    up to the claim's last checkpoint), once it follows the schedule's data order under the
    attempt's nonce; or the verdict that it does not (missing, malformed, no trainer to
    replay it with, another data order). SpotCheckUnavailable: the API could not be read."""
    from oracle.inputs.feed import ArtifactMissing, FeedError

    claimed = att.segments
    assert claimed is not None
    spec = job.spec
    try:
        raw = feed.artifact(
            job.job_id, attempt_result_name(attempt.attempt, POT_PREFIX) + PREFIX_NAME
        )
    except ArtifactMissing:
        return SpotCheckVerdict(False, Reason.POT_MISSING, "no pot/prefix.json uploaded")
    except FeedError as exc:
        raise SpotCheckUnavailable(str(exc)) from exc
    try:
        manifest = Manifest.from_bytes(raw)
    except ProofError as exc:
        return SpotCheckVerdict(False, Reason.POT_INVALID, str(exc))
    if spec.proof.trainer is None or spec.schedule is None:
        return SpotCheckVerdict(
            False,
            Reason.SPOT_CHECK_FAILED,
            "the spec names no trainer (proof.trainer): no segment can be replayed",
        )
    violation = check_prefix_conformance(
        manifest, spec.schedule, derive_data_seed(spec.seed, bytes.fromhex(att.nonce))
    )
    if violation is not None:
        return SpotCheckVerdict(False, Reason.POT_DATA_ORDER_MISMATCH, violation.message)
    claimed_part = Manifest(
        steps_per_checkpoint=manifest.steps_per_checkpoint,
        data_seed=manifest.data_seed,
        leaves=manifest.leaves[: claimed.last + 1],
    )
    return raw, manifest, claimed_part


def replay_request(
    att: Attestation, job: JobInfo, draw: Draw, *, tolerance_ppm: int, partial: bool = False
) -> SpotCheckRequest:
    """What a local replay of `draw`'s segments of `att`'s proof is given: the job's
    repository, trainer and schedule, the attested root and nonce."""
    spec = job.spec
    schedule = spec.schedule
    assert schedule is not None and spec.proof.trainer is not None
    return SpotCheckRequest(
        job_id=job.job_id,
        repo_url=spec.model.repo_url,
        commit=spec.model.commit,
        pot_root=att.pot_root,
        job_seed=spec.seed,
        nonce=att.nonce,
        trainer=spec.proof.trainer,
        config=dict(spec.proof.config or {}),
        schedule={
            "total_steps": schedule.total_steps,
            "steps_per_checkpoint": schedule.steps_per_checkpoint,
            "dataset_size": schedule.dataset_size,
            "batch_size": schedule.batch_size,
        },
        segments=draw.segments,
        tolerance_ppm=tolerance_ppm,
        partial=partial,
    )
