"""The first segment's commitment reaches the API while the job still trains (the worker's
checkpoint uploads, worker/checkpoint_upload.py): the committed prefix and the files of
checkpoints 0 and 1, all of what oracles need to replay segment 1 early
(oracle/verification/early.py) and what the API lists them for. The job's trainer is held
after its first segment until the test has seen the upload at the API: the upload cannot be
the end-of-run one."""

from __future__ import annotations

import threading
import time
from pathlib import Path

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

from pot.manifest import PREFIX_NAME, Manifest
from worker.agent import JobOutcome

# Holds training before step 11 (the first step of segment 2, 10 steps per checkpoint)
# until the file `go` appears in the job dir (nothing replays in this test).
GATED_PY = '''"""A trainer that waits after its first segment until the test says go."""
import time

from pot.examples.numpy_mlp import MLPTrainer


class GatedTrainer(MLPTrainer):
    def train_step(self, step, indices):
        if step == 11:
            while not (self.ctx.job_dir / "go").exists():
                time.sleep(0.05)
        return super().train_step(step, indices)
'''


@pytest.fixture(scope="module")
def gated_repo(tmp_path_factory: pytest.TempPathFactory) -> FixtureRepo:
    root = tmp_path_factory.mktemp("gated-git")
    repo = root / "numpy-mlp.git"
    repo.mkdir()
    _git(repo, "init", "--quiet")
    (repo / "gated.py").write_text(GATED_PY)
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "-m", "gated trainer")
    return FixtureRepo(
        path=repo,
        commit=_git(repo, "rev-parse", "HEAD"),
        rewrites={"https://git.example.test/": f"file://{root}/"},
    )


@pytest.fixture
def gated_harness(
    tmp_path: Path,
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    gated_repo: FixtureRepo,
    job_path: None,  # noqa: F811
) -> AgentHarness:
    from worker.runtime.process_runtime import ProcessRuntime

    return AgentHarness(tmp_path, api_server, oracle, gated_repo, ProcessRuntime())


def _uploads(api: ApiServer, job_id: str) -> dict[str, str]:
    """What the API stores under the job's lease (read as its submitter would once an
    oracle's verdict released it: posted here, as nothing else here can)."""
    api.release(job_id)
    return {r["name"]: r["sha256"] for r in api.get(f"/api/v1/jobs/{job_id}/results")}


def test_the_first_segment_is_uploaded_while_the_job_still_trains(
    gated_harness: AgentHarness,
    api_server: ApiServer,  # noqa: F811
    gated_repo: FixtureRepo,
) -> None:
    spec = job_spec(gated_repo)
    spec["proof"]["trainer"] = "gated:GatedTrainer"
    job_id = api_server.submit(spec)
    outcomes: list[JobOutcome] = []
    runner = threading.Thread(
        target=lambda: outcomes.extend(gated_harness.agent.run(once=True).outcomes)
    )
    runner.start()
    job_dir = gated_harness.config.jobs_dir / f"{job_id}-a1"
    try:
        wanted = {
            f"pot/{PREFIX_NAME}",
            *(f"pot/{i:06d}.{ext}" for i in (0, 1) for ext in ("weights", "optim", "rng.json")),
        }
        deadline = time.monotonic() + 120
        while not wanted <= set(_uploads(api_server, job_id)):
            assert runner.is_alive() and time.monotonic() < deadline, "no early upload"
            time.sleep(0.1)
        # Still training (held before segment 2): the upload is not the end-of-run one.
        assert api_server.job(job_id)["status"] == "leased"
        assert not (job_dir / "pot" / "manifest.json").exists()
        early = _uploads(api_server, job_id)
        # The first segment's commitment, nothing more (beside it, the provider's signed
        # claim on that segment, uploaded after the prefix: what pays it if it is lost).
        assert set(early) - {"pot/claim-1.cose"} == wanted
        raw = api_server.http.get(
            f"/api/v1/jobs/{job_id}/results/pot/{PREFIX_NAME}", headers=api_server.submitter
        )
        assert raw.status_code == 200, raw.text
        prefix = Manifest.from_bytes(raw.content)
        assert prefix.segments == 1 and prefix.leaves[1].step == 10
    finally:
        (job_dir / "go").touch()
        runner.join(timeout=120)
    (outcome,) = outcomes
    assert outcome.status == "attested", outcome.reason
    # The end-of-run upload replaces the prefix with the final one and keeps the rest.
    final = _uploads(api_server, job_id)
    assert final[f"pot/{PREFIX_NAME}"] != early[f"pot/{PREFIX_NAME}"]
    assert all(final[n] == d for n, d in early.items() if n != f"pot/{PREFIX_NAME}")
    texts = [line["text"] for line in api_server.get(f"/api/v1/jobs/{job_id}/logs")["lines"]]
    assert any("uploaded checkpoint 1 and the committed prefix" in t for t in texts)
