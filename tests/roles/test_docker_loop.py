"""The whole loop on the Docker runtime, for a numpy job and a real PyTorch job (the CPU
wheel), each made by `proofnet job init DIR --framework ...` and run as the docs tell it:

the operators' network on a devnet (role_support.stand_up_network: one oracle, threshold 1,
no local replay: spot checks go to drawn verifiers); a provider onboarded and running
`proofnet worker run --runtime docker`; the submitter's job (the template with its
repository, commit and digest-pinned image filled in, `job validate`d) submitted and locked;
the provider claims it and trains it in the job's image with the network's harness (`pot`),
commits its proof and attests; a second worker, registered with its own key and payout
address and running `worker run --runtime docker`, is the only candidate the oracle can draw,
and replays the drawn segments in the job's image (no network, read-only root); the oracle
judges its signed report, and the batch settles on the devnet. The test asserts the NTX on
chain (the provider's attested amount less the verification fee at its payout address, the
fee at the verifier's), the audit's verdict, what the oracle recorded of the spot check
(drawn verifier, segments, its signed report bit for bit with the repeat), and the
containers the engine created (training and replays in the job's pinned image, no network).

The verifier worker starts only once the provider holds the job's lease (and stops after the
settlement): otherwise it could claim the job itself, and the roles would swap.

Images, built locally without a registry: proofnet/test-numpy:local
(scripts/ci/build-test-image.sh; PROOFNET_TEST_IMAGE) and proofnet/test-torch:local (the same
plus the torch wheel of /opt/wheels: scripts/ci/build-torch-image.sh, built here when
missing, from cache after the first time). Without Docker this module skips, saying why,
unless PROOFNET_REQUIRE_DOCKER=1 (CI): then it fails. The PyTorch job likewise fails rather
than skips whenever the torch wheel is on disk (or PROOFNET_REQUIRE_TORCH=1).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest
from role_support import (
    Network,
    Shell,
    devnet_shell,
    field_of,
    in_block,
    lovelace_at,
    stand_up_network,
    wait_for,
)

from proofnet.messages.verification_fee import fee_for
from proofnet.processes import RoleProcess

pytestmark = [pytest.mark.slow, pytest.mark.docker]

REPO = Path(__file__).resolve().parents[2]
URL_PREFIX = "https://git.jobs.proofnet.test/"
NUMPY_IMAGE = "proofnet/test-numpy:local"
TORCH_IMAGE = "proofnet/test-torch:local"
TORCH_WHEELS = Path(os.environ.get("PROOFNET_TORCH_WHEELS", "/opt/wheels"))
SUBMITTER_NTX = 5_000_000


def _unavailable(reason: str, require: str = "PROOFNET_REQUIRE_DOCKER") -> NoReturn:
    if os.environ.get(require) == "1":
        pytest.fail(f"{require}=1 but {reason}", pytrace=False)
    pytest.skip(f"{reason} (set {require}=1 to make this a failure)")


def _docker_image_id(ref: str) -> str | None:
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", ref],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return done.stdout.strip() if done.returncode == 0 else None


@pytest.fixture(scope="module")
def docker_engine() -> None:
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        _unavailable(f"no docker CLI or engine: {e}; start one with scripts/ci/start-dockerd.sh")
    if done.returncode != 0:
        _unavailable(
            f"no Docker engine answers ({done.stderr.strip()[:200]}); start one with "
            "scripts/ci/start-dockerd.sh"
        )


@pytest.fixture(scope="module")
def numpy_image(docker_engine: None) -> str:
    """The numpy job's image pinned by ID: `proofnet/test-numpy@sha256:...`."""
    wanted = os.environ.get("PROOFNET_TEST_IMAGE") or NUMPY_IMAGE
    found = _docker_image_id(wanted)
    if found is None:
        _unavailable(f"image {wanted} is missing; build it with scripts/ci/build-test-image.sh")
    return f"proofnet/test-numpy@{found}"


