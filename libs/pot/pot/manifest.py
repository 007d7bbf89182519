"""The proof-of-training manifest: committed leaves, their Merkle root, and where files live.

Checkpoint i (i = 0 is the initial state) is committed by leaf i:

    {"step": steps done, "weights": SHA-256 of the weights file,
     "state": SHA-256 binding the optimizer and RNG files, "data": SHA-256 of the data-index
     file of segment i (null for i = 0), "loss": last loss of the segment as a decimal string
     (null for i = 0), "update_norm": ||w_i - w_(i-1)||_2 as a decimal string (null for i = 0)}

encoded as canonical JSON; the root is the RFC 6962 Merkle root over those encodings
(`pot.merkle`). The update norm is committed so the verifier's "top-2 by update
norm" choice is fixed before it asks, and can be checked on the segments it replays.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pot.canonical import CanonicalJSONError, canonical_json, parse_canonical_json
from pot.merkle import InclusionProof, MerkleTree

MANIFEST_VERSION = 1
# A manifest commits one leaf per segment; an oracle fetches and checks all of them.
MAX_SEGMENTS = 10_000
MANIFEST_NAME = "manifest.json"
# The manifest of the checkpoints committed so far, rewritten after each one (`pot.recorder`).
PREFIX_NAME = "prefix.json"
STATE_DOMAIN = b"proofnet/pot/state/v1"
INDICES_MAGIC = b"proofnet-indices/v1\n"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?|NaN|-?Infinity")


class ProofError(ValueError):
    """A proof-of-training artefact is missing, malformed or does not match its commitment."""


def weights_path(pot_dir: Path, index: int) -> Path:
    return pot_dir / f"{index:06d}.weights"


def optimizer_path(pot_dir: Path, index: int) -> Path:
    return pot_dir / f"{index:06d}.optim"


def rng_path(pot_dir: Path, index: int) -> Path:
    return pot_dir / f"{index:06d}.rng.json"


def indices_path(pot_dir: Path, segment: int) -> Path:
    return pot_dir / f"{segment:06d}.indices"


def state_hash(optimizer_sha256: str, rng_bytes: bytes) -> str:
    return hashlib.sha256(
        STATE_DOMAIN + bytes.fromhex(optimizer_sha256) + hashlib.sha256(rng_bytes).digest()
    ).hexdigest()


def rng_bytes(rng: Any) -> bytes:
    # Plain (not canonical) JSON: RNG states hold integers wider than 64 bits. The file's
    # bytes are what is hashed, so the verifier never re-encodes them.
    return json.dumps(rng, sort_keys=True, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class Leaf:
    step: int
    weights: str
    state: str
    data: str | None = None
    loss: str | None = None
    update_norm: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "weights": self.weights,
            "state": self.state,
            "data": self.data,
            "loss": self.loss,
            "update_norm": self.update_norm,
        }

    def encode(self) -> bytes:
        return canonical_json(self.to_json())

    @classmethod
    def from_json(cls, obj: Any) -> Leaf:
        if not isinstance(obj, dict) or set(obj) != {
            "step",
            "weights",
            "state",
            "data",
            "loss",
            "update_norm",
        }:
            raise ProofError(
                f"leaf must have exactly step/weights/state/data/loss/update_norm: {obj!r}"
            )
        step = obj["step"]
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ProofError(f"leaf step must be a non-negative integer, got {step!r}")
        for key in ("weights", "state"):
            if not (isinstance(obj[key], str) and _HEX64.fullmatch(obj[key])):
                raise ProofError(f"leaf {key} must be 64 lowercase hex digits")
        if obj["data"] is not None and not (
            isinstance(obj["data"], str) and _HEX64.fullmatch(obj["data"])
        ):
            raise ProofError("leaf data must be 64 lowercase hex digits or null")
        for key in ("loss", "update_norm"):
            value = obj[key]
            if value is not None and not (isinstance(value, str) and _DECIMAL.fullmatch(value)):
                raise ProofError(f"leaf {key} must be a decimal string or null, got {value!r}")
        return cls(**obj)


@dataclass(frozen=True)
class Manifest:
    steps_per_checkpoint: int
    data_seed: int
    leaves: tuple[Leaf, ...]

    def __post_init__(self) -> None:
        if self.steps_per_checkpoint < 1:
            raise ProofError("steps_per_checkpoint must be >= 1")
        if not self.leaves:
            raise ProofError("a manifest has at least the initial checkpoint")
        first = self.leaves[0]
        if first.step != 0 or first.data is not None or first.loss is not None:
            raise ProofError("leaf 0 must be the initial checkpoint (step 0, no data, no loss)")
        # Which step each leaf must be at, how many leaves there must be and which data
        # they must commit is the schedule's to say (`pot.conformance`), not the manifest's.
        for i, leaf in enumerate(self.leaves[1:], start=1):
            if leaf.data is None or leaf.update_norm is None:
                raise ProofError(f"leaf {i} must commit its data indices and update norm")

    @property
    def tree(self) -> MerkleTree:
        return MerkleTree([leaf.encode() for leaf in self.leaves])

    @property
    def root(self) -> str:
        return self.tree.root.hex()

    @property
    def segments(self) -> int:
        return len(self.leaves) - 1

    @property
    def total_steps(self) -> int:
        return self.leaves[-1].step

    def update_norms(self) -> list[str | None]:
        """Committed update norm of segments 1..n (index 0 is segment 1)."""
        return [leaf.update_norm for leaf in self.leaves[1:]]

    def proof(self, index: int) -> InclusionProof:
        return self.tree.proof(index)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": MANIFEST_VERSION,
            "steps_per_checkpoint": self.steps_per_checkpoint,
            "data_seed": self.data_seed,
            "root": self.root,
            "leaves": [leaf.to_json() for leaf in self.leaves],
        }

    def encode(self) -> bytes:
        return canonical_json(self.to_json())

    @classmethod
    def from_bytes(cls, data: bytes, *, expected_root: str | None = None) -> Manifest:
        try:
            obj = parse_canonical_json(data)
        except CanonicalJSONError as exc:
            raise ProofError(f"manifest: {exc}") from exc
        if not isinstance(obj, dict) or obj.get("version") != MANIFEST_VERSION:
            raise ProofError(f"manifest version must be {MANIFEST_VERSION}")
        try:
            k, seed, root, leaves = (
                obj["steps_per_checkpoint"],
                obj["data_seed"],
                obj["root"],
                obj["leaves"],
            )
        except KeyError as exc:
            raise ProofError(f"manifest lacks {exc}") from exc
        if not isinstance(k, int) or not isinstance(seed, int) or not isinstance(leaves, list):
            raise ProofError("manifest fields have the wrong types")
        if len(leaves) > MAX_SEGMENTS + 1:
            raise ProofError(f"manifest commits {len(leaves) - 1} segments; at most {MAX_SEGMENTS}")
        manifest = cls(
            steps_per_checkpoint=k,
            data_seed=seed,
            leaves=tuple(Leaf.from_json(leaf) for leaf in leaves),
        )
        if manifest.root != root:
            raise ProofError("manifest root does not match its leaves")
        if expected_root is not None and root != expected_root:
            raise ProofError(f"manifest root {root} is not the attested root {expected_root}")
        return manifest

    def save(self, pot_dir: Path, *, name: str = MANIFEST_NAME) -> Path:
        path = pot_dir / name
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(self.encode())
        tmp.replace(path)
        return path

    @classmethod
    def load(
        cls, pot_dir: Path, *, expected_root: str | None = None, name: str = MANIFEST_NAME
    ) -> Manifest:
        path = Path(pot_dir) / name
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ProofError(f"cannot read {path}: {exc}") from exc
        return cls.from_bytes(data, expected_root=expected_root)


def check_resumed(
    manifest: Manifest, prefix: Manifest, at: int, *, step: int | None = None
) -> None:
    """`manifest` resumed `prefix` at checkpoint `at` (raises `ProofError` otherwise): the
    same interval and data seed, and its leaves 0..`at` are the prefix's, so the run that
    committed the prefix proved segments 1..`at` and the resumed one `at`+1.. (each segment
    covered once, by one run). A provider that resumed from a checkpoint the prefix does not
    commit (a forged one) has another leaf `at` and is refused here. `step`, when given, is
    the step checkpoint `at` must be at (the schedule's): a prefix whose leaf `at` sits at
    another step is not the checkpoint the resume was handed.

    The one check of a resumed proof: the oracle runs it on every resumed attestation
    (`oracle.verification.resume_checks`), the API hands out only checkpoints it holds."""
    if not 0 <= at < len(prefix.leaves):
        raise ProofError(f"checkpoint {at} is not in the prefix (0..{prefix.segments})")
    if step is not None and prefix.leaves[at].step != step:
        raise ProofError(
            f"checkpoint {at} of the prefix is at step {prefix.leaves[at].step}, not {step}"
        )
    if (manifest.steps_per_checkpoint, manifest.data_seed) != (
        prefix.steps_per_checkpoint,
        prefix.data_seed,
    ):
        raise ProofError("the resumed proof has another checkpoint interval or data seed")
    if len(manifest.leaves) <= at + 1:
        raise ProofError(f"the resumed proof commits nothing after checkpoint {at}")
    for i in range(at + 1):
        if manifest.leaves[i] != prefix.leaves[i]:
            raise ProofError(
                f"leaf {i} of the resumed proof is not the committed prefix's: it did not "
                f"resume from checkpoint {at} as committed"
            )
