"""A cluster node's proof of training: what each node of a data-parallel run commits, and
whose fault a drawn segment that does not replay is.

In data-parallel training every step's seed-derived batch is split between the N ranks
(`shard`: rank r takes the batch's elements r, r + N, ...); each rank computes the gradient of
its shard (its *contribution*), the contributions are all-gathered and averaged in rank order
(`average`, the one definition of the all-reduce, so a replay reproduces it bit for bit), and
every rank applies the same mean. Every node therefore holds the same checkpoints, and
commits, beside the ordinary manifest of them (`pot.manifest`, identical on every node):

- `nonces`: every node's claim nonce, in rank order; the cluster's data order is drawn from
  them (`cluster_data_seed`), so no node chooses it and the oracle checks them against the
  leases of the cluster attempt;
- per segment, `data`: the digest of its own shard's indices (`shard_commitments`, checkable
  without job code), and `steps`: the SHA-256 of the segment's step record
  (`NNNNNN.contrib`, `StepRecord`): per step, the digest of the contribution that arrived
  from each rank (its own included: what it sent). That is its testimony of what it
  averaged.

All of this, with the manifest's root, is one canonical JSON file (`cluster.json`) whose
hash is the node's root (`NodeProof.root`): what the node's attestation signs as its
`pot_root`.

A verifier replays a drawn segment from its opening checkpoint by recomputing every rank's
contribution in turn from the same state (one process; `pot.cluster_harness`), applying
their mean, and reports the digests per step and the weights it reached (`SegmentReplay`).
The replay follows the honest trajectory; the nodes' trajectory is the same one up to the
first step where a contribution that went into the mean was not its shard's gradient, so
`blame` judges that step alone (`first_difference`), with the nodes' step records:

1. a node whose shard indices are not the seed-derived ones for its rank;
2. a node whose record of its own contribution is not its shard's gradient (faked, copied or
   skipped);
3. a node whose own record is right but whom more than half of the other nodes saw send
   something else, when the segment's checkpoint does not replay (it sent other than it
   committed);
4. a node that records another rank's contribution as other than that rank's gradient
   while the checkpoint replays, or against the majority of the other witnesses (a false
   witness);
5. a node whose committed closing checkpoint does not replay although no rank is shown to
   have sent a wrong contribution (it applied the mean wrongly, or reports weights it did
   not reach).

A node that fakes its contribution is caught by 2 alone; the others, whose checkpoints do
not replay only because they averaged its fake, are excused. What remains: with two nodes
(no third witness), one that sends a wrong contribution and also testifies falsely against
the other takes the other's payment down with its own (both are blamed by 3); signed
contributions would close this (docs/protocol.md).
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pot.canonical import CanonicalJSONError, canonical_json, parse_canonical_json
from pot.indices import SegmentIndices
from pot.manifest import ProofError
from pot.schedule import Schedule
from pot.seeds import derive_data_seed
from pot.tensors import tensors_hash

CLUSTER_NAME = "cluster.json"
CLUSTER_VERSION = 1
NODE_ROOT_DOMAIN = b"proofnet/pot/cluster-node/v1"
STEPS_MAGIC = b"proofnet-contributions/v1\n"
CLUSTER_NONCE_DOMAIN = b"proofnet/pot/cluster-nonce/v1"
MAX_WORLD = 64
_HEX64 = re.compile(r"[0-9a-f]{64}")
_NONCE = re.compile(r"(?:[0-9a-f]{2}){16,64}")


def shard(indices: np.ndarray, rank: int, world: int) -> np.ndarray:
    """Rank `rank`'s share of a step's batch: its elements rank, rank + world, ..."""
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} is not in 0..{world - 1}")
    return np.ascontiguousarray(np.asarray(indices)[rank::world])


def average(contributions: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The all-reduce: the contributions summed in rank order, then divided by their number.
    Training and replay both call this, so the mean is the same bits on both sides."""
    if not contributions:
        raise ValueError("no contributions to average")
    names = list(contributions[0])
    for rank, c in enumerate(contributions):
        if list(c) != names:
            raise ProofError(f"rank {rank}'s contribution has other tensors than rank 0's")
    out: dict[str, np.ndarray] = {}
    for name in names:
        total = np.array(contributions[0][name], copy=True)
        for c in contributions[1:]:
            total += c[name]
        out[name] = total / total.dtype.type(len(contributions))
    return out


def cluster_data_seed(job_seed: int, nonces: Sequence[bytes]) -> int:
    """The data-order seed of a cluster run: from the job seed and every node's claim nonce
    in rank order (each revealed at its claim, so no node can pick the order)."""
    if not 1 <= len(nonces) <= MAX_WORLD:
        raise ValueError(f"a cluster has 1..{MAX_WORLD} nodes")
    joined = CLUSTER_NONCE_DOMAIN + b"".join(len(n).to_bytes(1, "big") + n for n in nonces)
    return derive_data_seed(job_seed, hashlib.sha256(joined).digest())


