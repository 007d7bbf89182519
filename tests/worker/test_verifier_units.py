"""Spot checks as verification units, end to end over HTTP: a provider's worker trains a job
with proof of training and attests; the oracle checks the manifest, draws segments and a
verifier with its own signature and posts a signed task; the drawn worker replays the
segments with the network's harness and signs what it computed; the oracle judges the
report against the commitments, and says whose fault a failure is. The oracle runs no job
code at any point.

The workers here run the process runtime (no container engine is needed): a verifier
refuses it unless told it is the local demo or a test (`allow_unisolated`), which is what
these tests do. The same flow under the Docker runtime (the job's image, no network,
read-only root) is `test_a_verifier_replays_in_the_jobs_image_under_docker`.

Attacks, each beside its honest twin: a lazy provider that faked its later segments; the
API host forging a report or a task; a worker paid to the provider's address, or the
provider itself, as verifier; a verifier on the process runtime outside the demo; job code
that does not replay deterministically (the job's fault, not the provider's).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from agent_fixtures import (  # noqa: F401  (fixtures)
    NETWORK,
    TRAINER_PY,
    AgentHarness,
    ApiServer,
    FixtureRepo,
    RecordingOracle,
    RegisteredWorker,
    _git,
    _oracle_app,
    job_path,
    job_spec,
    make_api_server,
    register_worker,
)
from nacl.signing import SigningKey
from sqlmodel import select

from api.db import open_session
from api.models import Provider, VerificationUnit
from benchmarks.cheat_e2e_snoop import snoop_trainer
from chain.devnet.testing import serve_app
from oracle.inputs.feed import JobInfo
from oracle.intake.feed_client import HttpApiFeed
from oracle.verification.spotcheck import SpotCheckUnavailable, SpotCheckVerdict
from oracle.verification.verifiers import VerifierSpotChecker
from oracle.verification.verify import Reason
from proofnet.messages.attestation import Attestation
from proofnet.messages.verification import (
    VerificationError,
    VerificationReport,
    VerificationTask,
)
from worker.api_client import ApiClient
from worker.runtime.docker_runtime import DockerRuntime
from worker.runtime.process_runtime import ProcessRuntime
from worker.verifier import Verifier, VerifierRefused
from worker.workspace import RepoCache

ORACLE = SigningKey.generate()
ORACLE_KEY = bytes(ORACLE.verify_key).hex()
MARKER = "provider-was-here"

# A provider that skips training after step 10 and commits what it has: its spec command
# leaves a marker in the provider's work dir only (a verifier runs no spec commands).
LAZY_PY = f'''"""The numpy MLP, trained lazily where the provider left its marker."""
from pathlib import Path

from pot.examples.numpy_mlp import MLPTrainer as _Base


class MLPTrainer(_Base):
    def __init__(self, ctx):
        super().__init__(ctx)
        self._lazy = (Path(ctx.job_dir) / "{MARKER}").exists()

    def train_step(self, step, indices):
        if self._lazy and step > 10:
            return 1.0
        return super().train_step(step, indices)
'''
# Job code whose every step adds noise from the OS: no run of it can be replayed.
NOISY_PY = '''"""The numpy MLP with noise from os.urandom in every step."""
import os

from pot.examples.numpy_mlp import MLPTrainer as _Base


class MLPTrainer(_Base):
    def train_step(self, step, indices):
        loss = super().train_step(step, indices)
        self.params["b2"] += int.from_bytes(os.urandom(2), "big") * 1e-9
        return loss
'''


@pytest.fixture(scope="module")
def trainers(tmp_path_factory: pytest.TempPathFactory) -> FixtureRepo:
    root = tmp_path_factory.mktemp("verify-git")
    repo = root / "numpy-mlp.git"
    repo.mkdir()
    _git(repo, "init", "--quiet")
    for name, text in (("mlp.py", TRAINER_PY), ("lazy.py", LAZY_PY), ("noisy.py", NOISY_PY)):
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "-m", "trainers")
    commit = _git(repo, "rev-parse", "HEAD")
    return FixtureRepo(repo, commit, {"https://git.example.test/": f"file://{root}/"})


@pytest.fixture
def api_server(tmp_path: Path) -> Iterator[ApiServer]:
    yield from make_api_server(tmp_path, oracle_keys=(ORACLE_KEY,))


@pytest.fixture
def oracle(api_server: ApiServer) -> Iterator[RecordingOracle]:
    recorder = RecordingOracle(escrows=api_server.escrows)
    with serve_app(_oracle_app(recorder)) as url:
        recorder.url = url
        yield recorder


@pytest.fixture
def provider(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,
    trainers: FixtureRepo,
    job_path: None,  # noqa: F811
) -> Iterator[AgentHarness]:
    h = AgentHarness(tmp_path / "provider", api_server, oracle, trainers, ProcessRuntime())
    yield h
    h.close()


@dataclass
class VerifierWorker:
    worker: RegisteredWorker
    api: ApiClient
    verifier: Verifier


def _verifier_worker(
    tmp_path: Path, api_server: ApiServer, trainers: FixtureRepo, name: str = "verifier"
) -> VerifierWorker:
    worker = register_worker(api_server, tmp_path / f"{name}.skey")
    api = ApiClient(api_server.url, worker.key, NETWORK)
    replayer = Verifier(
        api,
        ProcessRuntime(),
        worker.key,
        tmp_path / name,
        RepoCache(tmp_path / f"{name}-repos", rewrites=trainers.rewrites),
        trusted_oracle_keys={ORACLE_KEY},
        allow_unisolated=True,  # the process runtime, in a test (see the module doc)
        timeout_s=300,
    )
    assert replayer.run_once() == []  # asks for tasks: a candidate from now on
    return VerifierWorker(worker, api, replayer)


@pytest.fixture
def verifier(
    tmp_path: Path, api_server: ApiServer, trainers: FixtureRepo
) -> Iterator[VerifierWorker]:
    made = _verifier_worker(tmp_path, api_server, trainers)
    yield made
    made.api.close()


@pytest.fixture
def feed(api_server: ApiServer) -> Iterator[HttpApiFeed]:
    feed = HttpApiFeed(api_server.url, ORACLE, NETWORK, ttl_s=0)
    yield feed
    feed.close()


def run_job(
    api: ApiServer,
    oracle: RecordingOracle,
    provider: AgentHarness,
    repo: FixtureRepo,
    trainer: str = "mlp:MLPTrainer",
    commands: list[list[str]] | None = None,
) -> tuple[Attestation, str]:
    spec = job_spec(repo, steps=20, commands=commands)  # type: ignore[arg-type]
    spec["proof"]["trainer"] = trainer
    spec["seed"] = secrets.randbelow(2**63)
    job_id = api.submit(spec)
    outcome = provider.agent.run(once=True).outcomes[0]
    assert (outcome.status, outcome.reason) == ("attested", "delivered"), outcome
    return oracle.accepted[job_id][-1], job_id


def spot_check(
    checker: VerifierSpotChecker, feed: HttpApiFeed, att: Attestation
) -> SpotCheckVerdict:
    job = feed.job(att.job_id)
    assert isinstance(job, JobInfo)
    return checker.check(att, job)


def checked_after_replay(
    checker: VerifierSpotChecker, feed: HttpApiFeed, att: Attestation, verifier: VerifierWorker
) -> SpotCheckVerdict:
    """The oracle draws and waits; the verifier answers; the oracle judges."""
    verifier.verifier.run_once()  # it asks for tasks (a worker that never does is not drawn)
    with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
        spot_check(checker, feed, att)
    reports = verifier.verifier.run_once()
    assert len(reports) == 1, reports
    return spot_check(checker, feed, att)


def test_a_drawn_verifier_replays_and_the_oracle_verifies_the_honest_proof(
    api_server: ApiServer,
    oracle: RecordingOracle,
    provider: AgentHarness,
    verifier: VerifierWorker,
    feed: HttpApiFeed,
    trainers: FixtureRepo,
) -> None:
    att, job_id = run_job(api_server, oracle, provider, trainers)
    checker = VerifierSpotChecker(feed, ORACLE)
    verdict = checked_after_replay(checker, feed, att, verifier)
    assert verdict.passed and verdict.fault is None, verdict
    assert verdict.verifier == verifier.worker.key.public_key_hex
    # The first segment is always replayed, and replayed twice.
    assert 1 in verdict.segments
    assert verdict.report is not None and verdict.report["repeat"]["segment"] == 1
    # The verifier's measured replay is what bounds a rate-card job's GPU time.
    assert verdict.timing is not None and verdict.timing.replayed_steps > 0
    # The task the verifier answered is the oracle's, naming the provider and the draw.
    with open_session(api_server.engine) as session:
        row = session.exec(select(VerificationUnit)).one()
    task = VerificationTask.from_json(row.task)
    task.verify({ORACLE_KEY})
    assert task.provider == provider.worker.key.public_key_hex
    assert task.verifier == verifier.worker.key.public_key_hex
    assert task.job_id == job_id and task.pot_root == att.pot_root
    # Checking again asks nothing new of anyone: the same task, the same verdict.
    assert spot_check(checker, feed, att) == verdict
    assert verifier.verifier.run_once() == []


def test_a_repository_pot_link_does_not_lead_the_proof_files_out_of_the_task_dir(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,
    provider: AgentHarness,
    verifier: VerifierWorker,
    feed: HttpApiFeed,
    trainers: FixtureRepo,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The job's repository, as the verifier checks it out, holds `pot` as a link to a
    directory of the verifier's machine (here added right after the real checkout: the
    provider's run of such a repository is another matter): the proof files still land in
    the task's own directory and nothing is written through the link."""
    outside = tmp_path / "outside"
    outside.mkdir()
    checkout = verifier.verifier.repos.checkout

    def with_link(url: str, commit: str, dest: Path) -> Path:
        done = checkout(url, commit, dest)
        (dest / "pot").symlink_to(outside)
        return done

    att, _ = run_job(api_server, oracle, provider, trainers)
    monkeypatch.setattr(verifier.verifier.repos, "checkout", with_link)
    verdict = checked_after_replay(VerifierSpotChecker(feed, ORACLE), feed, att, verifier)
    assert verdict.passed, verdict
    assert list(outside.iterdir()) == []


