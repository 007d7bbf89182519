"""What a finished job hands back: its declared result files, PoT root and final metrics.

Result files are the regular files under the job dir that a result glob of the spec declares
(`proofnet.messages.result_paths`, the same rule the API checks uploads against). Symbolic
links are never followed: under the process runtime a job could otherwise point a result at
any file of the host.

Proof-of-training files (`pot/<file>`, declared by a `pot/**` result glob) are uploaded like
results, for the spot checks, but are not named in the attestation: the PoT root already
commits to every one of them. A sealed job seals them as it seals its results (`seals`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from pot.cluster import CLUSTER_NAME
from pot.cluster_harness import load_node
from pot.manifest import (
    MANIFEST_NAME,
    PREFIX_NAME,
    Manifest,
    ProofError,
    optimizer_path,
    rng_path,
    weights_path,
)
from pot.recorder import POT_SUBDIR
from proofnet.messages.envelope import SealingError, content_key, seal_file
from proofnet.messages.jobspec import ResultSpec
from proofnet.messages.result_paths import ResultNameError, check_result_name, declared_by

MAX_RESULTS = 256  # what an attestation can name
PROOF_PREFIX = POT_SUBDIR + "/"
METRICS_FILE = "metrics.json"
_METRIC = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")
_INT64 = (-(2**63), 2**63 - 1)
_SKIP_DIRS = {".git"}


class ResultsError(Exception):
    """The job's outputs do not meet its spec; the job counts as failed."""


@dataclass(frozen=True)
class CollectedResult:
    name: str  # POSIX path relative to the job dir
    path: Path
    sha256: str
    size: int
    kind: str
    glob: str


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def collect_results(
    job_dir: Path, specs: Sequence[ResultSpec], *, partial: bool = False
) -> list[CollectedResult]:
    """Every declared result file, sorted by name; a glob that matches nothing is an error,
    unless the run is `partial` (its lease was stopped for the job's fault: what it made)."""
    job_dir = Path(job_dir)
    globs = [s.path for s in specs]
    kinds = {s.path: s.kind for s in specs}
    found: list[CollectedResult] = []
    matched: set[str] = set()
    for root, dirs, files in os.walk(job_dir, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not (root == str(job_dir) and d in _SKIP_DIRS))
        for fname in sorted(files):
            path = Path(root) / fname
            name = path.relative_to(job_dir).as_posix()
            glob = declared_by(globs, name)
            if glob is None:
                continue
            try:
                check_result_name(name)
            except ResultNameError as e:
                raise ResultsError(f"result file {name[:120]!r} cannot be returned: {e}") from e
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode):
                raise ResultsError(f"result {name!r} is not a regular file (a symbolic link?)")
            matched.add(glob)
            found.append(
                CollectedResult(
                    name=name,
                    path=path,
                    sha256=sha256_file(path),
                    size=info.st_size,
                    kind=kinds[glob],
                    glob=glob,
                )
            )
            if len(found) > MAX_RESULTS:
                raise ResultsError(f"the job declared more than {MAX_RESULTS} result files")
    missing = [g for g in globs if g not in matched]
    if missing and not partial:
        raise ResultsError(f"declared results were not produced: {', '.join(missing)}")
    return sorted(found, key=lambda r: r.name)


def promote_prefix(job_dir: Path) -> int:
    """Make the committed prefix (`pot/prefix.json`, what the harness wrote at the last
    commit) the run's manifest, for a run stopped before it finished; the segments it
    commits. ResultsError when the run committed no segment."""
    pot_dir = Path(job_dir) / POT_SUBDIR
    if (pot_dir / MANIFEST_NAME).exists():
        # The run finished as the stop came: its manifest stands (paid as stopped still).
        try:
            return Manifest.load(pot_dir).segments
        except (ProofError, OSError) as e:
            raise ResultsError(f"cannot read the proof-of-training manifest: {e}") from e
    try:
        prefix = Manifest.load(pot_dir, name=PREFIX_NAME)
    except (ProofError, OSError) as e:
        raise ResultsError(f"the stopped run committed no readable prefix: {e}") from e
    if prefix.segments < 1:
        raise ResultsError("the stopped run committed no segment")
    prefix.save(pot_dir)
    return prefix.segments


def split_proof_files(
    collected: Sequence[CollectedResult],
) -> tuple[list[CollectedResult], list[CollectedResult]]:
    """(results the attestation names, proof-of-training files under `pot/`)."""
    results = [r for r in collected if not r.name.startswith(PROOF_PREFIX)]
    proof = [r for r in collected if r.name.startswith(PROOF_PREFIX)]
    return results, proof


def declares_proof(specs: Sequence[ResultSpec]) -> bool:
    """Whether the spec's globs declare the job's proof files (its manifest stands for all)."""
    return declared_by([s.path for s in specs], PROOF_PREFIX + MANIFEST_NAME) is not None