def contribution_hash(gradient: Mapping[str, np.ndarray]) -> str:
    """The digest of one contribution (the canonical tensor hash)."""
    return tensors_hash(gradient)


def steps_path(pot_dir: Path, segment: int) -> Path:
    return pot_dir / f"{segment:06d}.contrib"


@dataclass(frozen=True)
class StepRecord:
    """A node's record of one segment: per step, the digest of what arrived from each rank.

    File: magic, then per step u64 step (little-endian) and `world` x 32 bytes."""

    world: int
    steps: tuple[tuple[int, tuple[str, ...]], ...]

    def encode(self) -> bytes:
        out = [STEPS_MAGIC]
        for step, digests in self.steps:
            out.append(struct.pack("<Q", step))
            out.extend(bytes.fromhex(d) for d in digests)
        return b"".join(out)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.encode()).hexdigest()

    @classmethod
    def decode(cls, data: bytes, world: int, *, expected: str | None = None) -> StepRecord:
        if expected is not None and hashlib.sha256(data).hexdigest() != expected:
            raise ProofError("the step record is not the one the node committed")
        if not data.startswith(STEPS_MAGIC):
            raise ProofError("not a proofnet contributions file")
        size = 8 + 32 * world
        body = data[len(STEPS_MAGIC) :]
        if len(body) % size:
            raise ProofError("a truncated contributions file")
        steps = []
        for pos in range(0, len(body), size):
            (step,) = struct.unpack_from("<Q", body, pos)
            digests = tuple(body[pos + 8 + 32 * r : pos + 40 + 32 * r].hex() for r in range(world))
            steps.append((step, digests))
        return cls(world, tuple(steps))

    def at(self, step: int) -> tuple[str, ...] | None:
        return next((d for s, d in self.steps if s == step), None)


def shard_commitments(schedule: Schedule, data_seed: int, rank: int, world: int) -> list[str]:
    """`data` of segments 1..n for rank `rank`, as an honest node commits them."""
    sampler = schedule.sampler(data_seed)
    out = []
    for segment in range(1, schedule.segments + 1):
        indices = SegmentIndices()
        for step in schedule.segment_steps(segment):
            indices.add(step, shard(sampler.indices(step), rank, world))
        out.append(indices.hexdigest())
    return out


@dataclass(frozen=True)
class NodeSegment:
    """One node's commitments for one segment."""

    data: str  # its shard's indices
    steps: str  # SHA-256 of its step record

    def to_json(self) -> dict[str, object]:
        return {"data": self.data, "steps": self.steps}


@dataclass(frozen=True)
class NodeProof:
    """A node's `cluster.json`: the manifest's root and its segments' commitments."""

    rank: int
    world: int
    nonces: tuple[str, ...]  # hex, rank order
    manifest_root: str
    segments: tuple[NodeSegment, ...]

    def encode(self) -> bytes:
        return canonical_json(
            {
                "version": CLUSTER_VERSION,
                "rank": self.rank,
                "world": self.world,
                "nonces": list(self.nonces),
                "manifest_root": self.manifest_root,
                "segments": [s.to_json() for s in self.segments],
            }
        )

    @property
    def root(self) -> str:
        """What the node's attestation signs as its pot root."""
        return hashlib.sha256(NODE_ROOT_DOMAIN + self.encode()).hexdigest()

    @classmethod
    def from_bytes(cls, data: bytes, *, expected_root: str | None = None) -> NodeProof:
        try:
            obj = parse_canonical_json(data)
        except CanonicalJSONError as exc:
            raise ProofError(f"{CLUSTER_NAME}: {exc}") from exc
        if not isinstance(obj, dict) or obj.get("version") != CLUSTER_VERSION:
            raise ProofError(f"{CLUSTER_NAME} version must be {CLUSTER_VERSION}")
        try:
            rank, world, nonces = obj["rank"], obj["world"], obj["nonces"]
            root, raw = obj["manifest_root"], obj["segments"]
        except KeyError as exc:
            raise ProofError(f"{CLUSTER_NAME} lacks {exc}") from exc
        if not (isinstance(world, int) and 1 <= world <= MAX_WORLD):
            raise ProofError(f"{CLUSTER_NAME}: world must be 1..{MAX_WORLD}")
        if not (isinstance(rank, int) and 0 <= rank < world):
            raise ProofError(f"{CLUSTER_NAME}: rank must be in 0..{world - 1}")
        if not (isinstance(nonces, list) and len(nonces) == world):
            raise ProofError(f"{CLUSTER_NAME}: one nonce per rank")
        if not all(isinstance(n, str) and _NONCE.fullmatch(n) for n in nonces):
            raise ProofError(f"{CLUSTER_NAME}: nonces must be hex")
        if not (isinstance(root, str) and _HEX64.fullmatch(root)) or not isinstance(raw, list):
            raise ProofError(f"{CLUSTER_NAME} fields have the wrong types")
        segments = []
        for i, s in enumerate(raw, 1):
            digests = (s.get("data"), s.get("steps")) if isinstance(s, dict) else (None, None)
            if not all(isinstance(d, str) and _HEX64.fullmatch(d) for d in digests):
                raise ProofError(f"{CLUSTER_NAME}: segment {i}'s digests must be SHA-256 hex")
            segments.append(NodeSegment(str(digests[0]), str(digests[1])))
        proof = cls(rank, world, tuple(nonces), root, tuple(segments))
        if expected_root is not None and proof.root != expected_root:
            raise ProofError(f"{CLUSTER_NAME} hashes to {proof.root}, not the attested root")
        return proof


