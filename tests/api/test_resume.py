"""A single-unit job whose lease ends early resumes on the next provider from the last
checkpoint the lost attempt committed and uploaded (its `pot/prefix.json` and that
checkpoint's files, real ones from the proof-of-training recorder), with the lost attempt's
nonce (so the same data order); the job view shows each attempt with the segments it
proved. The attacks: checkpoint files that are not the ones the prefix commits (forged
weights, or a prefix the resumed lease rewrote) are never handed out."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from api_support import NETWORK, FakeClock, Worker, job_spec
from fastapi.testclient import TestClient
from nacl.signing import SigningKey

from api.client_cli import history_summary
from api.config import ApiConfig
from api.storage import LocalBlobStore
from oracle.inputs.feed import ArtifactMissing, FeedError
from oracle.intake.feed_client import HttpApiFeed
from pot.examples.numpy_mlp import MLPTrainer
from pot.harness import run_segment
from pot.manifest import PREFIX_NAME, Manifest
from pot.recorder import ProofOfTraining
from pot.schedule import Schedule
from pot.tensors import write_tensors
from pot.trainer import TrainContext
from proofnet.messages.result_paths import attempt_result_name
from proofnet.messages.worker_auth import request_target, sign_request_headers

ORACLE = SigningKey(b"\x09" * 32)
SCHEDULE = Schedule(total_steps=200, steps_per_checkpoint=50, dataset_size=512, batch_size=32)
LOST_AFTER = 2


@pytest.fixture
def config(make_config: Callable[..., ApiConfig]) -> ApiConfig:
    return make_config(oracle_keys=(bytes(ORACLE.verify_key).hex(),))


def pot_files(job_dir: Path, segments: int = LOST_AFTER, *, job_seed: int = 7) -> Path:
    """What a provider's recorder left after `segments` segments (no manifest: it was lost)."""
    ctx = TrainContext(
        job_dir=job_dir,
        job_seed=job_seed,
        data_seed=11,
        schedule=SCHEDULE,
        config={"hidden": 8},
    )
    trainer = MLPTrainer(ctx)
    recorder = ProofOfTraining(job_dir / "pot", steps_per_checkpoint=50, data_seed=11)
    sampler = SCHEDULE.sampler(11)
    recorder.start(trainer.state())
    for segment in range(1, segments + 1):
        run_segment(
            trainer,
            sampler,
            SCHEDULE.segment_steps(segment),
            lambda _s, idx, loss: recorder.record_step(idx, loss),
        )
        recorder.commit(trainer.state())
    recorder.leaves  # noqa: B018 - waits until the files are written
    return job_dir / "pot"


def upload(worker: Worker, clock: FakeClock, token: str, name: str, data: bytes) -> None:
    path = f"/api/v1/worker/leases/{token}/results/{name}"
    headers = sign_request_headers(
        worker.key,
        network=NETWORK,
        method="PUT",
        path=request_target(path),
        body=data,
        timestamp=int(clock().timestamp()),
    )
    headers["content-type"] = "application/octet-stream"
    response = worker.client.put(path, content=data, headers=headers)
    assert response.status_code == 200, response.text


def upload_pot(worker: Worker, clock: FakeClock, token: str, pot_dir: Path) -> None:
    for path in sorted(pot_dir.iterdir()):
        upload(worker, clock, token, f"pot/{path.name}", path.read_bytes())


def post_job(client: TestClient, headers: dict[str, str]) -> str:
    spec = job_spec()
    spec["results"] = [{"path": "pot/**", "kind": "model"}]
    response = client.post("/api/v1/jobs", json={"spec": spec}, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["job_id"])


def release(worker: Worker, token: str) -> None:
    answer = worker.request(
        "POST", f"/api/v1/worker/leases/{token}/release", {"reason": "spot instance reclaimed"}
    )
    assert answer.status_code == 200, answer.text