def test_a_lazy_provider_is_caught_and_it_is_the_providers_fault(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,
    provider: AgentHarness,
    verifier: VerifierWorker,
    feed: HttpApiFeed,
    trainers: FixtureRepo,
) -> None:
    """The lazy provider's replay fails on the drawn verifier: the segment is disputed. A
    second verifier (another registered worker) departs alike, and the provider's own
    worker, asked to replay segment 2 in a verifier's sandbox from the very files, computes
    what they did and concedes (it commits, then reveals): unproven, the provider's fault,
    unpaid and not slashed (oracle/verification/referee.py, over HTTP end to end)."""
    mark = [["python3", "-c", f"open('{MARKER}', 'w').close()"]]
    att, _ = run_job(api_server, oracle, provider, trainers, "lazy:MLPTrainer", mark)
    second = _verifier_worker(tmp_path, api_server, trainers, "second")
    answerer = Verifier(
        provider.api,
        ProcessRuntime(),
        provider.worker.key,
        tmp_path / "provider-disputes",
        RepoCache(tmp_path / "provider-repos", rewrites=trainers.rewrites),
        trusted_oracle_keys={ORACLE_KEY},
        allow_unisolated=True,
        timeout_s=300,
    )
    checker = VerifierSpotChecker(feed, ORACLE, disputes=feed)
    verdict, waited = None, ""
    for _ in range(4):  # the oracle's rounds: first verifier, second, the provider's answer
        try:
            verdict = spot_check(checker, feed, att)
            break
        except SpotCheckUnavailable as waiting:
            waited = str(waiting)
        verifier.verifier.run_once()
        second.verifier.run_once()
        answerer.answer_disputes()
    assert verdict is not None, waited
    assert (verdict.reason, verdict.fault) == (Reason.REPLAY_UNPROVEN, "provider"), verdict
    assert "segments [2]" in verdict.message  # segment 1 was trained; segment 2 was not
    assert "agrees with them" in verdict.message
    assert verdict.report is not None and verdict.report["dispute"]["reveal"] is not None
    second.api.close()


