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
from datetime import UTC, datetime
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
from proofnet.messages.dispute import DisputeTask  # noqa: E402
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
PROVIDER_WORKER = WorkerKey(SigningKey(b"\x0b" * 32))
PROVIDER = PROVIDER_WORKER.public_key_hex
VERIFIERS = (WorkerKey(SigningKey(b"\x0a" * 32)), WorkerKey(SigningKey(b"\x0c" * 32)))
VERIFIER = VERIFIERS[0]
SPEC_URL = "https://example.org/relay.git"


@dataclass
class Relay:
    """The API's part, in memory: uploads, the posted tasks and the verifiers' reports, the
    posted dispute and the provider's answers. Every worker shares it as its API client
    (a worker skips the tasks that name another)."""

    spec: JobSpec
    artifacts: dict[str, bytes]
    tasks: list[VerificationTask] = field(default_factory=list)
    reports: dict[int, dict[str, Any]] = field(default_factory=dict)
    dispute: DisputeTask | None = None
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def task(self) -> VerificationTask | None:
        return self.tasks[0] if self.tasks else None

    @property
    def report(self) -> dict[str, Any] | None:
        return self.reports.get(0)

    # --- the oracle's desk ---
    def artifact(self, job_id: str, name: str) -> bytes:
        return self.artifacts[name]

    def worker_payout(self, worker_key: str) -> str | None:
        return "addr_test1provider"

    def verifier_candidates(self, device_class: str, exclude: str) -> list[Candidate]:
        return [
            Candidate(v.public_key_hex, f"addr_test1verifier{i}") for i, v in enumerate(VERIFIERS)
        ]

    def post_verification(self, task: VerificationTask) -> dict[str, Any]:
        if task not in self.tasks:
            self.tasks.append(task)
        unit = self.tasks.index(task)
        return {"id": unit, "digest": task.digest, "report": self.reports.get(unit)}

    def request_keys(self, request: KeyRequest) -> int:
        raise AssertionError("the job is not sealed")

    def post_dispute(self, task: DisputeTask) -> dict[str, Any]:
        self.dispute = task
        return {
            "id": 0,
            "commitment": self.answers.get("commitment"),
            "reveal": self.answers.get("reveal"),
            "created_at": datetime.now(UTC).isoformat(),
        }

    # --- the workers' API client ---
    def _files(self, names: tuple[str, ...]) -> list[dict[str, str]]:
        return [{"name": n, "sha256": hashlib.sha256(self.artifacts[n]).hexdigest()} for n in names]

    def verification_tasks(self) -> list[dict[str, Any]]:
        return [
            {
                "id": unit,
                "task": task.to_json(),
                "spec": self.spec.model_dump(mode="json", exclude_none=True),
                "files": self._files(task.files),
                "key_requests": [],
            }
            for unit, task in enumerate(self.tasks)
            if unit not in self.reports
        ]

    def download_task_file(self, unit_id: int, name: str, dest: Path, sha256: str) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(self.artifacts[name])

    def report_verification(self, unit_id: int, report: dict[str, Any]) -> dict[str, Any]:
        self.reports[unit_id] = report
        return {"id": unit_id}

    def disputes(self) -> list[dict[str, Any]]:
        if self.dispute is None or "reveal" in self.answers:
            return []
        return [
            {
                "id": 0,
                "task": self.dispute.to_json(),
                "spec": self.spec.model_dump(mode="json", exclude_none=True),
                "files": self._files(self.dispute.files),
                "committed": "commitment" in self.answers,
            }
        ]

    def download_dispute_file(self, unit_id: int, name: str, dest: Path, sha256: str) -> None:
        self.download_task_file(unit_id, name, dest, sha256)

    def answer_dispute(self, unit_id: int, step: str, answer: dict[str, Any]) -> dict[str, Any]:
        self.answers[step] = answer
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
    checker = VerifierSpotChecker(relay, ORACLE, disputes=relay)
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

    def worker(key: WorkerKey, name: str) -> Verifier:
        return Verifier(
            relay,  # type: ignore[arg-type]
            ProcessRuntime(),
            key,
            tmp_path / name,
            RepoCache(tmp_path / f"repos-{name}", rewrites={SPEC_URL: source[0]}),
            trusted_oracle_keys={ORACLE_KEY},
            allow_unisolated=True,
            timeout_s=120,
            # The shards are local files here: the operator lets their directory in.
            data_policy=DataFetchPolicy(
                local_dirs=tuple({Path(d.uri[7:]).parent for d in spec.data})
            ),
        )

    verifiers = [worker(key, f"verifier{i}") for i, key in enumerate(VERIFIERS)]
    provider = worker(PROVIDER_WORKER, "provider")
    # Rounds of the oracle and every worker's loop, until the oracle has a verdict (a
    # disputed replay needs a second verifier, then the provider's answer).
    for _ in range(4):
        for v in verifiers:
            v.run_once()
        provider.answer_disputes()
        if relay.report is None:
            return None, relay, verifiers[0]
        try:
            return checker.check(cast(Attestation, att), job), relay, verifiers[0]
        except SpotCheckUnavailable:
            continue
    raise AssertionError("no verdict after four rounds")


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


def test_a_stage_trained_on_other_data_is_disputed_and_its_provider_concedes(
    tmp_path: Path,
    repo: tuple[str, str],  # noqa: F811
    shards: list[Path],  # noqa: F811
    job_path: None,  # noqa: F811
) -> None:
    """The first verifier's replay departs; a second verifier's departs alike; the
    provider's own worker, asked to replay the disputed segments in a verifier's sandbox
    from the very files, departs the same way (it commits, then reveals): unproven, the
    provider's, unpaid but not slashed (oracle/verification/referee.py, end to end)."""
    spec = _spec(repo[1], shards)
    verdict, relay, _ = _replay(tmp_path, repo, spec, shards[0])  # the plan gives stage 1 shard 1
    assert verdict is not None
    assert (verdict.reason, verdict.fault) == (Reason.REPLAY_UNPROVEN, "provider"), verdict
    assert "agrees with them" in verdict.message
    first, second = relay.tasks
    assert {first.verifier, second.verifier} == {v.public_key_hex for v in VERIFIERS}
    assert relay.dispute is not None and relay.dispute.provider == PROVIDER
    assert relay.dispute.verifier_tasks == (first.digest, second.digest)
    assert set(relay.answers) == {"commitment", "reveal"}


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