@pytest.fixture(scope="module")
def torch_image(request: pytest.FixtureRequest) -> str:
    """The PyTorch job's image pinned by ID, built (or loaded from cache) from the test image
    and the torch wheel when missing. With the wheel on disk a failure here fails the test."""
    wheels = sorted(TORCH_WHEELS.glob("torch-*.whl"))
    if not wheels:
        _unavailable(f"no torch wheel in {TORCH_WHEELS}", require="PROOFNET_REQUIRE_TORCH")
    request.getfixturevalue("docker_engine")
    found = _docker_image_id(os.environ.get("PROOFNET_TEST_TORCH_IMAGE") or TORCH_IMAGE)
    if found is None:
        built = subprocess.run(
            ["bash", str(REPO / "scripts" / "ci" / "build-torch-image.sh")],
            capture_output=True,
            text=True,
            check=False,
            timeout=1200,
        )
        if built.returncode != 0:
            pytest.fail(
                f"the torch wheel is in {TORCH_WHEELS} but scripts/ci/build-torch-image.sh "
                f"failed ({built.returncode}):\n{built.stderr[-3000:]}",
                pytrace=False,
            )
        found = built.stdout.strip().splitlines()[-1]
    return f"proofnet/test-torch@{found}"


@dataclass
class DockerLoop:
    network: Network
    shell: Shell
    rewrite: str
    provider: Shell
    provider_worker: Worker
    verifier: Shell
    verifier_worker: Worker
    submitter: Shell
    submitter_address: str
    repos: Path

    def start_verifier(self) -> RoleProcess:
        return self.verifier.serve(
            "worker",
            _worker_run(self.network, self.rewrite),
            f"{self.network.api_url}/api/v1/health",
        )


def _worker_run(network: Network, rewrite: str) -> str:
    """docs/operations.md step 4 with the Docker runtime, answering this network's oracle's
    verification tasks (`--oracle-key`); the job repositories through `--repo-rewrite`."""
    return (
        f"worker run --api-url {network.api_url} --oracle-url {network.oracle_url}"
        f" --runtime docker --oracle-key {network.oracle_public_key}"
        f" --repo-rewrite {rewrite} --poll-interval 1"
    )


@dataclass(frozen=True)
class Worker:
    key: str  # the worker's public key (hex), as verification tasks name it
    key_id: str  # its key id, as a job's history names its provider
    payout: str


def _onboard(network: Network, shell: Shell) -> Worker:
    """A payout wallet, then `worker onboard` with the default key (created there)."""
    payout = field_of(shell.run("chain keygen payout.skey"), "address")
    onboarded = json.loads(
        shell.run(f"worker onboard --api-url {network.api_url} --payout-address {payout} --json")
    )
    assert onboarded["registered"] and (shell.cwd / "data" / "worker.skey").exists(), onboarded
    status = json.loads(shell.run(f"worker status --api-url {network.api_url} --json"))
    return Worker(str(status["worker_key"]), str(onboarded["key_id"]), payout)


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory, docker_engine: None) -> Iterator[DockerLoop]:
    root = tmp_path_factory.mktemp("docker-loop")
    repos = root / "repos"
    repos.mkdir()
    rewrite = f"{URL_PREFIX}=file://{repos}/"
    with devnet_shell(root) as (shell, devnet_url):
        network = stand_up_network(
            shell,
            devnet_url,
            oracle_env={
                "PROOFNET_ORACLE_REPO_REWRITES": rewrite,
                "PROOFNET_SETTLEMENT_MAX_WAIT_S": "2",
                "PROOFNET_SETTLEMENT_INTERVAL_S": "0.5",
                "PROOFNET_SETTLEMENT_CONFIRMATION_DEPTH": "1",
            },
            PROOFNET_API_CHAIN_WATCH_CONFIRMATIONS="1",
        )
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        provider = shell.enter("provider", PROOFNET_DATA_DIR="data", PATH=path)
        # Asks for tasks every 2 s, not the default 30 s: the loop waits on nothing else.
        verifier = shell.enter(
            "verifier", PROOFNET_DATA_DIR="data", PATH=path, PROOFNET_WORKER_VERIFICATION_POLL_S="2"
        )
        provider_worker, verifier_worker = _onboard(network, provider), _onboard(network, verifier)
        assert provider_worker.key != verifier_worker.key
        assert provider_worker.payout != verifier_worker.payout
        provider.serve("worker", _worker_run(network, rewrite), f"{network.api_url}/api/v1/health")
        submitter = shell.enter("submitter", PROOFNET_API_URL=network.api_url)
        address = field_of(submitter.run("chain keygen payment.skey"), "address")
        shell.enter("api").run(f"api add-senior {address}")
        submitter.run(f"devnet fund {address} --ada 50")
        minted = shell.enter("operator").run(
            f"chain mint-test-ntx --key-file keys/admin.skey --to {address}"
            f" --amount {SUBMITTER_NTX} --name {network.ntx_name}"
        )
        wait_for("the NTX in a block", in_block(devnet_url, field_of(minted, "tx")), shell.group)
        wait_for("the ADA", lambda: lovelace_at(devnet_url, address) > 0, shell.group)
        yield DockerLoop(
            network,
            shell,
            rewrite,
            provider,
            provider_worker,
            verifier,
            verifier_worker,
            submitter,
            address,
            repos,
        )