def test_job_code_that_does_not_replay_is_the_jobs_fault(
    api_server: ApiServer,
    oracle: RecordingOracle,
    provider: AgentHarness,
    verifier: VerifierWorker,
    feed: HttpApiFeed,
    trainers: FixtureRepo,
) -> None:
    att, _ = run_job(api_server, oracle, provider, trainers, "noisy:MLPTrainer")
    verdict = checked_after_replay(VerifierSpotChecker(feed, ORACLE), feed, att, verifier)
    assert (verdict.reason, verdict.fault) == (Reason.JOB_NOT_REPLAYABLE, "job"), verdict
    assert "not deterministic" in verdict.message


def test_the_api_host_cannot_forge_a_report_or_a_task(
    api_server: ApiServer,
    oracle: RecordingOracle,
    provider: AgentHarness,
    verifier: VerifierWorker,
    feed: HttpApiFeed,
    trainers: FixtureRepo,
) -> None:
    att, _ = run_job(api_server, oracle, provider, trainers)
    checker = VerifierSpotChecker(feed, ORACLE)
    with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
        spot_check(checker, feed, att)
    with open_session(api_server.engine) as session:
        row = session.exec(select(VerificationUnit)).one()
        task = VerificationTask.from_json(row.task)
        # A "passed" report signed by a key the host made up, written straight to the DB.
        forged = VerificationReport.sign(SigningKey.generate(), task, status="passed")
        row.report = {**forged.to_json(), "verifier": task.verifier}
        row.reported_at = datetime.now(UTC)
        session.add(row)
        session.commit()
    with pytest.raises(SpotCheckUnavailable, match="does not hold"):
        spot_check(checker, feed, att)
    # Nor can the host make up a task: it holds no oracle key the API (or a verifier) trusts.
    host = SigningKey.generate()
    fields = task.to_json()
    del fields["oracle_key"], fields["signature"]
    made_up = VerificationTask.sign(host, **{**fields, "segments": [1, 2]})
    refused = api_server.http.post(
        "/api/v1/oracle/verifications",
        content=json.dumps(made_up.to_json()).encode(),
        headers=_signed_post(made_up.to_json(), host),
    )
    assert refused.status_code == 403, refused.text
    with pytest.raises(VerificationError, match="not an oracle"):
        verifier.verifier.verify({"id": 0, "task": made_up.to_json(), "spec": {}})


