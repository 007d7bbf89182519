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
    # The schedule the provider's recorder follows (SCHEDULE): what tells segments apart.
    spec["proof"] = {
        "steps_per_checkpoint": SCHEDULE.steps_per_checkpoint,
        "schedule": {"steps": 200, "dataset_size": 512, "batch_size": 32},
    }
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

    # Its completion reports what its attestation claims: the share for segments 3..4.
    done = second.request(
        "POST",
        f"/api/v1/worker/leases/{token}/complete",
        {"result": {"root": "ab" * 32, "amount": 500_000}},
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
    assert (history[0]["claimed"], history[1]["claimed"]) == (None, 500_000)
    # `proofnet job status` prints it per provider.
    assert history_summary(history).splitlines() == [
        f"attempt 1 (provider {history[0]['provider']}, released): segments 1..2, not paid",
        f"attempt 2 (provider {history[1]['provider']}, completed, resumed attempt 1 at "
        "checkpoint 2): segments 3..end, claims 500000 NTX base units",
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


def _signed_claim(worker: Worker, job_id: str, escrow_tx: str, segments: dict[str, int]) -> bytes:
    """An attestation as the lost worker's checkpoint uploader signs it (its own key)."""
    from proofnet.messages.address import enterprise_address
    from proofnet.messages.attestation import (
        Attestation,
        AttestationDomain,
        EscrowRef,
        sign_attestation,
    )

    att = Attestation(
        domain=AttestationDomain(
            network=NETWORK,
            escrow_script_hash="ab" * 28,
            escrow=EscrowRef(tx_id=escrow_tx, index=0),
            job_id=job_id,
        ),
        worker_key=worker.public_key,
        payout_address=enterprise_address(bytes(worker.key.verify_key), NETWORK),
        started_ms=0,
        ended_ms=1,
        gpu_milliseconds=0,
        gpu_model="L4",
        gpu_uuid_sha256="cd" * 32,
        image_digest="sha256:" + "d" * 64,
        command_hash="ef" * 32,
        result_hashes={},
        pot_root="01" * 32,
        metrics={},
        nonce="ab" * 16,
        amount=400_000,
        segments=segments,
    )
    return sign_attestation(att, worker.key).cose


def test_the_history_shows_what_a_lost_attempt_claims_for_the_segments_it_proved(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    """A lost provider signed its claim while it trained (`pot/claim-<k>.cose`): the job
    view shows its amount beside the resumed attempt's, so both payouts are seen per
    attempt (a claim naming other segments, or not its worker's, is not shown)."""
    _, headers = approved
    job_id = post_job(client, headers)
    first, second = worker_factory(), worker_factory()
    for w in (first, second):
        w.register([("L4", 24576)])
    lost = first.claim().json()
    upload_pot(first, clock, lost["lease_token"], pot_files(tmp_path / "first"))
    honest = _signed_claim(first, job_id, "12" * 32, {"attempt": 1, "first": 1, "last": 2})
    upload(first, clock, lost["lease_token"], "pot/claim-2.cose", honest)
    release(first, lost["lease_token"])
    claim = second.claim().json()
    assert claim["resume"]["at"] == LOST_AFTER
    done = second.request(
        "POST",
        f"/api/v1/worker/leases/{claim['lease_token']}/complete",
        {"result": {"root": "ab" * 32, "amount": 500_000}},
    )
    assert done.status_code == 200, done.text
    history = client.get(f"/api/v1/jobs/{job_id}", headers=headers).json()["history"]
    assert [(h["attempt"], h["claimed"]) for h in history] == [(1, 400_000), (2, 500_000)]
    assert (
        history_summary(history)
        .splitlines()[0]
        .endswith("segments 1..2, claims 400000 NTX base units")
    )


# --- sealed jobs: the checkpoint's keys come from the submitter, never via the API host ----


def _sealed_world(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    tmp_path: Path,
    *,
    forge: bool = False,
) -> dict[str, Any]:
    """A sealed job whose first provider sealed its checkpoints to the submitter (the prefix
    left clear, as `worker.results.seals` says), uploaded them and was lost; a second
    provider claims it. `forge`: the lost provider sealed other weights than leaf 2 commits."""
    from api.client_cli import JobClient
    from proofnet.messages.envelope import new_secret
    from proofnet.messages.sealing import generate_sealing_key
    from worker.results import CollectedResult, seal_results, seals

    wallet, headers = approved
    cli = JobClient(
        "http://testserver", wallet.signing_key, http=client, token_cache=tmp_path / "session"
    )
    sealing_key = generate_sealing_key(tmp_path / "sealing.key")
    public = cli.register_sealing_key(sealing_key)["public_key"]
    job_id = post_job(client, headers)
    first, second, other = worker_factory(), worker_factory(), worker_factory()
    for w in (first, second, other):
        w.register([("L4", 24576)])
    lost = first.claim().json()
    assert lost["sealing"]["public_key"] == public
    pot_dir = pot_files(tmp_path / "first")
    if forge:
        write_tensors(pot_dir / "000002.weights", {"W1": np.zeros((4, 4))})
    files = [
        CollectedResult(
            name=f"pot/{p.name}",
            path=p,
            sha256=hashlib.sha256(p.read_bytes()).hexdigest(),
            size=p.stat().st_size,
            kind="model",
            glob="pot/**",
        )
        for p in sorted(pot_dir.iterdir())
    ]
    clear = [f for f in files if not seals(f.name)]
    assert [f.name for f in clear] == ["pot/prefix.json"]
    hidden = seal_results(
        [f for f in files if seals(f.name)],
        tmp_path / "sealed",
        secret=new_secret(),
        recipients=[public],
    )
    for f in [*clear, *hidden]:
        upload(first, clock, lost["lease_token"], f.name, f.path.read_bytes())
    release(first, lost["lease_token"])
    claim = second.claim().json()
    return {
        "job_id": job_id,
        "headers": headers,
        "sealing_key": sealing_key,
        "cli": cli,
        "second": second,
        "other": other,
        "claim": claim,
        "pot_dir": pot_dir,
    }


def _download_resume(worker: Worker, claim: dict[str, Any], dest: Path) -> dict[str, Path]:
    dest.mkdir(parents=True, exist_ok=True)
    out = {}
    token = claim["lease_token"]
    for position, item in enumerate(claim["resume"]["files"]):
        got = worker.request("GET", f"/api/v1/worker/leases/{token}/resume/{position}")
        assert got.status_code == 200, got.text
        path = dest / (Path(item["name"]).name + (".sealed" if position else ""))
        path.write_bytes(got.content)
        out[item["name"]] = path
    return out


def _grants_for(
    client: TestClient, world: dict[str, Any], worker_key: str, dest: Path
) -> dict[str, Any]:
    """The submitter's side: re-wrap each pending file's key for `worker_key`."""
    from proofnet.messages.resume_grant import regrant

    pending = client.get(
        f"/api/v1/jobs/{world['job_id']}/resume-grant", headers=world["headers"]
    ).json()
    files = _download_resume(world["second"], world["claim"], dest)
    grants = {}
    for ref in pending["files"]:
        with files[ref["name"]].open("rb") as f:
            grants[ref["name"]] = regrant(f, world["sealing_key"], worker_key).to_json()
    return grants


def test_a_sealed_job_resumes_once_the_submitter_grants_the_checkpoint_keys(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    from proofnet.messages.envelope import SealingError, open_file, worker_private_key
    from worker.sealed_resume import check_against_leaf, open_checkpoint

    world = _sealed_world(client, approved, worker_factory, clock, tmp_path)
    second, claim = world["second"], world["claim"]
    resume = claim["resume"]
    assert resume["sealed"] is True and resume["at"] == LOST_AFTER
    token = claim["lease_token"]
    url = f"/api/v1/jobs/{world['job_id']}/resume-grant"

    # Before the grant the lease waits (no refusal), and the provider cannot open a file.
    waiting = second.request("GET", f"/api/v1/worker/leases/{token}/resume-grant")
    assert waiting.status_code == 200 and waiting.json()["grants"] is None
    files = _download_resume(second, claim, tmp_path / "ciphertexts")
    me = worker_private_key(second.key)
    with pytest.raises(SealingError, match="not sealed to this key"):
        open_file(files["pot/000002.weights"], tmp_path / "w", private_key=me)
    # Nor can anyone holding only what the API stores: there is no key in it to open with.
    for name in ("pot/000002.weights", "pot/000002.optim", "pot/000002.rng.json"):
        assert name in files and files[name].read_bytes().startswith(b"proofnet-sealed/v2")

    pending = client.get(url, headers=world["headers"]).json()
    assert pending["provider_worker_key"] == second.public_key
    assert [f["name"] for f in pending["files"]] == [
        "pot/000002.weights",
        "pot/000002.optim",
        "pot/000002.rng.json",
    ]
    # The submitter's CLI (`proofnet job grant-resume`): from the headers alone.
    posted = world["cli"].grant_resume(world["job_id"], world["sealing_key"])
    got = second.request("GET", f"/api/v1/worker/leases/{token}/resume-grant").json()["grants"]
    assert got == posted["grants"] and set(got) == {f["name"] for f in pending["files"]}
    assert client.get(url, headers=world["headers"]).json()["granted"] is True

    dest = tmp_path / "resume"
    files = _download_resume(second, claim, dest)
    sealed = {n: p for n, p in files.items() if n != "pot/prefix.json"}
    opened = open_checkpoint(sealed, dest, got, me)
    check_against_leaf(
        files["pot/prefix.json"],
        resume["prefix_root"],
        resume["at"],
        opened,
        dest / "000002.rng.json",
    )
    assert (dest / "000002.weights").read_bytes() == (
        world["pot_dir"] / "000002.weights"
    ).read_bytes()


def test_a_resume_grant_for_another_provider_or_job_is_refused(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    from proofnet.messages.envelope import (
        new_secret,
        worker_private_key,
        worker_recipient,
        wrap_key,
    )
    from worker.sealed_resume import SealedResumeError, open_checkpoint

    world = _sealed_world(client, approved, worker_factory, clock, tmp_path)
    second, other, claim = world["second"], world["other"], world["claim"]
    url = f"/api/v1/jobs/{world['job_id']}/resume-grant"
    # Wrapped for another provider than the lease's: refused by the API.
    for_other = _grants_for(client, world, other.public_key, tmp_path / "a")
    refused = client.post(url, json={"grants": for_other}, headers=world["headers"])
    assert refused.status_code == 400 and "another key" in refused.text
    # Not exactly the checkpoint's files: refused.
    honest = _grants_for(client, world, second.public_key, tmp_path / "b")
    partial = dict(list(honest.items())[:2])
    assert client.post(url, json={"grants": partial}, headers=world["headers"]).status_code == 400
    # Someone else's job (or one with no resuming lease): not found.
    assert (
        client.post(
            "/api/v1/jobs/" + "f" * 64 + "/resume-grant",
            json={"grants": honest},
            headers=world["headers"],
        ).status_code
        == 404
    )
    # Keys of another job's files, wrapped for the right provider: the API cannot tell, the
    # provider's open refuses them (each header's key commitment).
    to = worker_recipient(second.public_key)
    foreign = {name: wrap_key(new_secret(), to).to_json() for name in honest}
    assert client.post(url, json={"grants": foreign}, headers=world["headers"]).status_code == 200
    grants = second.request(
        "GET", f"/api/v1/worker/leases/{claim['lease_token']}/resume-grant"
    ).json()["grants"]
    files = _download_resume(second, claim, tmp_path / "c")
    sealed = {n: p for n, p in files.items() if n != "pot/prefix.json"}
    with pytest.raises(SealedResumeError, match="does not open"):
        open_checkpoint(sealed, tmp_path / "c", grants, worker_private_key(second.key))
    # A grant posted is not rewritten by another.
    again = client.post(url, json={"grants": honest}, headers=world["headers"])
    assert again.status_code == 409


def test_a_forged_sealed_checkpoint_under_a_valid_grant_is_caught_by_the_leaf_check(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    """The lost provider sealed other weights than its prefix commits: the API cannot see it
    (the files are sealed) and hands the checkpoint out; the submitter's grant opens it; the
    resuming worker's leaf check refuses to train on it."""
    from proofnet.messages.envelope import worker_private_key
    from worker.sealed_resume import SealedResumeError, check_against_leaf, open_checkpoint

    world = _sealed_world(client, approved, worker_factory, clock, tmp_path, forge=True)
    second, claim = world["second"], world["claim"]
    resume = claim["resume"]
    assert resume["sealed"] is True and resume["at"] == LOST_AFTER
    grants = _grants_for(client, world, second.public_key, tmp_path / "s")
    url = f"/api/v1/jobs/{world['job_id']}/resume-grant"
    assert client.post(url, json={"grants": grants}, headers=world["headers"]).status_code == 200
    dest = tmp_path / "resume"
    files = _download_resume(second, claim, dest)
    sealed = {n: p for n, p in files.items() if n != "pot/prefix.json"}
    opened = open_checkpoint(sealed, dest, grants, worker_private_key(second.key))
    with pytest.raises(SealedResumeError, match="forged checkpoint"):
        check_against_leaf(
            files["pot/prefix.json"],
            resume["prefix_root"],
            resume["at"],
            opened,
            dest / "000002.rng.json",
        )


def test_a_sealed_checkpoint_its_resumer_lost_without_a_prefix_is_stepped_back_from(
    client: TestClient,
    approved: tuple[Any, dict[str, str]],
    worker_factory: Callable[[], Worker],
    clock: FakeClock,
    store: LocalBlobStore,
    tmp_path: Path,
) -> None:
    """The resuming worker found the sealed checkpoint forged (or got no grant) and gave the
    job up without committing anything: the next provider resumes from the checkpoint
    before it, so a forged sealed checkpoint cannot keep the job failing."""
    world = _sealed_world(client, approved, worker_factory, clock, tmp_path, forge=True)
    second, other = world["second"], world["other"]
    token = world["claim"]["lease_token"]
    assert world["claim"]["resume"]["at"] == LOST_AFTER
    failed = second.request(
        "POST",
        f"/api/v1/worker/leases/{token}/fail",
        {"reason": "the sealed checkpoint to resume from: a forged checkpoint"},
    )
    assert failed.status_code == 200, failed.text
    again = other.claim().json()["resume"]
    assert again["from_attempt"] == 1 and again["at"] == LOST_AFTER - 1 and again["sealed"]