@dataclass(frozen=True)
class SegmentReplay:
    """What a verifier computed for one segment of a cluster run, from its opening
    checkpoint: every rank's shard digest, every step's contributions, the weights reached."""

    segment: int
    shards: tuple[str, ...]
    steps: tuple[tuple[int, tuple[str, ...]], ...]
    weights_hash: str

    def to_json(self) -> dict[str, object]:
        return {
            "segment": self.segment,
            "shards": list(self.shards),
            "steps": [[step, list(d)] for step, d in self.steps],
            "weights_hash": self.weights_hash,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, object]) -> SegmentReplay:
        try:
            segment, shards, weights = obj["segment"], obj["shards"], obj["weights_hash"]
            raw = obj["steps"]
            assert isinstance(segment, int) and isinstance(weights, str)
            assert isinstance(shards, list) and isinstance(raw, list)
            steps = tuple((int(step), tuple(map(str, d))) for step, d in raw)
        except (KeyError, AssertionError, TypeError, ValueError) as exc:
            raise ProofError("a cluster replay result has the wrong shape") from exc
        return cls(segment, tuple(map(str, shards)), steps, weights)


@dataclass(frozen=True)
class NodeEvidence:
    """What the judge holds of one node for the replayed segment."""

    proof: NodeProof
    record: StepRecord  # its step record of the segment (checked against its commitment)
    closing: str  # the weights hash its manifest commits at the segment's end


def first_difference(
    evidence: Mapping[int, NodeEvidence], replayed: SegmentReplay
) -> tuple[int, tuple[str, ...]] | None:
    """The first step (and the replay's digests there) where some node's record differs
    from the replay: up to it, the nodes' trajectory is the replay's."""
    for step, digests in replayed.steps:
        if any(e.record.at(step) != digests for e in evidence.values()):
            return step, digests
    return None


def blame(evidence: Mapping[int, NodeEvidence], replayed: SegmentReplay) -> dict[int, str]:
    """The nodes that answer for the replayed segment, with why (the rules of the module
    doc). `evidence` is every node's of the cluster the judge could read."""
    faults: dict[int, str] = {}
    segment = replayed.segment
    for rank, e in evidence.items():
        at = segment - 1
        if not 0 <= at < len(e.proof.segments) or e.proof.world != len(replayed.shards):
            faults[rank] = f"node {rank}'s proof does not have segment {segment} of this cluster"
        elif e.proof.segments[at].data != replayed.shards[rank]:
            faults[rank] = f"node {rank}'s shard indices of segment {segment} are not its rank's"
    replays = {rank: e.closing == replayed.weights_hash for rank, e in evidence.items()}
    all_replay = all(replays.values())
    first = first_difference(evidence, replayed)
    senders: set[int] = set()
    if first is not None:
        step, truth = first
        records = {rank: e.record.at(step) for rank, e in evidence.items()}
        for rank, own in records.items():
            if own is None or own[rank] != truth[rank]:
                faults.setdefault(
                    rank,
                    f"node {rank}'s contribution at step {step} is not the gradient of its "
                    "shard (faked, copied or skipped)",
                )
                senders.add(rank)
        for q in range(len(truth)):
            witnesses = {r: rec for r, rec in records.items() if r != q and rec is not None}
            against = [r for r, rec in witnesses.items() if rec[q] != truth[q]]
            if not against or q in senders:
                continue
            if not all_replay and 2 * len(against) > len(witnesses):
                faults.setdefault(
                    q,
                    f"{len(against)} of {len(witnesses)} other nodes received from node {q} "
                    f"at step {step} something other than its shard's gradient, and the "
                    "checkpoint does not replay",
                )
                senders.add(q)
                continue
            for r in against:
                faults.setdefault(
                    r,
                    f"node {r} testifies that node {q} sent something other than its "
                    f"gradient at step {step}, against the replay and the other witnesses",
                )
    if not senders:
        for rank, ok in replays.items():
            if not ok:
                faults.setdefault(
                    rank,
                    f"segment {segment} does not replay to node {rank}'s committed "
                    "checkpoint, and no node sent a wrong contribution",
                )
    return faults
