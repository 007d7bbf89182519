"""A cluster node's spot check, the oracle's part: the checks without job code, and the
verdict on a replay with whose fault it is.

A node of a multi-node job attests the root of its node proof (`pot.cluster.NodeProof`,
uploaded as `units/<rank>/pot/cluster.json` with the manifest, checkpoints and step
records). Before any replay, `check_node_proof` requires: the file is the attested root and
names the manifest uploaded beside it; it is the node's rank in a cluster of the
topology's size; the nonces it trained the data order on are the attempt's (its own is the
attested one, the others' those of the leases the API counts for their units); the manifest
follows the spec's schedule under that data order (`pot.conformance`); and every segment's
shard indices are the rank's share of the seed-derived batches (`pot.cluster.shard_commitments`).

The segments are drawn like a relay stage's (`oracle.verification.proof_checks.draw_segments`:
the oracle's signature over the attestation, revealed after the root was signed). A replay
(`python -m pot replay-node`) recomputes every rank's contribution of a drawn segment in one
process; `judge_node` reads its report against every node's evidence the oracle could
fetch (`pot.cluster.NodeEvidence`) and blames by `pot.cluster.blame`: the node whose
committed contribution does not replay is the one at fault (a fraud: `SPOT_CHECK_FAILED`);
the nodes that merely averaged it are not, and are paid. Reads and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from oracle.verification.proof_checks import Draw, ProofRejected
from oracle.verification.reasons import Reason
from oracle.verification.spotcheck import POT_PREFIX, SpotCheckUnavailable, SpotCheckVerdict
from pot import conformance
from pot.cluster import (
    NodeEvidence,
    NodeProof,
    SegmentReplay,
    StepRecord,
    blame,
    cluster_data_seed,
    shard_commitments,
    steps_path,
)
from pot.manifest import MANIFEST_NAME, Manifest, ProofError
from proofnet.messages.attestation import Attestation
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.topology import MultiNode, Unit, plan
from proofnet.messages.verification import VerificationReport

if TYPE_CHECKING:
    from oracle.inputs.feed import JobInfo

CLUSTER_FILE = "cluster.json"


class ArtifactSource(Protocol):
    """Where node uploads are read (the API feed)."""

    def artifact(self, job_id: str, name: str) -> bytes: ...


# Reads upload `name` (inside pot/) of node `rank`; None when it is not there.
Fetch = Callable[[int, str], bytes | None]


def record_name(segment: int) -> str:
    """The name (inside pot/) of a node's step record of `segment`."""
    return steps_path(Path(), segment).name


def read_evidence(
    fetch: Fetch, rank: int, segments: tuple[int, ...], *, root: str | None = None
) -> dict[int, NodeEvidence]:
    """Node `rank`'s evidence for `segments` from its uploads (its cluster.json, against
    `root` when given; the manifest it names; the step records it commits). Raises
    `ProofError` when they are missing or do not hold together."""
    names = [CLUSTER_FILE, MANIFEST_NAME, *(record_name(s) for s in segments)]
    raw = [fetch(rank, n) for n in names]
    missing = [n for n, r in zip(names, raw, strict=True) if r is None]
    if missing:
        raise ProofError(f"node {rank} uploaded no {', '.join(missing[:3])}")
    proof = NodeProof.from_bytes(raw[0] or b"", expected_root=root)
    manifest = Manifest.from_bytes(raw[1] or b"", expected_root=proof.manifest_root)
    out = {}
    for segment, data in zip(segments, raw[2:], strict=True):
        if not 1 <= segment <= len(proof.segments) or segment >= len(manifest.leaves):
            raise ProofError(f"node {rank} commits no segment {segment}")
        committed = proof.segments[segment - 1].steps
        record = StepRecord.decode(data or b"", proof.world, expected=committed)
        out[segment] = NodeEvidence(proof, record, manifest.leaves[segment].weights)
    return out


