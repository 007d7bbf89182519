"""A provider follows docs/operations.md ("Running a worker as a provider") with the real
`proofnet` command: `worker onboard --api-url ... --payout-address ...`, then `worker run
--api-url ... --oracle-url ...`, with the default paths (and again with relative ones),
started from another directory than onboarding was, through to a completed, attested job.

The API is its own process, the oracle records what it accepts; the job is the numpy MLP with
proof of training from a local repository (`--repo-rewrite`, a documented option, maps its
https URL there) and runs on the process runtime (`PROOFNET_WORKER_RUNTIME=process`: there is
no GPU container runtime here). Nothing else is set: no PROOFNET_* or XDG_* variable, a
fresh HOME.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_fixtures import REPO_URL, FixtureRepo, job_spec, model_repo  # noqa: F401
from real_process_support import recording_oracle, running_api

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from api_support import Wallet  # noqa: E402

pytestmark = pytest.mark.slow


def _provider_env(home: Path) -> dict[str, str]:
    """The environment of a provider's shell: nothing of ours set, a HOME of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROOFNET_", "XDG_"))}
    bin_dir = str(Path(sys.executable).parent)
    env.update(
        HOME=str(home),
        # Jobs find this interpreter's python3 (numpy), as a provider's PATH would.
        PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        PROOFNET_WORKER_RUNTIME="process",
    )
    return env


def _proofnet(argv: list[str], *, cwd: Path, env: dict[str, str]) -> str:
    cwd.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "proofnet.cli", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"proofnet {' '.join(argv)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _rewrite(repo: FixtureRepo) -> str:
    ((prefix, replacement),) = repo.rewrites.items()
    return f"{prefix}={replacement}"


def test_a_provider_following_the_docs_gets_jobs_done(
    tmp_path: Path,
    model_repo: FixtureRepo,  # noqa: F811
) -> None:
    with running_api(tmp_path, lease_ttl_s=30) as api, recording_oracle(api) as oracle:
        home = tmp_path / "home"
        env = _provider_env(home)
        run = ["worker", "run", "--api-url", api.url, "--oracle-url", oracle.url]
        run += ["--repo-rewrite", _rewrite(model_repo), "--once"]

        # 1. Default paths: onboard in one directory, run from another.
        onboard_dir, run_dir = tmp_path / "where-i-onboarded", tmp_path / "where-i-run"
        payout = Wallet().address
        _proofnet(
            ["worker", "onboard", "--api-url", api.url, "--payout-address", payout],
            cwd=onboard_dir,
            env=env,
        )
        data = home / ".local" / "share" / "proofnet"
        assert (data / "worker.skey").is_file()
        assert (data / "worker" / "registration.json").is_file()
        first = api.submit(job_spec(model_repo))
        out = _proofnet(run, cwd=run_dir, env=env)
        assert f"{first} attempt 1: attested delivered" in out, out
        assert api.job(first)["status"] == "completed"
        [attestation] = oracle.accepted[first]
        assert attestation.payout_address == payout
        # Everything went where the docs say, nothing into the directories it ran from.
        assert (data / "worker" / "jobs").is_dir()
        mirrors = list((home / ".cache" / "proofnet" / "git").glob("*.git"))
        assert len(mirrors) == 1
        assert list(onboard_dir.iterdir()) == [] and list(run_dir.iterdir()) == []

        # 2. Relative paths, given to both commands from the provider's directory.
        mine = tmp_path / "provider"
        relative = ["--work-dir", "state/work", "--key-file", "state/worker.skey"]
        _proofnet(
            ["worker", "onboard", "--api-url", api.url, "--payout-address", Wallet().address]
            + relative,
            cwd=mine,
            env=env,
        )
        second = api.submit(job_spec(model_repo))
        out = _proofnet(run + relative, cwd=mine, env=env)
        assert f"{second} attempt 1: attested delivered" in out, out
        assert api.job(second)["status"] == "completed"
        assert (mine / "state" / "work" / "registration.json").is_file()
        assert (mine / "state" / "work" / "outbox").is_dir()
        # The second worker reused the per-user mirror the first one made.
        assert list((home / ".cache" / "proofnet" / "git").glob("*.git")) == mirrors