def test_a_lost_attempt_resumes_from_its_last_committed_checkpoint(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    _, headers = approved
    job_id = post_job(client, headers)
    first, second, third = worker_factory(), worker_factory(), worker_factory()
    for w in (first, second, third):
        w.register([("L4", 24576)])
    lost = first.claim().json()
    assert lost.get("resume") is None  # nothing committed yet: from step 0
    pot_dir = pot_files(tmp_path / "first")
    upload_pot(first, clock, lost["lease_token"], pot_dir)
    release(first, lost["lease_token"])

    claim = second.claim().json()
    resume = claim["resume"]
    prefix = Manifest.load(pot_dir, name=PREFIX_NAME)
    assert resume["from_attempt"] == 1 and resume["at"] == LOST_AFTER
    assert resume["step"] == 100 and resume["prefix_root"] == prefix.root
    assert claim["nonce"] == lost["nonce"]  # the same data order
    names = [f["name"] for f in resume["files"]]
    assert names == [
        "pot/prefix.json",
        "pot/000002.weights",
        "pot/000002.optim",
        "pot/000002.rng.json",
    ]
    token = claim["lease_token"]
    for position, item in enumerate(resume["files"]):
        got = second.request("GET", f"/api/v1/worker/leases/{token}/resume/{position}")
        assert got.status_code == 200, got.text
        assert hashlib.sha256(got.content).hexdigest() == item["sha256"]
    # Only the lease's holder reads them.
    assert third.request("GET", f"/api/v1/worker/leases/{token}/resume/0").status_code == 404
    assert second.request("GET", f"/api/v1/worker/leases/{token}/resume/4").status_code == 404

    done = second.request(
        "POST", f"/api/v1/worker/leases/{token}/complete", {"result": {"root": "ab" * 32}}
    )
    assert done.status_code == 200, done.text
    # The lost attempt is never paid as if it finished: its lease cannot complete.
    stale = first.request(
        "POST", f"/api/v1/worker/leases/{lost['lease_token']}/complete", {"result": {}}
    )
    assert stale.status_code in (404, 409)
    history = client.get(f"/api/v1/jobs/{job_id}", headers=headers).json()["history"]
    assert [
        (h["attempt"], h["outcome"], h["first_segment"], h["last_segment"], h["proved"])
        for h in history
    ] == [(1, "released", 1, 2, True), (2, "completed", 3, None, True)]
    assert history[1]["resumed_from_attempt"] == 1 and history[1]["resumed_at"] == 2
    assert history[0]["provider"] != history[1]["provider"]
    # `proofnet job status` prints it per provider.
    assert history_summary(history).splitlines() == [
        f"attempt 1 (provider {history[0]['provider']}, released): segments 1..2",
        f"attempt 2 (provider {history[1]['provider']}, completed, resumed attempt 1 at "
        "checkpoint 2): segments 3..end",
    ]


def test_forged_checkpoint_files_are_never_handed_out(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    """The lost provider's last checkpoint's weights were replaced (not the committed ones):
    the API resumes from the checkpoint before, whose files match the prefix."""
    _, headers = approved
    post_job(client, headers)
    first, second = worker_factory(), worker_factory()
    first.register([("L4", 24576)])
    second.register([("L4", 24576)])
    lost = first.claim().json()
    pot_dir = pot_files(tmp_path / "first")
    forged = {"W1": np.zeros((4, 4))}
    write_tensors(pot_dir / "000002.weights", forged)
    upload_pot(first, clock, lost["lease_token"], pot_dir)
    release(first, lost["lease_token"])
    resume = second.claim().json()["resume"]
    assert resume["at"] == 1
    assert "pot/000001.weights" in [f["name"] for f in resume["files"]]


def test_a_resumed_lease_that_rewrites_the_prefix_it_was_handed_is_not_resumed_from(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    """Attempt 2 resumed attempt 1 at checkpoint 2 but uploads a prefix of its own (a forged
    history: other leaves 0..2), then is lost: attempt 3 resumes from attempt 1's committed
    checkpoint, not from the forgery."""
    _, headers = approved
    post_job(client, headers)
    a, b, c = worker_factory(), worker_factory(), worker_factory()
    for w in (a, b, c):
        w.register([("L4", 24576)])
    lost = a.claim().json()
    upload_pot(a, clock, lost["lease_token"], pot_files(tmp_path / "a"))
    release(a, lost["lease_token"])
    cheat = b.claim().json()
    assert cheat["resume"]["at"] == LOST_AFTER
    # A self-consistent proof of its own (other initial weights), files and prefix alike.
    upload_pot(b, clock, cheat["lease_token"], pot_files(tmp_path / "b", segments=3, job_seed=8))
    release(b, cheat["lease_token"])
    honest = c.claim().json()["resume"]
    assert honest["from_attempt"] == 1 and honest["at"] == LOST_AFTER


def test_the_oracle_feed_reports_each_attempt_and_the_prefix_it_resumed(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    """What the oracle checks a resumed proof against: per attempt its worker, nonce, the
    segments it proved and its proof uploads, and the lost attempt's prefix served by the
    hash the API recorded for that lease (`attempts/<n>/pot/...`)."""
    _, headers = approved
    job_id = post_job(client, headers)
    first, second = worker_factory(), worker_factory()
    for w in (first, second):
        w.register([("L4", 24576)])
    lost = first.claim().json()
    pot_dir = pot_files(tmp_path / "first")
    upload_pot(first, clock, lost["lease_token"], pot_dir)
    release(first, lost["lease_token"])
    token = second.claim().json()["lease_token"]
    upload(second, clock, token, "pot/manifest.json", b"{}")
    done = second.request(
        "POST", f"/api/v1/worker/leases/{token}/complete", {"result": {"root": "ab" * 32}}
    )
    assert done.status_code == 200, done.text

    feed = HttpApiFeed("", ORACLE, NETWORK, client=client, ttl_s=0)
    job = feed.job(job_id)
    assert job is not None and job.lease is not None and job.lease.attempt == 2
    one, two = job.attempts
    assert (one.attempt, one.worker_key, one.outcome) == (1, first.public_key, "released")
    assert (one.first_segment, one.last_segment, one.resumed_from) == (1, 2, None)
    assert (two.worker_key, two.resumed_from, two.resumed_at) == (second.public_key, 1, 2)
    assert (two.first_segment, two.last_segment) == (3, None)
    assert one.nonce == two.nonce == job.lease.nonce
    prefix = (pot_dir / PREFIX_NAME).read_bytes()
    assert one.results["pot/prefix.json"] == hashlib.sha256(prefix).hexdigest()
    assert feed.artifact(job_id, attempt_result_name(1, "pot/prefix.json")) == prefix
    # The completing lease's own uploads stay the job's results; no attempt 3 exists.
    assert feed.artifact(job_id, "pot/manifest.json") == b"{}"
    with pytest.raises(ArtifactMissing):
        feed.artifact(job_id, attempt_result_name(3, "pot/prefix.json"))


def test_a_provider_that_vanishes_mid_job_leaves_the_checkpoints_it_uploaded_while_training(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    """The worker's checkpoint uploader (`worker.checkpoint_upload`) ships each committed
    checkpoint as the job trains; the provider then vanishes (no release, no heartbeat):
    once its lease expires the next claim resumes from the last checkpoint it shipped."""
    from worker.checkpoint_upload import CheckpointUploader
    from worker.results import CollectedResult

    _, headers = approved
    job_id = post_job(client, headers)
    first, second = worker_factory(), worker_factory()
    for w in (first, second):
        w.register([("L4", 24576)])
    lost = first.claim().json()
    token = lost["lease_token"]

    def ship(files: list[CollectedResult]) -> None:
        for f in files:
            upload(first, clock, token, f.name, f.path.read_bytes())

    job_dir = tmp_path / "first"
    shipper = CheckpointUploader(job_dir, ship, snapshot_dir=tmp_path / "snap")
    pot_files(job_dir, segments=1)
    assert shipper.pass_once() == 2
    pot_files(job_dir, segments=LOST_AFTER)  # training goes on (the same run, replayed)
    assert shipper.pass_once() == 1
    clock.advance(lost["lease_ttl_s"] + 60)  # the machine is gone: no heartbeat, no release

    claim = second.claim().json()
    resume = claim["resume"]
    assert resume is not None, claim
    assert resume["from_attempt"] == 1 and resume["at"] == LOST_AFTER
    assert resume["prefix_root"] == Manifest.load(job_dir / "pot", name=PREFIX_NAME).root
    history = client.get(f"/api/v1/jobs/{job_id}", headers=headers).json()["history"]
    assert [(h["attempt"], h["outcome"]) for h in history] == [(1, "expired"), (2, None)]


def test_a_verification_task_for_the_resumed_attempt_names_its_own_lease(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    """The resumed lease shares the lost one's nonce: a drawn verifier's task for the
    resumed attempt's proof is the resumed lease's (its provider, its uploads), not the
    lost attempt's."""
    from proofnet.messages.verification import VerificationTask

    _, headers = approved
    job_id = post_job(client, headers)
    first, second, verifier = worker_factory(), worker_factory(), worker_factory()
    for w in (first, second, verifier):
        w.register([("L4", 24576)])
    lost = first.claim().json()
    upload_pot(first, clock, lost["lease_token"], pot_files(tmp_path / "first"))
    release(first, lost["lease_token"])
    token = second.claim().json()["lease_token"]
    upload(second, clock, token, "pot/manifest.json", b"{}")
    done = second.request(
        "POST", f"/api/v1/worker/leases/{token}/complete", {"result": {"root": "ab" * 32}}
    )
    assert done.status_code == 200, done.text

    def task(provider: Worker, files: list[str]) -> VerificationTask:
        return VerificationTask.sign(
            ORACLE,
            job_id=job_id,
            nonce=lost["nonce"],
            attestation="a" * 64,
            pot_root="b" * 64,
            provider=provider.public_key,
            verifier=verifier.public_key,
            device_class="L4",
            segments=[3],
            files=files,
            draw_signature="c" * 128,
        )

    feed = HttpApiFeed("", ORACLE, NETWORK, client=client, ttl_s=0)
    state = feed.post_verification(task(second, ["pot/manifest.json"]))
    assert state["report"] is None
    # The lost attempt's own files are its lease's: a task naming them under the resumed
    # provider is refused (that lease uploaded no such file).
    with pytest.raises(FeedError, match="uploaded no"):
        feed.post_verification(task(second, ["pot/000001.weights"]))