def _git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "submitter",
        "GIT_AUTHOR_EMAIL": "submitter@proofnet.test",
        "GIT_COMMITTER_NAME": "submitter",
        "GIT_COMMITTER_EMAIL": "submitter@proofnet.test",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def _set(text: str, key: str, value: str) -> str:
    """The first `key:` line of the template's job.yaml with `value`, its comment kept."""
    pattern = re.compile(rf"^(\s*{key}: )([^#\n]*?)(\s*(?:#.*)?)$", re.MULTILINE)
    new, count = pattern.subn(lambda m: f"{m[1]}{value}{m[3]}", text, count=1)
    assert count == 1, f"no {key!r} line in the template's job.yaml"
    return new


def _job_repository(loop: DockerLoop, framework: str, image: str) -> Path:
    """docs/jobs.md: `proofnet job init`, commit and "push" (here: a repository under the
    rewritten URL), fill in the repository, commit and image, `proofnet job validate`. The
    job leases no GPU (this host has none): `resources.gpus` 0."""
    name = f"{framework}-job"
    me = loop.submitter
    me.run(f"job init {name} --framework {framework}")
    work = me.cwd / name
    _git(work, "init", "-q", "-b", "main")
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", f"the {framework} template")
    bare = loop.repos / f"{name}.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True, timeout=60)
    spec = (work / "job.yaml").read_text()
    for key, value in (
        ("repo_url", f'"{URL_PREFIX}{name}.git"'),
        ("commit", f'"{_git(work, "rev-parse", "HEAD")}"'),
        ("image", f'"{image}"'),
        ("gpus", "0"),
        ("gpu_memory_mb", "0"),
    ):
        spec = _set(spec, key, value)
    (work / "job.yaml").write_text(spec)
    validated = me.enter(name).run("job validate job.yaml")
    assert "Traceback" not in validated, validated
    return work / "job.yaml"


def _query(loop: DockerLoop, sql: str, *args: str) -> list[dict[str, Any]]:
    """Rows of the database the oracle and the API keep under the operators' data dir
    (read-only): what they recorded of the verification."""
    db = loop.shell.env["PROOFNET_DATA_DIR"] + "/proofnet.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute(sql, args).fetchall()]


def _spot_checks(loop: DockerLoop, job_id: str) -> list[dict[str, Any]]:
    """The oracle's spot checks of the job, with the verifier's signed report."""
    return _query(
        loop,
        "SELECT s.status, s.verifier, s.segments, s.report, a.worker_key"
        " FROM oracle_spot_checks s JOIN oracle_attestations a ON a.id = s.attestation_id"
        " WHERE a.job_id = ? ORDER BY s.id",
        job_id,
    )


