"""Proof-of-training spot checks: replay a few committed segments of a job and compare.

The oracle fetches the job's manifest and the checkpoint files it needs from the API's
content store (the worker uploads its `pot/` directory as results named `pot/<file>`),
picks the segments with a seed drawn only now (after the worker signed its root), fetches
the job's training code at the pinned commit, and replays the segments in a subprocess
under a time limit: the code is the submitter's, not the oracle's.

The work is described by a `SpotCheckRequest` (JSON) and answered by a JSON report, so a
verification job can later be handed to another worker instead of run here: whoever runs
`python -m oracle.spotcheck_runner` with the request on stdin, in a directory holding the
repository and the proof files, gives the same answer.

Training code convention: the repository's root holds `proofnet_replay.py` with
`make_trainer(job: worker.pot.env.JobEnv, commands: list[list[str]])` returning a
`worker.pot.Trainer`, or `(trainer, expected_indices)` where `expected_indices(step)`
recomputes the committed data indices from the job's data seed.

A relay stage trained on its own shards of `spec.data`, so its replay needs them: the oracle
fetches the stage's planned shards (SHA-256 checked, like a worker does) into `data/` of the
work dir, and `make_trainer` runs with the stage's unit environment as the stage had it
(`PROOFNET_UNIT_KIND`, `PROOFNET_UNIT_INDEX`, `PROOFNET_SHARDS`; no input checkpoints: a
replayed segment starts from the committed checkpoint that opens it).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from proofnet.messages.envelope import MAGIC_BYTES, is_sealed
from worker.pot.manifest import (
    MANIFEST_NAME,
    Manifest,
    ProofError,
    indices_path,
    optimizer_path,
    rng_path,
    weights_path,
)
from worker.pot.seeds import derive_data_seed, select_spot_checks

if TYPE_CHECKING:
    from oracle.feed import ApiFeed, JobInfo
    from proofnet.messages.attestation import Attestation

POT_PREFIX = "pot/"
REPLAY_MODULE = "proofnet_replay"


class SpotCheckUnavailable(Exception):
    """The check could not be made now (fetch failed, replay timed out): retry later."""


@dataclass(frozen=True)
class SpotCheckVerdict:
    passed: bool
    reason: str | None  # an oracle.verify.Reason value when not passed
    message: str
    seed: str = ""  # hex; chosen by the oracle after the root was committed
    segments: tuple[int, ...] = ()
    report: dict[str, Any] | None = None


class SpotChecker(Protocol):
    def check(self, att: Attestation, job: JobInfo) -> SpotCheckVerdict: ...


@dataclass(frozen=True)
class SpotCheckRequest:
    """A self-contained replay job: what to replay and how to judge it."""

    job_id: str
    repo_url: str
    commit: str
    commands: tuple[tuple[str, ...], ...]
    pot_root: str
    job_seed: int
    nonce: str
    steps_per_checkpoint: int
    segments: tuple[int, ...]
    tolerance_ppm: int
    # A relay stage's replay: its unit index and its data files (relative to the work dir,
    # in the stage's order). Absent for a single-unit job.
    unit_index: int | None = None
    shards: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> SpotCheckRequest:
        obj = json.loads(text)
        obj["commands"] = tuple(tuple(c) for c in obj["commands"])
        obj["segments"] = tuple(obj["segments"])
        obj["shards"] = tuple(obj.get("shards", ()))
        return cls(**obj)


def needed_files(segments: tuple[int, ...]) -> list[str]:
    """The proof files (names inside pot/) replaying `segments` reads."""
    names: set[str] = set()
    for s in segments:
        for i in (s - 1, s):
            names.update(
                p.name
                for p in (weights_path(Path(), i), optimizer_path(Path(), i), rng_path(Path(), i))
            )
        names.add(indices_path(Path(), s).name)
    return sorted(names)


class RepoCache:
    """Clones of model repositories keyed by URL; checkouts are exported per commit.

    `url_map` redirects a spec's repository URL to a mirror (like git's `insteadOf`), for
    oracles that keep local mirrors or cannot reach the repository's host.
    """

    def __init__(
        self,
        root: Path,
        *,
        git: str = "git",
        timeout_s: float = 300.0,
        url_map: Mapping[str, str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.url_map = dict(url_map or {})
        self.git = git
        self.timeout_s = timeout_s
        self._lock = threading.Lock()

    def _run(self, *args: str, cwd: Path | None = None) -> str:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        try:
            done = subprocess.run(
                [self.git, "-c", "protocol.file.allow=always", *args],
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
            raise SpotCheckUnavailable(f"git {args[0]} failed: {done.stderr.strip()[:500]}")
        return done.stdout

    def export(self, url: str, commit: str, dest: Path) -> None:
        """Write the tree of `commit` into `dest` (the commit id pins the content)."""
        url = self.url_map.get(url, url)
        mirror = self.root / hashlib.sha256(url.encode()).hexdigest()[:32]
        with self._lock:
            if not mirror.exists():
                self.root.mkdir(parents=True, exist_ok=True)
                self._run("clone", "--quiet", "--mirror", url, str(mirror))
            try:
                resolved = self._run("--git-dir", str(mirror), "rev-parse", f"{commit}^{{commit}}")
            except SpotCheckUnavailable:
                self._run("--git-dir", str(mirror), "fetch", "--quiet", "origin")
                resolved = self._run("--git-dir", str(mirror), "rev-parse", f"{commit}^{{commit}}")
        if resolved.strip() != commit:
            raise SpotCheckUnavailable(f"commit {commit} resolved to {resolved.strip()}")
        dest.mkdir(parents=True, exist_ok=True)
        archive = dest / ".tree.tar"
        self._run("--git-dir", str(mirror), "archive", "--format=tar", "-o", str(archive), commit)
        shutil.unpack_archive(str(archive), str(dest), format="tar")
        archive.unlink()


def run_request(
    request: SpotCheckRequest, work_dir: Path, *, timeout_s: float, python: str = sys.executable
) -> dict[str, Any]:
    """Run the replay subprocess in `work_dir` (holding `repo/` and `pot/`); its JSON report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROOFNET_")}
    # The runner imports worker.pot from this installation, the training code from repo/.
    repo_root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([repo_root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    try:
        done = subprocess.run(
            [python, "-m", "oracle.spotcheck_runner", str(work_dir)],
            input=request.to_json(),
            cwd=work_dir,
            env=env,
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
    """Runs spot checks on this machine (the oracle's own verifier)."""

    feed: ApiFeed
    repos: RepoCache
    timeout_s: float = 600.0
    top: int = 2  # the segments with the largest update norm, as ProofParams documents
    work_root: Path | None = None
    python: str = sys.executable
    # Where fetched data shards are kept by SHA-256 (a stage's shards are fetched once).
    data_cache: Path | None = None
    _seed: Any = field(default=secrets.token_bytes)

    def check(self, att: Attestation, job: JobInfo) -> SpotCheckVerdict:
        from oracle.feed import ArtifactMissing, FeedError
        from oracle.feed_units import unit_result_name
        from oracle.verify import Reason

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
        if manifest.root != att.pot_root:
            return SpotCheckVerdict(
                False,
                Reason.POT_ROOT_MISMATCH,
                f"manifest root {manifest.root} is not the attested root {att.pot_root}",
            )
        nonce = bytes.fromhex(att.nonce)
        if manifest.steps_per_checkpoint != spec.proof.steps_per_checkpoint:
            return SpotCheckVerdict(
                False, Reason.POT_INVALID, "manifest's steps per checkpoint differ from the spec"
            )
        if manifest.data_seed != derive_data_seed(spec.seed, nonce):
            return SpotCheckVerdict(
                False, Reason.POT_INVALID, "manifest's data seed is not derived from seed and nonce"
            )
        seed = self._seed(32)
        segments = select_spot_checks(
            manifest.update_norms(), seed=seed, random_count=spec.proof.spot_checks, top=self.top
        )
        request = SpotCheckRequest(
            job_id=job.job_id,
            repo_url=spec.model.repo_url,
            commit=spec.model.commit,
            commands=tuple(tuple(c) for c in spec.commands),
            pot_root=att.pot_root,
            job_seed=spec.seed,
            nonce=att.nonce,
            steps_per_checkpoint=spec.proof.steps_per_checkpoint,
            segments=segments,
            tolerance_ppm=spec.proof.tolerance_ppm,
        )
        with tempfile.TemporaryDirectory(prefix="spotcheck-", dir=self.work_root) as tmp:
            work = Path(tmp)
            if att.unit is not None:
                request = self._with_stage_data(request, att.unit.index, job, work)
            pot = work / "pot"
            pot.mkdir()
            (pot / MANIFEST_NAME).write_bytes(raw)
            for name in needed_files(segments):
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
                        seed.hex(),
                        segments,
                    )
                except FeedError as exc:
                    raise SpotCheckUnavailable(str(exc)) from exc
            self.repos.export(spec.model.repo_url, spec.model.commit, work / "repo")
            report = run_request(request, work, timeout_s=self.timeout_s, python=self.python)
        return verdict_from_report(report, seed.hex(), segments)

    def _with_stage_data(
        self, request: SpotCheckRequest, index: int, job: JobInfo, work: Path
    ) -> SpotCheckRequest:
        """Fetch the planned shards of stage `index` into `work/data/`; the request that
        replays with them. (The unit was checked against the plan before the spot check.)"""
        from proofnet.messages.topology import plan
        from worker.workspace import WorkspaceError, fetch_data

        spec = job.spec
        if spec.topology is None:
            raise SpotCheckUnavailable(f"job {job.job_id} has no topology, yet a unit attested")
        units = {u.index: u for u in plan(spec.topology)}
        unit = units.get(index)
        if unit is None or unit.kind != "stage":
            raise SpotCheckUnavailable(f"unit {index} is not a planned stage of {job.job_id}")
        shards = [spec.data[i] for i in unit.shards]
        try:
            paths = fetch_data(shards, work / "data", cache_dir=self.data_cache)
        except WorkspaceError as exc:
            # The data host failing (or serving other bytes) is not the provider's doing.
            raise SpotCheckUnavailable(f"stage {index}'s data: {exc}") from exc
        return replace(
            request,
            unit_index=index,
            shards=tuple(str(p.relative_to(work)) for p in paths),
        )


def verdict_from_report(
    report: dict[str, Any], seed: str, segments: tuple[int, ...]
) -> SpotCheckVerdict:
    from oracle.verify import Reason

    status = report.get("status")
    message = str(report.get("message", ""))[:2000]
    if status == "passed":
        return SpotCheckVerdict(True, None, "", seed, segments, report)
    if status == "proof_error":
        return SpotCheckVerdict(False, Reason.POT_INVALID, message, seed, segments, report)
    if status == "failed":
        return SpotCheckVerdict(False, Reason.SPOT_CHECK_FAILED, message, seed, segments, report)
    # The job's own replay code crashed or is missing: the proof cannot be confirmed.
    return SpotCheckVerdict(
        False, Reason.SPOT_CHECK_FAILED, f"replay error: {message}", seed, segments, report
    )