def cluster_evidence(
    fetch: Fetch, nodes: int, segments: tuple[int, ...], own: int, own_root: str
) -> dict[int, dict[int, NodeEvidence]]:
    """Every node's evidence for `segments`, by segment and rank. The judged node's must
    hold (`ProofError` otherwise); another node whose uploads do not is left out (its
    testimony counts for nothing)."""
    out: dict[int, dict[int, NodeEvidence]] = {s: {} for s in segments}
    for rank in range(nodes):
        try:
            found = read_evidence(fetch, rank, segments, root=own_root if rank == own else None)
        except ProofError:
            if rank == own:
                raise
            continue
        for segment, evidence in found.items():
            out[segment][rank] = evidence
    return out


def check_node_proof(
    proof: NodeProof,
    manifest: Manifest,
    att: Attestation,
    spec: JobSpec,
    unit: Unit,
    lease_nonces: Mapping[int, str],
) -> None:
    """Raise `ProofRejected` unless the node's proof is the attested one and commits the
    schedule, the cluster's data order and its own rank's shards. `lease_nonces`: the
    nonce of each node's counted lease, by rank, as far as the API knows them."""
    topology = spec.topology
    assert isinstance(topology, MultiNode) and unit.rank is not None
    if proof.root != att.pot_root:
        raise ProofRejected(
            Reason.POT_ROOT_MISMATCH, f"{CLUSTER_FILE} is not the attested root {att.pot_root}"
        )
    if manifest.root != proof.manifest_root:
        raise ProofRejected(
            Reason.POT_ROOT_MISMATCH, f"the manifest is not the one {CLUSTER_FILE} commits"
        )
    if (proof.rank, proof.world) != (unit.rank, topology.nodes):
        raise ProofRejected(
            Reason.POT_INVALID,
            f"the proof is rank {proof.rank} of {proof.world}; the unit is rank {unit.rank} "
            f"of {topology.nodes}",
        )
    if proof.nonces[unit.rank] != att.nonce:
        raise ProofRejected(
            Reason.NODE_NONCES_MISMATCH, "the proof's own nonce is not the attested one"
        )
    for rank, nonce in sorted(lease_nonces.items()):
        if 0 <= rank < proof.world and proof.nonces[rank] != nonce:
            raise ProofRejected(
                Reason.NODE_NONCES_MISMATCH,
                f"the proof trained on node {rank}'s nonce {proof.nonces[rank][:16]}..., not "
                "its lease's in this cluster attempt: the data order is not the cluster's",
            )
    schedule = spec.schedule
    if schedule is None:
        raise ProofRejected(
            Reason.POT_NO_SCHEDULE, "the spec declares no training schedule (proof.schedule)"
        )
    seed = cluster_data_seed(spec.seed, [bytes.fromhex(n) for n in proof.nonces])
    violation = conformance.check_conformance(manifest, schedule, seed)
    if violation is not None:
        raise ProofRejected(Reason.POT_DATA_ORDER_MISMATCH, violation.message)
    honest = shard_commitments(schedule, seed, unit.rank, proof.world)
    wrong = [
        i for i, (s, h) in enumerate(zip(proof.segments, honest, strict=True), 1) if s.data != h
    ]
    if wrong:
        raise ProofRejected(
            Reason.NODE_SHARD_MISMATCH,
            f"node {unit.rank}'s shard indices of segments {wrong[:10]} are not its rank's "
            "share of the seed-derived batches",
        )