def test_a_silent_verifier_is_replaced_by_the_next_draw(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,
    provider: AgentHarness,
    verifier: VerifierWorker,
    feed: HttpApiFeed,
    trainers: FixtureRepo,
) -> None:
    """The drawn verifier never answers (offline, or withholding): after `answer_within_s`
    the oracle draws again among the others, so a provider is not left unpaid for ever."""
    second = register_worker(api_server, tmp_path / "second.skey")
    workers = {
        verifier.worker.key.public_key_hex: verifier,
        second.key.public_key_hex: VerifierWorker(
            second,
            api := ApiClient(api_server.url, second.key, NETWORK),
            Verifier(
                api,
                ProcessRuntime(),
                second.key,
                tmp_path / "second",
                RepoCache(tmp_path / "second-repos", rewrites=trainers.rewrites),
                trusted_oracle_keys={ORACLE_KEY},
                allow_unisolated=True,  # the process runtime, in a test
                timeout_s=300,
            ),
        ),
    }
    try:
        assert workers[second.key.public_key_hex].verifier.run_once() == []
        att, _ = run_job(api_server, oracle, provider, trainers)
        clock = [datetime.now(UTC)]
        checker = VerifierSpotChecker(feed, ORACLE, answer_within_s=600, now=lambda: clock[0])
        with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
            spot_check(checker, feed, att)
        with open_session(api_server.engine) as session:
            first = VerificationTask.from_json(session.exec(select(VerificationUnit)).one().task)
        # Still within its time: the oracle keeps waiting for the first draw.
        clock[0] += timedelta(seconds=599)
        with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
            spot_check(checker, feed, att)
        clock[0] += timedelta(seconds=2)
        with pytest.raises(SpotCheckUnavailable, match=r"\(round 1\)"):
            spot_check(checker, feed, att)
        with open_session(api_server.engine) as session:
            rows = session.exec(select(VerificationUnit).order_by(VerificationUnit.id)).all()
        redrawn = VerificationTask.from_json(rows[-1].task)
        assert len(rows) == 2 and redrawn.round == 1
        assert redrawn.verifier != first.verifier
        assert workers[redrawn.verifier].verifier.run_once()
        verdict = spot_check(checker, feed, att)
        assert verdict.passed and verdict.verifier == redrawn.verifier, verdict
    finally:
        workers[second.key.public_key_hex].api.close()


