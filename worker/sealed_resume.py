"""Opening a sealed checkpoint to resume from, and checking it against the committed leaf.

A claim that resumes a sealed job (`ClaimResume.sealed`) hands the lost attempt's prefix
in the clear and its checkpoint's three files sealed to the submitter. The worker waits for
the submitter's resume grant (proofnet/messages/resume_grant.py: each file's content key
wrapped for this worker), opens each file with it (the key commitment in every header
refuses a key of another file or job) and then checks what it opened against the prefix's
leaf `at` (weights hash, and the state hash over the optimizer file's hash and the RNG
bytes): the API could not check sealed files, so this is where a forged checkpoint stops.
Pure file work; waiting for the grant and downloading are the agent's (worker/agent.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

from pot.manifest import Manifest, ProofError, state_hash
from proofnet.messages.envelope import SealingError, Stanza, open_file


class SealedResumeError(Exception):
    """The sealed checkpoint does not open with the grant, or is not the committed one."""


def open_checkpoint(
    sealed: Mapping[str, Path],
    dest_dir: Path,
    grants: Mapping[str, object],
    private_key: bytes,
) -> dict[str, str]:
    """Open each sealed file (name -> its downloaded ciphertext) into `dest_dir/<basename>`
    with its granted stanza; name -> plaintext SHA-256. The ciphertexts are deleted."""
    opened: dict[str, str] = {}
    for name, path in sealed.items():
        try:
            stanza = Stanza.from_json(grants.get(name))
            dest = Path(dest_dir) / Path(name).name
            done = open_file(path, dest, private_key=private_key, name=name, grants=[stanza])
        except SealingError as e:
            raise SealedResumeError(f"checkpoint file {name} does not open: {e}") from e
        finally:
            with contextlib.suppress(FileNotFoundError):
                Path(path).unlink()
        opened[name] = done.sha256
    return opened


def check_against_leaf(
    prefix_path: Path, prefix_root: str, at: int, opened: Mapping[str, str], rng_path: Path
) -> None:
    """The opened checkpoint is the one leaf `at` of the prefix commits, and the prefix is
    the one the claim pinned (its root)."""
    try:
        prefix = Manifest.from_bytes(Path(prefix_path).read_bytes())
    except (OSError, ProofError) as e:
        raise SealedResumeError(f"the resumed prefix does not parse: {e}") from e
    if not 0 <= at < len(prefix.leaves):
        raise SealedResumeError(f"the prefix has no checkpoint {at}")
    pinned = Manifest(
        steps_per_checkpoint=prefix.steps_per_checkpoint,
        data_seed=prefix.data_seed,
        leaves=prefix.leaves[: at + 1],
    )
    if pinned.root != prefix_root:
        raise SealedResumeError("the prefix is not the one the claim pinned")
    leaf = prefix.leaves[at]
    weights = next((sha for n, sha in opened.items() if n.endswith(".weights")), None)
    optim = next((sha for n, sha in opened.items() if n.endswith(".optim")), None)
    if weights is None or optim is None:
        raise SealedResumeError("the checkpoint lacks its weights or optimizer file")
    if weights != leaf.weights:
        raise SealedResumeError(
            f"the opened weights are not the ones leaf {at} commits (a forged checkpoint)"
        )
    try:
        rng = Path(rng_path).read_bytes()
    except OSError as e:
        raise SealedResumeError(f"cannot read the opened RNG file: {e}") from e
    if state_hash(optim, rng) != leaf.state:
        raise SealedResumeError(
            f"the opened optimizer and RNG state are not what leaf {at} commits"
        )
