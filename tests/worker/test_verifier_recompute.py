"""A drawn verifier recomputes an aggregation and an evaluation unit: it runs the job's own
aggregate or evaluation command on the input checkpoints the task names and the held-out
data, and the oracle compares the result with what the provider attested. An honest
average and an honest metric pass; a provider that attests a checkpoint its inputs do not
average to, or a loss the model does not have on the held-out data, is rejected and it is
the provider's fault; job code that fails on the verifier is the job's.

The API's relay is in memory here (`MemoryRelay`: the oracle's desk and the verifier's
API client over one dict; the HTTP relay of recomputation tasks is in
tests/api/test_verification_units.py). The verifier runs the process runtime, as a test
may (`allow_unisolated`).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from nacl.signing import SigningKey

from oracle.inputs.feed import JobInfo
from oracle.verification.spotcheck import SpotCheckUnavailable, SpotCheckVerdict
from oracle.verification.verifiers import Candidate, VerifierSpotChecker
from oracle.verification.verify import Reason
from proofnet.messages.attestation import Attestation
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.key_grant import KeyRequest
from proofnet.messages.topology import Unit, plan
from proofnet.messages.verification import VerificationTask
from worker.data_fetch import DataFetchPolicy
from worker.identity import WorkerKey
from worker.runtime.process_runtime import ProcessRuntime
from worker.verifier import Verifier
from worker.workspace import RepoCache

ORACLE = SigningKey(b"\x0b" * 32)
VERIFIER = WorkerKey(SigningKey(b"\x0c" * 32))
PROVIDER = "cd" * 32
SPEC_URL = "https://example.org/units.git"

# The job's code: checkpoints are JSON lists of numbers; the aggregation averages them
# element-wise, the evaluation reports the mean absolute error against the held-out data.
AVERAGE_PY = """
import json, os
paths = os.environ["PROOFNET_INPUT_CHECKPOINTS"].split(":")
models = [json.load(open(p)) for p in paths]
mean = [sum(v) / len(v) for v in zip(*models)]
json.dump(mean, open(os.environ["PROOFNET_CHECKPOINT_OUT"], "w"))
"""
EVALUATE_PY = """
import json, os
(model,) = [json.load(open(p)) for p in os.environ["PROOFNET_INPUT_CHECKPOINTS"].split(":")]
truth = json.load(open(os.environ["PROOFNET_SHARDS"].split(":")[0]))
loss = sum(abs(a - b) for a, b in zip(model, truth)) / len(truth)
json.dump({"loss": f"{loss:.4f}"}, open(os.environ["PROOFNET_METRICS_OUT"], "w"))
"""
FAILING_PY = "raise SystemExit('this job cannot run anywhere but the provider')\n"


@dataclass
class MemoryRelay:
    """The API's part, in memory: the input units' uploads, the task and its report."""

    spec: JobSpec
    uploads: dict[str, bytes]
    task: VerificationTask | None = None
    report: dict[str, Any] | None = None

    def artifact(self, job_id: str, name: str) -> bytes:
        raise AssertionError(f"a recomputation reads no proof files ({name})")

    def worker_payout(self, worker_key: str) -> str | None:
        return "addr_test1provider"

    def verifier_candidates(self, device_class: str, exclude: str) -> list[Candidate]:
        return [Candidate(VERIFIER.public_key_hex, "addr_test1verifier")]

    def post_verification(self, task: VerificationTask) -> dict[str, Any]:
        self.task = task
        return {"id": 1, "digest": task.digest, "report": self.report}

    def request_keys(self, request: KeyRequest) -> int:
        raise AssertionError("input checkpoints are never sealed")

    def verification_tasks(self) -> list[dict[str, Any]]:
        if self.task is None or self.report is not None:
            return []
        files = [
            {"name": n, "sha256": hashlib.sha256(self.uploads[n]).hexdigest()}
            for n in self.task.files
        ]
        spec = self.spec.model_dump(mode="json", exclude_none=True)
        return [{"id": 1, "task": self.task.to_json(), "spec": spec, "files": files}]

    def download_task_file(self, unit_id: int, name: str, dest: Path, sha256: str) -> None:
        assert hashlib.sha256(self.uploads[name]).hexdigest() == sha256
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(self.uploads[name])

    def report_verification(self, unit_id: int, report: dict[str, Any]) -> dict[str, Any]:
        self.report = report
        return {"id": unit_id}


def _repo(root: Path, files: dict[str, str]) -> tuple[str, str]:
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "job"], check=True)
    head = subprocess.run([*git[:3], "rev-parse", "HEAD"], check=True, capture_output=True)
    return str(root), head.stdout.decode().strip()


def _spec(commit: str, held_out: Path, average: str, evaluate: str) -> JobSpec:
    digest = hashlib.sha256(held_out.read_bytes()).hexdigest()
    topology = {
        "kind": "relay",
        "stages": [{"shards": [0]}, {"shards": [1]}],
        "checkpoint": "model.json",
        "stage_amount": 100,
        "aggregation": "average",
        "aggregate_command": ["python3", average],
        "aggregate_amount": 20,
        "evaluation": {
            "every": 1000,
            "metric": "loss",
            "goal": "min",
            "threshold": "0.5",
            "command": ["python3", evaluate],
            "data": [{"uri": f"file://{held_out}", "sha256": digest}],
            "amount": 10,
            "tolerance": "0.0001",
        },
    }
    return JobSpec.from_dict(
        {
            "model": {"repo_url": SPEC_URL, "commit": commit},
            "framework": "numpy",
            "image": "proofnet/test@sha256:" + "e" * 64,
            "commands": [["python3", "train.py"]],
            "resources": {
                "gpus": 0,
                "gpu_memory_mb": 0,
                "cpus": 1,
                "ram_mb": 1024,
                "disk_mb": 100,
                "max_duration_s": 60,
            },
            "data": [{"uri": f"file://{held_out}", "sha256": digest}] * 2,
            "results": [{"path": "metrics.json", "kind": "json"}],
            "pricing": {"kind": "fixed", "amount": 230},
            "seed": secrets.randbelow(2**63),
            "topology": topology,
        }
    )


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


BRANCHES = (b"[1.0, 2.0]", b"[3.0, 4.0]")
AVERAGED = json.dumps([2.0, 3.0]).encode()  # what average.py writes for BRANCHES


def _recompute(
    tmp_path: Path,
    spec: JobSpec,
    repo: str,
    index: int,
    output: str | None,
    metrics: dict[str, str],
) -> SpotCheckVerdict:
    """The oracle checks unit `index`'s attestation (output, metrics) with a drawn verifier
    that recomputes it on the honest inputs; the verdict once the verifier answered."""
    assert spec.topology is not None
    unit: Unit = next(u for u in plan(spec.topology) if u.index == index)
    outputs = {0: _sha(BRANCHES[0]), 1: _sha(BRANCHES[1]), 2: _sha(AVERAGED)}
    uploads = {
        "units/0/checkpoint/model.json": BRANCHES[0],
        "units/1/checkpoint/model.json": BRANCHES[1],
        "units/2/checkpoint/model.json": AVERAGED,
    }
    relay = MemoryRelay(spec, uploads)
    checker = VerifierSpotChecker(relay, ORACLE)
    nonce = secrets.token_hex(16)
    att = SimpleNamespace(
        unit=SimpleNamespace(
            index=index,
            kind=unit.kind,
            inputs=tuple(outputs[i] for i in unit.inputs),
            output=output,
        ),
        metrics=metrics,
        nonce=nonce,
        pot_root="0" * 64,
        worker_key=PROVIDER,
        gpu_model="cpu",
        leaf_hash=lambda: hashlib.sha256(nonce.encode()).digest(),
    )
    job = JobInfo(job_id=spec.job_id, spec=spec, status="running", escrow=None, lease=None)
    with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
        checker.check_unit(cast(Attestation, att), job, unit)
    verifier = Verifier(
        relay,  # type: ignore[arg-type]
        ProcessRuntime(),
        VERIFIER,
        tmp_path / "verifier",
        RepoCache(tmp_path / "repos", rewrites={SPEC_URL: repo}),
        trusted_oracle_keys={bytes(ORACLE.verify_key).hex()},
        allow_unisolated=True,
        timeout_s=120,
        # The held-out data are local files here: the operator lets their directory in.
        data_policy=DataFetchPolicy(local_dirs=tuple({Path(d.uri[7:]).parent for d in spec.data})),
    )
    assert len(verifier.run_once()) == 1
    return checker.check_unit(cast(Attestation, att), job, unit)


@pytest.fixture
def job(tmp_path: Path) -> tuple[JobSpec, str]:
    held_out = tmp_path / "data" / "truth.json"
    held_out.parent.mkdir()
    held_out.write_text("[2.0, 3.5]")  # the averaged model's loss: (0 + 0.5) / 2 = 0.25
    repo, commit = _repo(
        tmp_path / "job",
        {"average.py": AVERAGE_PY, "evaluate.py": EVALUATE_PY, "fail.py": FAILING_PY},
    )
    return _spec(commit, held_out, "average.py", "evaluate.py"), repo


def test_an_honest_average_and_its_evaluation_are_recomputed(
    tmp_path: Path, job: tuple[JobSpec, str]
) -> None:
    spec, repo = job
    verdict = _recompute(tmp_path / "a", spec, repo, 2, _sha(AVERAGED), {})
    assert verdict.passed, verdict
    assert verdict.report is not None and verdict.report["output_hash"] == _sha(AVERAGED)
    verdict = _recompute(tmp_path / "e", spec, repo, 3, None, {"loss": "0.25"})
    assert verdict.passed, verdict
    assert verdict.report is not None and verdict.report["metric"] == "0.2500"


def test_an_attested_average_the_inputs_do_not_make_is_the_providers_fault(
    tmp_path: Path, job: tuple[JobSpec, str]
) -> None:
    # The provider skipped the averaging and attests branch 0's checkpoint as the model.
    spec, repo = job
    verdict = _recompute(tmp_path, spec, repo, 2, _sha(BRANCHES[0]), {})
    assert (verdict.passed, verdict.reason, verdict.fault) == (
        False,
        Reason.UNIT_RECOMPUTE_MISMATCH,
        "provider",
    )


def test_a_made_up_loss_is_the_providers_fault(tmp_path: Path, job: tuple[JobSpec, str]) -> None:
    # The model's loss is 0.25; the provider reports 0.2 (still a pass either way: the lie
    # is caught by the recomputation, not by the threshold).
    spec, repo = job
    verdict = _recompute(tmp_path, spec, repo, 3, None, {"loss": "0.2"})
    assert (verdict.passed, verdict.reason, verdict.fault) == (
        False,
        Reason.UNIT_RECOMPUTE_MISMATCH,
        "provider",
    )


def test_job_code_that_fails_on_the_verifier_is_the_jobs_fault(
    tmp_path: Path, job: tuple[JobSpec, str]
) -> None:
    spec, repo = job
    held_out = Path(spec.data[0].uri[len("file://") :])
    failing = _spec(spec.model.commit, held_out, "fail.py", "evaluate.py")
    verdict = _recompute(tmp_path, failing, repo, 2, _sha(AVERAGED), {})
    assert (verdict.passed, verdict.reason, verdict.fault) == (
        False,
        Reason.JOB_NOT_REPLAYABLE,
        "job",
    )