def test_the_provider_and_workers_paid_to_its_address_are_never_drawn(
    api_server: ApiServer,
    oracle: RecordingOracle,
    provider: AgentHarness,
    verifier: VerifierWorker,
    feed: HttpApiFeed,
    trainers: FixtureRepo,
) -> None:
    att, job_id = run_job(api_server, oracle, provider, trainers)
    checker = VerifierSpotChecker(feed, ORACLE)
    # The only other worker is paid to the provider's address: nobody can verify.
    with open_session(api_server.engine) as session:
        row = session.exec(
            select(Provider).where(Provider.worker_key == verifier.worker.key.public_key_hex)
        ).one()
        row.payout_address = provider.worker.payout_address
        session.add(row)
        session.commit()
    with pytest.raises(SpotCheckUnavailable, match="no online verifier"):
        spot_check(checker, feed, att)
    # Nor does the API take a task naming the provider's twin, or the provider itself.
    twin = _task(att, job_id, verifier.worker.key.public_key_hex)
    answer = feed.client.post(  # type: ignore[union-attr]
        "/api/v1/oracle/verifications",
        content=json.dumps(twin.to_json()).encode(),
        headers=_signed_post(twin.to_json()),
    )
    assert answer.status_code == 400 and "paid elsewhere" in answer.text


def test_the_process_runtime_is_refused_for_verification_outside_the_demo(
    verifier: VerifierWorker, tmp_path: Path
) -> None:
    with pytest.raises(VerifierRefused, match="does not isolate"):
        Verifier(
            verifier.api,
            ProcessRuntime(),
            verifier.worker.key,
            tmp_path / "v",
            RepoCache(tmp_path / "r"),
            trusted_oracle_keys={ORACLE_KEY},
        )


@pytest.mark.docker
@pytest.mark.slow
def test_a_verifier_replays_in_the_jobs_image_under_docker(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,
    trainers: FixtureRepo,
    feed: HttpApiFeed,
    docker_runtime: DockerRuntime,
    test_image_id: str,
) -> None:
    """Provider and verifier both on the Docker runtime: the replay runs in the job's
    digest-pinned image, without network, read-only root, nothing of the worker mounted
    but the task's directory and the harness (and no allow_unisolated needed)."""
    provider = AgentHarness(tmp_path / "provider", api_server, oracle, trainers, docker_runtime)
    worker = register_worker(api_server, tmp_path / "verifier.skey")
    api = ApiClient(api_server.url, worker.key, NETWORK)
    try:
        spec = job_spec(trainers, steps=20, image=f"proofnet/test-numpy@{test_image_id}")
        job_id = api_server.submit(spec)
        outcome = provider.agent.run(once=True).outcomes[0]
        assert (outcome.status, outcome.reason) == ("attested", "delivered"), outcome
        att = oracle.accepted[job_id][-1]
        replayer = Verifier(
            api,
            docker_runtime,
            worker.key,
            tmp_path / "verifier",
            RepoCache(tmp_path / "verifier-repos", rewrites=trainers.rewrites),
            trusted_oracle_keys={ORACLE_KEY},
            timeout_s=300,
        )
        verdict = checked_after_replay(
            VerifierSpotChecker(feed, ORACLE), feed, att, VerifierWorker(worker, api, replayer)
        )
        assert verdict.passed and verdict.fault is None, verdict
        assert verdict.verifier == worker.key.public_key_hex
    finally:
        api.close()
        provider.close()