def judge_node(
    report: Mapping[str, object],
    rank: int,
    manifest: Manifest,
    evidence: Mapping[int, Mapping[int, NodeEvidence]],
    draw: Draw,
) -> SpotCheckVerdict:
    """The verdict for node `rank` on a cluster replay's report (`python -m pot
    replay-node`). `evidence[segment][r]`: node r's evidence for a drawn segment (node
    `rank`'s is required; another node's upload that could not be read is left out)."""
    seed, segments = draw.seed.hex(), draw.segments
    details = dict(report, draw_signature=draw.signature.hex())
    status = report.get("status")
    message = str(report.get("message", ""))[:2000]
    if status == "proof_error":
        return SpotCheckVerdict(
            False, Reason.POT_INVALID, message, seed, segments, details, fault="provider"
        )
    if status != "replayed":
        return SpotCheckVerdict(
            False, Reason.REPLAY_ERROR, f"replay error: {message}", seed, segments, details
        )
    raw = report.get("results")
    try:
        replays = {
            r.segment: r
            for r in (SegmentReplay.from_json(o) for o in (raw if isinstance(raw, list) else []))
        }
    except ProofError as exc:
        return SpotCheckVerdict(False, Reason.REPLAY_ERROR, str(exc), seed, segments, details)
    for segment in segments:
        replayed = replays.get(segment)
        if replayed is None:
            return SpotCheckVerdict(
                False,
                Reason.REPLAY_ERROR,
                f"the replay reports no segment {segment}",
                seed,
                segments,
                details,
            )
        faults = blame(evidence[segment], replayed)
        if rank in faults:
            return SpotCheckVerdict(
                False,
                Reason.SPOT_CHECK_FAILED,
                faults[rank],
                seed,
                segments,
                details,
                fault="provider",
            )
    if report.get("initial_weights_hash") != manifest.leaves[0].weights:
        return SpotCheckVerdict(
            False,
            Reason.POT_INITIAL_STATE_MISMATCH,
            "checkpoint 0 is not the state the job's trainer builds from the job seed",
            seed,
            segments,
            details,
            fault="provider",
        )
    return SpotCheckVerdict(True, None, "", seed, segments, details)


def node_fetcher(desk: ArtifactSource, job_id: str) -> Fetch:
    """Reads node uploads through the feed (`units/<rank>/pot/<name>`)."""
    from oracle.inputs.feed import ArtifactMissing

    def fetch(rank: int, name: str) -> bytes | None:
        try:
            return desk.artifact(job_id, f"units/{rank}/{POT_PREFIX}{name}")
        except ArtifactMissing:
            return None

    return fetch


def lease_nonces(job: JobInfo, topology: MultiNode) -> dict[int, str]:
    """The nonce of each node's counted lease, by rank, as far as the API reports them."""
    out = {}
    for u in plan(topology):
        info = job.unit(u.index)
        if info is not None and info.lease is not None and u.rank is not None:
            out[u.rank] = info.lease.nonce
    return out


def judge_node_report(
    report: VerificationReport,
    rank: int,
    manifest: Manifest,
    draw: Draw,
    fetch: Fetch,
    nodes: int,
    own_root: str,
    job_fault: str | None,
) -> SpotCheckVerdict:
    """The verdict for cluster node `rank` on a verifier's node replay, with whose fault it
    is: the job's when its trainer cannot be loaded (`job_fault`, the caller's reading of
    the report); the provider's when it withheld its files or `judge_node` blames it."""
    from oracle.inputs.feed import FeedError

    seed, segments = draw.seed.hex(), draw.segments
    details = {
        "status": "replayed" if report.status == "passed" else report.status,
        "message": report.message,
        "initial_weights_hash": report.initial_weights_hash,
        "results": [r.to_harness() for r in report.node_results],
        "verifier": report.verifier,
    }
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
    try:
        evidence = cluster_evidence(fetch, nodes, tuple(segments), rank, own_root)
    except ProofError as exc:
        return SpotCheckVerdict(
            False, Reason.POT_INVALID, str(exc), seed, segments, details, fault="provider"
        )
    except FeedError as exc:
        raise SpotCheckUnavailable(str(exc)) from exc
    verdict = judge_node(details, rank, manifest, evidence, draw)
    return replace(verdict, verifier=report.verifier)