def _containers_created(since: int, label: str) -> list[dict[str, str]]:
    """The attributes (image, labels) of the containers the Docker engine created since
    `since` (epoch seconds) that carry `label`."""
    done = subprocess.run(
        ["docker", "events", "--since", str(since), "--until", str(int(time.time()) + 1),
         "--filter", "type=container", "--filter", "event=create", "--filter",
         f"label={label}", "--format", "{{json .Actor.Attributes}}"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _check_containers(loop: DockerLoop, job: str, image: str, since: int) -> None:
    """The provider trained, and the verifier replayed (the drawn segments, then the first
    again), in containers of the job's pinned image without network."""
    image_id = image.split("@", 1)[1]
    trained = [
        c
        for c in _containers_created(since, "proofnet.managed=1")
        if c.get("proofnet.job_id", "").startswith(job[:32])
    ]
    assert trained, f"no container of job {job} was created"
    tasks = _query(
        loop,
        "SELECT digest FROM verification_units WHERE json_extract(task, '$.job_id') = ?",
        job,
    )
    assert tasks, f"no verification task for job {job}"
    replayed = [
        c
        for t in tasks
        for kind in ("drawn", "repeat")
        for c in _containers_created(since, f"proofnet.job_id=verify-{t['digest'][:12]}-{kind}")
    ]
    assert len(replayed) >= 2, replayed
    for container in trained + replayed:
        assert container["image"] == image_id, container
        assert container["proofnet.network"] == "none", container


def _run_job(loop: DockerLoop, framework: str, image: str) -> None:
    network, me = loop.network, loop.submitter
    spec_file = _job_repository(loop, framework, image)
    provider_ntx = network.ntx_at(loop.provider_worker.payout)
    verifier_ntx = network.ntx_at(loop.verifier_worker.payout)
    since = int(time.time()) - 1
    submitted = json.loads(me.run(f"job submit {spec_file} --key-file payment.skey --lock"))
    job = str(submitted["job"]["job_id"])
    state: dict[str, Any] = {}

    def leased() -> bool:
        state.update(json.loads(me.run(f"job status {job} --key-file payment.skey")))
        return bool(state.get("history"))

    wait_for("the provider's lease", leased, loop.shell.group)
    assert [h["provider"] for h in state["history"]] == [loop.provider_worker.key_id], state
    verifier = loop.start_verifier()
    try:
        escrow: dict[str, Any] = {}

        def settled() -> bool:
            escrow.update(json.loads(me.run(f"job escrow {job} --key-file payment.skey")))
            return escrow.get("state") == "settled"

        wait_for("the settlement", settled, loop.shell.group)
    finally:
        loop.shell.group.stop(verifier, timeout=60)
    status = json.loads(me.run(f"job status {job} --key-file payment.skey"))
    assert status["status"] == "completed", status

    # The spot check: the other worker was drawn and its replay in the job's image passed.
    checks = _spot_checks(loop, job)
    assert checks, f"the oracle recorded no spot check of job {job}"
    passed = [c for c in checks if c["status"] == "passed"]
    assert passed, checks
    assert {c["verifier"] for c in passed} == {loop.verifier_worker.key}, checks
    assert all(c["worker_key"] == loop.provider_worker.key for c in passed), checks
    report = json.loads(passed[-1]["report"])
    drawn = json.loads(passed[-1]["segments"])
    assert drawn and [r["segment"] for r in report["results"]] == drawn, report
    assert report["verifier"] == loop.verifier_worker.key and report["repeat"], report
    assert all(r["distance"] == "0" for r in report["results"]), report  # bit for bit
    _check_containers(loop, job, image, since)

    # The money on chain: what the escrow paid, less the verification fee, at the provider's
    # payout address, and the fee at the verifier's.
    paid = escrow["closing"]["paid_ntx"]
    assert paid > 0 and paid + escrow["closing"]["returned_ntx"] == escrow["budget"], escrow
    fee = fee_for(paid)
    assert 0 < fee < paid
    wait_for(
        "the payouts at the provider's and the verifier's addresses",
        lambda: (
            (
                network.ntx_at(loop.provider_worker.payout) - provider_ntx,
                network.ntx_at(loop.verifier_worker.payout) - verifier_ntx,
            )
            == (paid - fee, fee)
        ),
        loop.shell.group,
    )
    # ...which the audit finds as the rules say (docs/operations.md "Checking payouts").
    audited = loop.shell.enter("auditor").run(
        f"audit --job {job} --deployment {network.api_url} --oracle-url {network.api_url}"
    )
    assert audited.splitlines()[-1].startswith("audit: OK"), audited
    assert "verification fee" in audited, audited

    results = me.run(f"job results {job} --key-file payment.skey")
    assert "results/metrics.json" in results, results


# The image first: a missing one fails (or skips) before the network is stood up.
def test_a_numpy_job_from_its_template_is_paid_after_a_verifier_replays_it(
    numpy_image: str, loop: DockerLoop
) -> None:
    _run_job(loop, "numpy", numpy_image)


def test_a_pytorch_job_from_its_template_is_paid_after_a_verifier_replays_it(
    torch_image: str, loop: DockerLoop
) -> None:
    _run_job(loop, "pytorch", torch_image)