@pytest.mark.docker
@pytest.mark.slow
def test_job_code_on_a_verifier_reaches_neither_its_key_nor_the_network(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,
    feed: HttpApiFeed,
    docker_runtime: DockerRuntime,
    test_image_id: str,
    job_path: None,  # noqa: F811
) -> None:
    """Job code that changes what it computes on replay whenever it can read the
    verifier's key file or reach the API: under the Docker runtime it reaches neither, so
    its replay matches; the twin, the same task replayed by the process runtime (what a
    verifier refuses outside tests), reaches both and does not replay."""
    worker = register_worker(api_server, tmp_path / "verifier.skey")
    host, port = api_server.url.removeprefix("http://").rsplit(":", 1)
    root = tmp_path / "snoop-git"
    repo = root / "numpy-mlp.git"
    repo.mkdir(parents=True)
    _git(repo, "init", "--quiet")
    # The cheat table's snooping trainer (benchmarks/cheat_e2e_snoop.py), aimed at this
    # verifier's key and the API.
    (repo / "snoop.py").write_text(snoop_trainer([str(worker.key_file)], [(host, int(port))]))
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "-m", "snooping trainer")
    snoop = FixtureRepo(
        repo, _git(repo, "rev-parse", "HEAD"), {"https://git.example.test/": f"file://{root}/"}
    )
    provider = AgentHarness(tmp_path / "provider", api_server, oracle, snoop, docker_runtime)
    api = ApiClient(api_server.url, worker.key, NETWORK)
    try:
        spec = job_spec(snoop, steps=20, image=f"proofnet/test-numpy@{test_image_id}")
        spec["proof"]["trainer"] = "snoop:MLPTrainer"
        job_id = api_server.submit(spec)
        outcome = provider.agent.run(once=True).outcomes[0]
        assert (outcome.status, outcome.reason) == ("attested", "delivered"), outcome
        att = oracle.accepted[job_id][-1]

        def replayer(runtime: Any, name: str, **kw: Any) -> VerifierWorker:
            v = Verifier(
                api,
                runtime,
                worker.key,
                tmp_path / name,
                RepoCache(tmp_path / f"{name}-repos", rewrites=snoop.rewrites),
                trusted_oracle_keys={ORACLE_KEY},
                timeout_s=300,
                **kw,
            )
            return VerifierWorker(worker, api, v)

        docker = replayer(docker_runtime, "docker")
        verdict = checked_after_replay(VerifierSpotChecker(feed, ORACLE), feed, att, docker)
        assert verdict.passed, verdict
        # The twin: the same draw replayed by the unisolated process runtime.
        with open_session(api_server.engine) as session:
            row = session.exec(select(VerificationUnit)).one()
        task = VerificationTask.from_json(row.task)
        unisolated = replayer(ProcessRuntime(), "process", allow_unisolated=True).verifier
        pending = {
            "id": row.id,
            "task": task.to_json(),
            "spec": api_server.job(job_id)["spec"],
            "files": [{"name": n, "sha256": h} for n, h in feed_hashes(feed, job_id, task).items()],
            "key_requests": [],
        }
        report = unisolated.verify(pending)
        assert report is not None and report.status == "failed", report
        # Far off, as the snooping code's nudge makes it (not a rounding difference between
        # the host's numpy and the image's).
        assert max(float(r.distance) for r in report.results) > 1e-4, report
    finally:
        api.close()
        provider.close()


def feed_hashes(feed: HttpApiFeed, job_id: str, task: VerificationTask) -> dict[str, str]:
    job = feed.job(job_id)
    assert job is not None
    hashes = {n: job.result_hash(n) for n in task.files}
    return {n: h for n, h in hashes.items() if h is not None}


def _task(att: Attestation, job_id: str, verifier_key: str) -> VerificationTask:
    return VerificationTask.sign(
        ORACLE,
        job_id=job_id,
        nonce=att.nonce,
        attestation=att.leaf_hash().hex(),
        pot_root=att.pot_root,
        provider=att.worker_key,
        verifier=verifier_key,
        device_class="cpu",
        segments=[1],
        files=[],
        draw_signature="0" * 128,
    )


def _signed_post(payload: Any, key: SigningKey = ORACLE) -> dict[str, str]:
    from oracle.intake.feed_client import VERIFICATIONS_PATH
    from proofnet.messages.worker_auth import sign_request_headers

    headers = sign_request_headers(
        key,
        network=NETWORK,
        method="POST",
        path=VERIFICATIONS_PATH,
        body=json.dumps(payload).encode(),
        timestamp=int(datetime.now(UTC).timestamp()),
    )
    headers["Content-Type"] = "application/json"
    return headers
