"""A drawn verifier replays a relay stage: with the stage's own shards of the job's data and
the stage's unit environment. A real stage run (pot.examples.numpy_relay) passes; the same
proof recorded over another shard than the plan gives the stage is the provider's fault;
data that no longer hash to the spec's pin leave the task unanswered (never blamed).

The API's relay of tasks, files and reports runs over HTTP in test_verifier_units.py; here
an in-memory relay stands in for it (`Relay`: the oracle's desk and the verifier's API
client over one dict), so that a relay job need not be run unit by unit through the API.
The verifier runs the process runtime, as a test may (`allow_unisolated`).
"""

from __future__ import annotations

import hashlib
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from agent_fixtures import job_path  # noqa: F401  (fixture)
from nacl.signing import SigningKey

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))
from test_spotcheck_relay import _spec, repo, shards  # noqa: E402, F401

from oracle.inputs.feed import JobInfo  # noqa: E402
from oracle.inputs.feed_units import unit_result_name  # noqa: E402
from oracle.verification.spotcheck import SpotCheckUnavailable  # noqa: E402
from oracle.verification.verifiers import Candidate, VerifierSpotChecker  # noqa: E402
from oracle.verification.verify import Reason  # noqa: E402
from pot import env, launch  # noqa: E402
from pot.manifest import Manifest  # noqa: E402
from proofnet.messages.attestation import Attestation  # noqa: E402
from proofnet.messages.jobspec import JobSpec  # noqa: E402
from proofnet.messages.key_grant import KeyRequest  # noqa: E402
from proofnet.messages.verification import VerificationTask  # noqa: E402
from worker.data_fetch import DataFetchPolicy  # noqa: E402
from worker.identity import WorkerKey  # noqa: E402
from worker.runtime.base import RunSpec  # noqa: E402
from worker.runtime.process_runtime import ProcessRuntime  # noqa: E402
from worker.verifier import Verifier  # noqa: E402
from worker.workspace import RepoCache  # noqa: E402

ORACLE = SigningKey(b"\x09" * 32)
ORACLE_KEY = bytes(ORACLE.verify_key).hex()
PROVIDER = "ab" * 32
VERIFIER = WorkerKey(SigningKey(b"\x0a" * 32))
SPEC_URL = "https://example.org/relay.git"


@dataclass
class Relay:
    """The API's part, in memory: uploads, the posted task and the verifier's report."""

    spec: JobSpec
    artifacts: dict[str, bytes]
    task: VerificationTask | None = None
    report: dict[str, Any] | None = None
    reports: list[dict[str, Any]] = field(default_factory=list)

    # --- the oracle's desk ---
    def artifact(self, job_id: str, name: str) -> bytes:
        return self.artifacts[name]

    def worker_payout(self, worker_key: str) -> str | None:
        return "addr_test1provider"

    def verifier_candidates(self, device_class: str, exclude: str) -> list[Candidate]:
        return [Candidate(VERIFIER.public_key_hex, "addr_test1verifier")]

    def post_verification(self, task: VerificationTask) -> dict[str, Any]:
        self.task = task
        return {"id": 1, "digest": task.digest, "report": self.report}

    def request_keys(self, request: KeyRequest) -> int:
        raise AssertionError("the job is not sealed")

    # --- the verifier's API client ---
    def verification_tasks(self) -> list[dict[str, Any]]:
        if self.task is None or self.report is not None:
            return []
        files = [
            {"name": n, "sha256": hashlib.sha256(self.artifacts[n]).hexdigest()}
            for n in self.task.files
        ]
        return [
            {
                "id": 1,
                "task": self.task.to_json(),
                "spec": self.spec.model_dump(mode="json", exclude_none=True),
                "files": files,
                "key_requests": [],
            }
        ]

    def download_task_file(self, unit_id: int, name: str, dest: Path, sha256: str) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(self.artifacts[name])

    def report_verification(self, unit_id: int, report: dict[str, Any]) -> dict[str, Any]:
        self.report = report
        return {"id": unit_id}