def committed_checkpoint(job_dir: Path) -> list[CollectedResult]:
    """What a run stopped early leaves for the next provider to resume from: its committed
    prefix (`pot/prefix.json`) and the files of the prefix's last checkpoint, as results to
    upload under `pot/` (none when no checkpoint after the initial one was committed, or the
    files are not there)."""
    pot_dir = Path(job_dir) / POT_SUBDIR
    try:
        prefix = Manifest.load(pot_dir, name=PREFIX_NAME)
    except ProofError:
        return []
    if prefix.segments < 1:
        return []
    paths = [pot_dir / PREFIX_NAME] + [
        path(pot_dir, prefix.segments) for path in (weights_path, optimizer_path, rng_path)
    ]
    collected = []
    for path in paths:
        if not path.is_file() or path.is_symlink():
            return []
        collected.append(
            CollectedResult(
                name=PROOF_PREFIX + path.name,
                path=path,
                sha256=sha256_file(path),
                size=path.stat().st_size,
                kind="model",
                glob=PROOF_PREFIX + "**",
            )
        )
    return collected


def pot_root(job_dir: Path) -> str:
    """The proof-of-training root the job attests: its manifest's Merkle root
    (`<job dir>/pot/`), or, for a cluster node that recorded a node proof, the root of its
    `cluster.json` (which names the manifest's root: `pot.cluster`)."""
    pot = Path(job_dir) / POT_SUBDIR
    try:
        if (pot / CLUSTER_NAME).exists():
            return load_node(pot)[0].root
        return Manifest.load(pot).root
    except ProofError as e:
        raise ResultsError(f"the job left no valid proof-of-training manifest: {e}") from e
    except OSError as e:
        raise ResultsError(f"cannot read the proof-of-training manifest: {e}") from e


def _metric_value(value: Any) -> int | str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if _INT64[0] <= value <= _INT64[1] else str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        text = format(Decimal(repr(value)), "f")
        return text if _DECIMAL.fullmatch(text) else None
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        return value
    return None


def final_metrics(results: Sequence[CollectedResult], limit: int = 64) -> dict[str, int | str]:
    """Numeric top-level entries of the declared `metrics.json` result, if there is one.

    Integers stay integers; floats become decimal strings (attestations carry no floats);
    anything else is left out rather than guessed at."""
    source = next((r for r in results if r.kind == "json" and r.path.name == METRICS_FILE), None)
    if source is None:
        return {}
    try:
        obj = json.loads(source.path.read_bytes())
    except (OSError, ValueError) as e:
        raise ResultsError(f"{source.name} is not valid JSON: {e}") from e
    if not isinstance(obj, dict):
        return {}
    metrics: dict[str, int | str] = {}
    for key in sorted(obj):
        value = _metric_value(obj[key])
        if value is not None and _METRIC.fullmatch(key) and len(metrics) < limit:
            metrics[key] = value
    return metrics


def seal_results(
    results: Sequence[CollectedResult],
    out_dir: Path,
    *,
    secret: bytes,
    recipients: Sequence[str],
) -> list[CollectedResult]:
    """Each file sealed (`proofnet.messages.envelope`, streamed: never read whole) to the
    `recipients` (X25519 public keys, hex) under its content key derived from the lease's
    `secret`, written under `out_dir`; the returned entries name the sealed files and their
    hashes, which are what gets uploaded (and, for results, attested). A file that changed
    since it was hashed is refused."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sealed: list[CollectedResult] = []
    for i, r in enumerate(results):
        path = out_dir / f"{i:04d}.sealed"
        try:
            done = seal_file(
                r.path,
                path,
                name=r.name,
                key=content_key(secret, r.name),
                recipients=recipients,
                sha256=r.sha256,
            )
        except SealingError as e:
            raise ResultsError(f"cannot seal result {r.name}: {e}") from e
        except OSError as e:
            raise ResultsError(f"cannot read result {r.name}: {e}") from e
        sealed.append(replace(r, path=path, sha256=done.sha256, size=done.size))
    return sealed


def seals(name: str) -> bool:
    """Whether a sealed job seals this file: every result and proof file but the proof's
    commitments, which hold hashes, losses and update norms only and are what the oracles
    check the schedule and root against: the manifest, a cluster node's proof
    (`cluster.json`) and step records (`*.contrib`, digests of what each rank sent), and the
    committed prefix, by which the API picks the checkpoint a lost attempt resumes from
    (api.services.resume)."""
    if name in (
        PROOF_PREFIX + MANIFEST_NAME,
        PROOF_PREFIX + CLUSTER_NAME,
        PROOF_PREFIX + PREFIX_NAME,
    ):
        return False
    return not (name.startswith(PROOF_PREFIX) and name.endswith(".contrib"))
