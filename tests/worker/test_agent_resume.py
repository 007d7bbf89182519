"""A long job resumes on a second provider, driven through two real agents (process
runtime), the real API and the recording oracle.

Provider A trains with its checkpoint uploader on: each committed checkpoint reaches the
API while the job runs (A's log says so before anything else ends the run). A is then
stopped mid-run and releases. Provider B's claim resumes from the last checkpoint A
uploaded: B downloads it, trains the remaining segments, and attests only its share of the
price (the segments it proved), never A's. Its proof chains to A's committed prefix
(`pot.check_resumed`), as the oracle checks.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from agent_fixtures import (  # noqa: F401  (fixtures)
    AgentHarness,
    ApiServer,
    FixtureRepo,
    RecordingOracle,
    _git,
    api_server,
    job_path,
    job_spec,
    oracle,
)

from pot import Manifest, check_resumed
from pot.manifest import PREFIX_NAME
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.segment_share import segment_cap

# The job's trainer, paced: it stops before step `pause_at` until the file `gate` exists,
# so the test can end provider A's run after some checkpoints are committed, whatever the
# machine's speed.
PACED_PY = '''"""The numpy MLP, paused at one step until a file exists (a test's pacing)."""
import os
import time

from pot.examples.numpy_mlp import MLPTrainer as _MLP


class MLPTrainer(_MLP):
    def train_step(self, step, indices):
        gate = self.ctx.config.get("gate")
        if gate and step == int(self.ctx.config.get("pause_at", 0)):
            while not os.path.exists(gate):
                time.sleep(0.05)
        return super().train_step(step, indices)
'''
STEPS, EVERY, PAUSE_AT = 60, 10, 35  # 6 segments; A commits checkpoints 1..3, then waits


@pytest.fixture(scope="module")
def paced_repo(tmp_path_factory: pytest.TempPathFactory) -> FixtureRepo:
    root = tmp_path_factory.mktemp("git")
    repo = root / "numpy-mlp.git"
    repo.mkdir()
    _git(repo, "init", "--quiet")
    (repo / "mlp.py").write_text(PACED_PY)
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "-m", "paced trainer")
    return FixtureRepo(
        path=repo,
        commit=_git(repo, "rev-parse", "HEAD"),
        rewrites={"https://git.example.test/": f"file://{root}/"},
    )


def wait_for(what: str, check: Any, timeout_s: float = 120.0) -> Any:
    """Poll `check` until it returns something truthy (events, not fixed sleeps)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_stopped_provider_is_resumed_and_the_next_one_claims_only_its_share(
    tmp_path: Path,
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    paced_repo: FixtureRepo,
    job_path: None,  # noqa: F811
) -> None:
    from worker.runtime.process_runtime import ProcessRuntime

    gate = tmp_path / "gate"
    spec = job_spec(paced_repo, steps=STEPS)
    spec["proof"]["config"] = {"gate": str(gate), "pause_at": PAUSE_AT}
    spec["proof"]["steps_per_checkpoint"] = EVERY
    job_id = api_server.submit(spec)
    price = spec["pricing"]["amount"]

    first = AgentHarness(
        tmp_path / "a", api_server, oracle, paced_repo, ProcessRuntime(), checkpoint_upload_s=0.1
    )
    second = AgentHarness(tmp_path / "b", api_server, oracle, paced_repo, ProcessRuntime())
    try:
        outcomes: list[Any] = []
        runner = threading.Thread(
            target=lambda: outcomes.extend(first.agent.run(once=True).outcomes)
        )
        runner.start()

        def logs() -> list[str]:
            lines = api_server.get(f"/api/v1/jobs/{job_id}/logs")["lines"]
            return [str(line["text"]) for line in lines]

        # Checkpoint 3 (step 30) is committed and shipped while the job still runs.
        wait_for(
            "A's upload of checkpoint 3", lambda: any("uploaded checkpoint 3" in t for t in logs())
        )
        first.agent.stop_now()
        runner.join(timeout=120)
        assert outcomes and outcomes[0].status == "released", outcomes
        gate.write_text("go")

        outcome = second.agent.run(once=True).outcomes[0]
        assert outcome.status == "attested", outcome.reason
        claim_log = [t for t in logs() if "resuming attempt 1 at checkpoint" in t]
        assert claim_log, logs()
        at = int(claim_log[0].split("at checkpoint ")[1].split(" ")[0])
        assert at >= 3

        att = oracle.accepted[job_id][-1]
        parsed = JobSpec.from_dict(spec)
        assert att.worker_key == second.worker.key.public_key_hex
        # Paid for segments at+1..6 only: the share, never the whole price.
        assert att.amount == segment_cap(parsed, price, at + 1) == price * (6 - at) // 6
        # The proof chains to the prefix A committed, as the oracle checks it.
        b_dir = second.config.jobs_dir / f"{job_id}-a2"
        resumed = Manifest.load(b_dir / "pot")
        assert resumed.root == att.pot_root
        prefix = Manifest.load(b_dir / ".proofnet" / "resume", name=PREFIX_NAME)
        check_resumed(resumed, prefix, at, step=at * EVERY)
        history = api_server.job(job_id)["history"]
        assert [(h["attempt"], h["first_segment"], h["last_segment"]) for h in history] == [
            (1, 1, at),
            (2, at + 1, None),
        ]
        # The prefix B resumed from is the one A's run committed, byte for byte.
        a_dir = first.config.jobs_dir / f"{job_id}-a1"
        a_prefix = Manifest.load(a_dir / "pot", name=PREFIX_NAME)
        assert a_prefix.leaves[: at + 1] == prefix.leaves[: at + 1]
        assert (
            hashlib.sha256(prefix.encode()).hexdigest()
            == hashlib.sha256(
                (b_dir / ".proofnet" / "resume" / PREFIX_NAME).read_bytes()
            ).hexdigest()
        )
    finally:
        first.close()
        second.close()