def _train_stage(
    work: Path, repo_url: str, spec: JobSpec, nonce: str, data: Path
) -> tuple[dict[str, bytes], str]:
    """Stage 1 trained on `data` by the harness under the process runtime, as a provider's
    worker runs it (a replay is compared with a training run in the same kind of process);
    its proof files by upload name, and its root."""
    subprocess.run(["git", "clone", "-q", repo_url, str(work)], check=True)
    subprocess.run(["git", "-C", str(work), "checkout", "-q", spec.model.commit], check=True)
    environ = {
        **spec.job_env(work, bytes.fromhex(nonce)).to_environ(),
        **env.UnitEnv(
            kind="stage", index=1, shards=(data,), checkpoint_out=work / "model.bin"
        ).to_environ(),
    }
    result = ProcessRuntime().execute(
        RunSpec(
            image=spec.image,
            argv=tuple(launch.harness_argv("python3", "train")),
            work_dir=work,
            env=environ,
            wall_clock_limit_s=120,
            python_lib=launch.install(work.parent / "harness"),
        )
    )
    assert result.ok, result
    pot = work / "pot"
    files = {unit_result_name(1, f"pot/{p.name}"): p.read_bytes() for p in sorted(pot.iterdir())}
    return files, Manifest.load(pot).root


def _replay(
    tmp_path: Path, source: tuple[str, str], spec: JobSpec, data_for_stage: Path
) -> tuple[Any, Relay, Verifier]:
    nonce = secrets.token_hex(16)
    files, root = _train_stage(tmp_path / "stage", source[0], spec, nonce, data_for_stage)
    relay = Relay(spec, files)
    checker = VerifierSpotChecker(relay, ORACLE)
    att = SimpleNamespace(
        unit=SimpleNamespace(index=1, kind="stage", inputs=("f" * 64,)),
        pot_root=root,
        nonce=nonce,
        worker_key=PROVIDER,
        gpu_model="cpu",
        leaf_hash=lambda: bytes.fromhex(root),
    )
    job = JobInfo(job_id=spec.job_id, spec=spec, status="running", escrow=None, lease=None)
    with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
        checker.check(cast(Attestation, att), job)
    verifier = Verifier(
        relay,  # type: ignore[arg-type]
        ProcessRuntime(),
        VERIFIER,
        tmp_path / "verifier",
        RepoCache(tmp_path / "repos", rewrites={SPEC_URL: source[0]}),
        trusted_oracle_keys={ORACLE_KEY},
        allow_unisolated=True,
        timeout_s=120,
        # The shards are local files here: the operator lets their directory in.
        data_policy=DataFetchPolicy(local_dirs=tuple({Path(d.uri[7:]).parent for d in spec.data})),
    )
    verifier.run_once()
    if relay.report is None:
        return None, relay, verifier
    return checker.check(cast(Attestation, att), job), relay, verifier


def test_a_stage_replays_on_its_own_shards(
    tmp_path: Path,
    repo: tuple[str, str],  # noqa: F811
    shards: list[Path],  # noqa: F811
    job_path: None,  # noqa: F811
) -> None:
    spec = _spec(repo[1], shards)
    verdict, relay, _ = _replay(tmp_path, repo, spec, shards[1])
    assert verdict is not None and verdict.passed, verdict
    assert relay.task is not None and relay.task.unit == 1
    assert all(n.startswith("units/1/pot/") for n in relay.task.files)


def test_a_stage_trained_on_other_data_is_the_providers_fault(
    tmp_path: Path,
    repo: tuple[str, str],  # noqa: F811
    shards: list[Path],  # noqa: F811
    job_path: None,  # noqa: F811
) -> None:
    spec = _spec(repo[1], shards)
    verdict, _, _ = _replay(tmp_path, repo, spec, shards[0])  # the plan gives stage 1 shard 1
    assert verdict is not None
    assert (verdict.reason, verdict.fault) == (Reason.SPOT_CHECK_FAILED, "provider"), verdict


def test_data_that_no_longer_match_the_pin_leave_the_task_unanswered(
    tmp_path: Path,
    repo: tuple[str, str],  # noqa: F811
    shards: list[Path],  # noqa: F811
    job_path: None,  # noqa: F811
) -> None:
    copies = []
    for p in shards:
        copy = tmp_path / "moved" / p.name
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(p.read_bytes())
        copies.append(copy)
    spec = _spec(repo[1], copies)
    changed = bytearray(copies[1].read_bytes())
    changed[-1] ^= 1
    copies[1].write_bytes(bytes(changed))  # the data host changed it after the spec pinned it
    verdict, relay, _ = _replay(tmp_path, repo, spec, shards[1])
    assert verdict is None and relay.report is None
