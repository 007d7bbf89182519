"""Checkpoints uploaded while the job trains, so a provider that vanishes mid-job (its machine
dies, its network goes) leaves something to resume from, not only one that shuts down
cleanly (`worker.results.committed_checkpoint`).

The pot recorder rewrites `pot/prefix.json` after every checkpoint it commits. A background
thread looks at it every `interval_s`; for each checkpoint committed since its last pass it
uploads the checkpoint's weights, optimizer and RNG files (checkpoint 0 too: a spot check
of the first segment replays from it), then the prefix as it read it, so the API never
holds a prefix naming a checkpoint whose files it does not hold. Files are uploaded only
when they are the ones the prefix's leaf commits (weights hash, optimizer hash and RNG bytes
bound by the leaf's state hash): a checkpoint still being written is taken on the next pass.
Uploads go through the worker's ordinary streamed, resumable upload (`WorkerAgent._upload`).

With each pass the worker also signs, for every checkpoint `k` it uploaded (from the first
it proves), its own claim for the segments up to `k` (`sign_claim`: an attestation naming
its attempt and segments, the root of the prefix trimmed to `k`, its share of the price)
and uploads it as `pot/claim-<k>.cose`. A provider that is lost never has to come back to
be paid for what it proved: when the job resumes from its checkpoint `k`, the oracle takes
that claim from the API (`oracle.verification.lost_attempts`).

A sealed job's checkpoint files are sealed to the submitter like every other proof file
(`worker.results.seals`; the prefix stays clear: commitments only) before they leave the
machine; the API then cannot check them against the prefix, so the resuming provider does,
once the submitter granted it their keys (worker/sealed_resume.py, docs/protocol.md). Its
claims are signed and uploaded in the clear all the same (hashes only); a drawn verifier
of the lost attempt's segments gets their keys from this worker, which answers key requests
for its own leases' files whether or not the lease still stands (worker.key_grants).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from pot.manifest import (
    PREFIX_NAME,
    Leaf,
    Manifest,
    ProofError,
    optimizer_path,
    rng_path,
    state_hash,
    weights_path,
)
from pot.recorder import POT_SUBDIR
from worker.results import PROOF_PREFIX, CollectedResult, sha256_file

log = logging.getLogger("worker.checkpoints")

Upload = Callable[[list[CollectedResult]], None]
Seal = Callable[[list[CollectedResult]], list[CollectedResult]]
# (checkpoint k, root of the prefix trimmed to k) -> the signed claim (COSE), or None.
SignClaim = Callable[[int, str], bytes | None]
CLAIMS = "claims"  # where the signed claims are written (beside the prefix snapshot)


def _entry(path: Path, name: str | None = None, digest: str | None = None) -> CollectedResult:
    return CollectedResult(
        name=PROOF_PREFIX + (name or path.name),
        path=path,
        sha256=digest or sha256_file(path),
        size=path.stat().st_size,
        kind="model",
        glob=PROOF_PREFIX + "**",
    )


def checkpoint_files(pot_dir: Path, leaf: Leaf, at: int) -> list[CollectedResult] | None:
    """Checkpoint `at`'s three files when they are the ones `leaf` commits, else None (not
    written yet, or not those)."""
    paths = [p(pot_dir, at) for p in (weights_path, optimizer_path, rng_path)]
    if any(not p.is_file() or p.is_symlink() for p in paths):
        return None
    try:
        entries = [_entry(p) for p in paths]
        rng = paths[2].read_bytes()
    except OSError:
        return None
    if entries[0].sha256 != leaf.weights or state_hash(entries[1].sha256, rng) != leaf.state:
        return None
    return entries


class CheckpointUploader:
    """Uploads each committed checkpoint of the job in `job_dir` as training proceeds."""

    def __init__(
        self,
        job_dir: Path,
        upload: Upload,
        *,
        snapshot_dir: Path,
        seal: Seal | None = None,
        interval_s: float = 10.0,
        start: int = 0,
        note: Callable[[str], None] | None = None,
        sign_claim: SignClaim | None = None,
    ) -> None:
        """`snapshot_dir`: where the prefix is copied before its upload (outside the job's
        work dir); `start`: the first checkpoint to upload (a resumed run holds files from
        the checkpoint it resumed at only)."""
        self.pot_dir = Path(job_dir) / POT_SUBDIR
        self.snapshot_dir = Path(snapshot_dir)
        self.upload = upload
        self.seal = seal
        self.interval_s = interval_s
        self.note = note or (lambda _message: None)
        self.sign_claim = sign_claim
        # The first checkpoint that ends a segment this run proves (a resumed run proves
        # the ones after the checkpoint it resumed at).
        self.first_claim = max(start + 1, 1)
        # The last checkpoint whose files are uploaded (start - 1: none yet).
        self.uploaded = start - 1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="checkpoint-upload", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the pass under way (no new pass starts)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.pass_once()
            except Exception as e:  # never take the run down: the final upload still comes
                log.warning("checkpoint upload failed (retried next pass): %s", e)

    def pass_once(self) -> int:
        """Upload the checkpoints committed since the last pass, then the prefix naming
        them; how many checkpoints were uploaded."""
        try:
            raw = (self.pot_dir / PREFIX_NAME).read_bytes()
            prefix = Manifest.from_bytes(raw)
        except (OSError, ProofError):
            return 0  # nothing committed yet, or the recorder is replacing it
        batch: list[CollectedResult] = []
        last = self.uploaded
        for at in range(self.uploaded + 1, len(prefix.leaves)):
            files = checkpoint_files(self.pot_dir, prefix.leaves[at], at)
            if files is None:
                break
            batch.extend(files)
            last = at
        if last == self.uploaded:
            return 0
        # The prefix as read, trimmed to what is uploaded, from a snapshot the recorder
        # does not rewrite under the upload.
        shipped = Manifest(
            steps_per_checkpoint=prefix.steps_per_checkpoint,
            data_seed=prefix.data_seed,
            leaves=prefix.leaves[: last + 1],
        )
        self.snapshot_dir.mkdir(parents=True, exist_ok=True)
        snapshot = shipped.save(self.snapshot_dir, name=PREFIX_NAME)
        head = _entry(snapshot, PREFIX_NAME, hashlib.sha256(snapshot.read_bytes()).hexdigest())
        self.upload(self._sealed(batch))
        self.upload(self._sealed([head]))
        claims = self._claims(shipped, range(max(self.uploaded + 1, self.first_claim), last + 1))
        if claims:
            # After the prefix: a claim never names a checkpoint the API does not hold.
            self.upload(claims)
        count = last - self.uploaded
        self.uploaded = last
        self.note(f"uploaded checkpoint {last} and the committed prefix (resumable from there)")
        return count

    def _claims(self, shipped: Manifest, checkpoints: range) -> list[CollectedResult]:
        """The signed claims for `checkpoints` (written beside the prefix snapshot), never
        sealed, a sealed job's too: a claim holds hashes only (the prefix's root, no
        result), and the oracles must read it to pay a lost attempt; its segments' files
        stay sealed, their keys granted to the drawn verifier by this worker
        (worker.key_grants)."""
        if self.sign_claim is None:
            return []
        out = []
        folder = self.snapshot_dir / CLAIMS
        folder.mkdir(parents=True, exist_ok=True)
        for at in checkpoints:
            root = Manifest(
                steps_per_checkpoint=shipped.steps_per_checkpoint,
                data_seed=shipped.data_seed,
                leaves=shipped.leaves[: at + 1],
            ).root
            cose = self.sign_claim(at, root)
            if cose is None:
                continue
            path = folder / f"claim-{at}.cose"
            path.write_bytes(cose)
            out.append(_entry(path))
        return out

    def _sealed(self, files: Sequence[CollectedResult]) -> list[CollectedResult]:
        return list(files) if self.seal is None else self.seal(list(files))
