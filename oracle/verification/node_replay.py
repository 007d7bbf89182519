"""The local demo's spot check of a cluster node: fetch, replay on this host, judge.

Like `LocalSpotChecker` (whose fetching and harness it reuses), this runs job code on the
oracle's host and is for the local demo on the devnet only (`oracle.service`). It fetches
the node's proof (`units/<rank>/pot/`: cluster.json, manifest, the drawn segments'
checkpoints), every node's evidence for the drawn segments (cluster.json, manifest, step
records: what each node says arrived from every rank), replays the drawn segments with
`python -m pot replay-node` and judges with `oracle.verification.cluster_checks`.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from oracle.verification.cluster_checks import (
    CLUSTER_FILE,
    check_node_proof,
    cluster_evidence,
    judge_node,
    lease_nonces,
    node_fetcher,
)
from oracle.verification.proof_checks import ProofRejected, draw_segments
from oracle.verification.reasons import Reason
from oracle.verification.spotcheck import (
    POT_PREFIX,
    LocalSpotChecker,
    SpotCheckUnavailable,
    SpotCheckVerdict,
    needed_files,
    replay_request,
    replay_timing,
    run_request,
)
from pot import launch
from pot.cluster import NodeProof
from pot.manifest import MANIFEST_NAME, Manifest, ProofError
from proofnet.messages.topology import MultiNode, Unit

if TYPE_CHECKING:
    from oracle.inputs.feed import JobInfo
    from proofnet.messages.attestation import Attestation


@dataclass
class LocalNodeSpotChecker(LocalSpotChecker):
    """`LocalSpotChecker` that also checks cluster nodes on their shards (a `NodeChecker`)."""

    def _fetch(self, job_id: str, index: int, names: list[str], dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        prefix = f"units/{index}/{POT_PREFIX}"
        for name in names:
            self.feed.save_artifact(job_id, prefix + name, dest / name)

    def check_node(
        self, att: Attestation, scope: JobInfo, unit: Unit, job: JobInfo
    ) -> SpotCheckVerdict:
        from oracle.inputs.feed import ArtifactMissing, FeedError

        spec = job.spec
        topology = spec.topology
        assert isinstance(topology, MultiNode) and unit.rank is not None
        prefix = f"units/{unit.index}/{POT_PREFIX}"
        try:
            raw = self.feed.artifact(job.job_id, prefix + CLUSTER_FILE)
            manifest_raw = self.feed.artifact(job.job_id, prefix + MANIFEST_NAME)
        except ArtifactMissing:
            return SpotCheckVerdict(False, Reason.POT_MISSING, f"no pot/{CLUSTER_FILE} uploaded")
        except FeedError as exc:
            raise SpotCheckUnavailable(str(exc)) from exc
        try:
            proof = NodeProof.from_bytes(raw)
            manifest = Manifest.from_bytes(manifest_raw)
        except ProofError as exc:
            return SpotCheckVerdict(False, Reason.POT_INVALID, str(exc))
        try:
            check_node_proof(proof, manifest, att, spec, unit, lease_nonces(job, topology))
        except ProofRejected as exc:
            return SpotCheckVerdict(False, exc.reason, exc.message)
        if spec.proof.trainer is None:
            return SpotCheckVerdict(
                False, Reason.SPOT_CHECK_FAILED, "the spec names no trainer (proof.trainer)"
            )
        draw = draw_segments(manifest, att, spec, self.sign, top=self.top)
        assert spec.schedule is not None  # check_node_proof refuses a spec without one
        request = replay_request(att, job, draw, tolerance_ppm=0)
        with tempfile.TemporaryDirectory(prefix="nodecheck-", dir=self.work_root) as tmp:
            work = Path(tmp)
            try:
                evidence = cluster_evidence(
                    node_fetcher(self.feed, job.job_id),
                    topology.nodes,
                    draw.segments,
                    unit.rank,
                    att.pot_root,
                )
                names = [CLUSTER_FILE, MANIFEST_NAME, *needed_files(draw.segments)]
                self._fetch(job.job_id, unit.index, names, work / "pot")
            except ArtifactMissing as exc:
                return SpotCheckVerdict(
                    False,
                    Reason.POT_MISSING,
                    f"node {unit.rank}'s proof files: {exc}",
                    draw.seed.hex(),
                    draw.segments,
                    fault="provider",
                )
            except ProofError as exc:
                return SpotCheckVerdict(
                    False,
                    Reason.POT_INVALID,
                    str(exc),
                    draw.seed.hex(),
                    draw.segments,
                    fault="provider",
                )
            except FeedError as exc:
                raise SpotCheckUnavailable(str(exc)) from exc
            self.repos.export(spec.model.repo_url, spec.model.commit, work / "repo")
            lib = launch.install(self.harness_root or work / ".harness")
            started = time.monotonic()
            report = run_request(
                request,
                work,
                timeout_s=self.timeout_s,
                python_lib=lib,
                python=self.python,
                command="replay-node",
            )
            replay_ms = int((time.monotonic() - started) * 1000)
        verdict = judge_node(report, unit.rank, manifest, evidence, draw)
        return replace(verdict, timing=replay_timing(manifest, draw.segments, replay_ms))
