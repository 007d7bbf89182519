"""Verification units through the API (api/services/verifications.py): an oracle lists
candidates and posts a signed task, the drawn verifier lists it with the files it names
and reports; a relay stage's proof files are named `units/<index>/...` on the wire and
found under its lease's own names. The attacks: a task signed by a key the API does not
list as an oracle, naming a verifier that is not registered, or a file the lease never
uploaded; another worker reading the task's files; a report signed by another key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from api_support import FakeClock, Wallet, Worker
from fastapi.testclient import TestClient
from nacl.signing import SigningKey
from sqlalchemy import Engine
from sqlmodel import select
from unit_support import (
    CHECKPOINT,
    UnitWorker,
    chain,
    evaluation,
    relay_spec,
    sha,
    submit,
    unit_workers,
)

from api.config import ApiConfig
from api.db import open_session
from api.models import Provider, ProviderGpu
from api.storage import LocalBlobStore
from oracle.inputs.feed import FeedError
from oracle.intake.feed_client import HttpApiFeed
from proofnet.messages.verification import VerificationReport, VerificationTask

ORACLE = SigningKey.generate()
NETWORK = "devnet"
GPU = ("NVIDIA L4", 24576)

Approved = tuple[Wallet, dict[str, str]]


@pytest.fixture
def config(make_config: Callable[..., ApiConfig]) -> ApiConfig:
    return make_config(oracle_keys=(bytes(ORACLE.verify_key).hex(),))


@pytest.fixture
def feed(client: TestClient, tmp_path: Path) -> HttpApiFeed:
    client.app.state.blob_store = LocalBlobStore(tmp_path / "blobs")  # type: ignore[attr-defined]
    return HttpApiFeed("", ORACLE, NETWORK, client=client, ttl_s=0)


@pytest.fixture
def workers(worker_factory: Callable[[], Worker]) -> Callable[[], UnitWorker]:
    return unit_workers(worker_factory, GPU)


def _stage_with_proof(
    client: TestClient, approved: Approved, workers: Callable[[], UnitWorker]
) -> tuple[str, UnitWorker, str, dict[str, bytes]]:
    """Stage 0 of a relay, run with its proof files uploaded: (job id, provider, nonce,
    proof files by the stage lease's names)."""
    _, auth = approved
    spec = relay_spec(chain(2))
    spec["results"].append({"path": "pot/**", "kind": "model"})
    job_id = submit(client, auth, spec)
    provider = workers()
    claim = provider.claim()
    token = claim["lease_token"]
    files = {"pot/manifest.json": b'{"leaves": []}', "pot/000000.weights": b"w0"}
    for name, data in files.items():
        assert provider.upload(token, name, data).status_code == 200
    provider.finish_stage(claim, b"checkpoint after stage 0")
    return job_id, provider, claim["nonce"], files


def _task(
    job_id: str,
    nonce: str,
    holder: UnitWorker,
    verifier: str,
    key: SigningKey = ORACLE,
    **kw: Any,
) -> VerificationTask:
    fields: dict[str, Any] = {
        "job_id": job_id,
        "nonce": nonce,
        "unit": 0,
        "attestation": "a" * 64,
        "pot_root": "b" * 64,
        "provider": holder.worker.public_key,
        "verifier": verifier,
        "device_class": GPU[0],
        "segments": [1],
        "files": ["units/0/pot/manifest.json", "units/0/pot/000000.weights"],
        "draw_signature": "c" * 128,
    }
    return VerificationTask.sign(key, **(fields | kw))


def test_a_stage_task_reaches_its_verifier_with_the_stages_files(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    feed: HttpApiFeed,
    clock: FakeClock,
) -> None:
    job_id, provider, nonce, files = _stage_with_proof(client, approved, workers)
    verifier = workers()
    # Registered and online, but not asking for tasks (not verifying): never drawn.
    assert feed.verifier_candidates(GPU[0], provider.worker.public_key) == []
    assert verifier.worker.request("GET", "/api/v1/worker/verifications").json() == []
    candidates = feed.verifier_candidates(GPU[0], provider.worker.public_key)
    assert [c.worker_key for c in candidates] == [verifier.worker.public_key]
    assert feed.verifier_candidates("NVIDIA H100", provider.worker.public_key) == []

    task = _task(job_id, nonce, provider, verifier.worker.public_key)
    state = feed.post_verification(task)
    assert state["report"] is None and feed.post_verification(task)["id"] == state["id"]

    pending = verifier.worker.request("GET", "/api/v1/worker/verifications").json()
    assert len(pending) == 1 and pending[0]["task"] == task.to_json()
    assert [f["name"] for f in pending[0]["files"]] == list(task.files)
    name = "units/0/pot/000000.weights"
    path = f"/api/v1/worker/verifications/{pending[0]['id']}/files/{name}"
    got = verifier.worker.request("GET", path)
    assert got.status_code == 200 and got.content == files["pot/000000.weights"]
    # Nobody else reads the task's files (the provider, here), nor lists the task.
    assert provider.worker.request("GET", path).status_code == 404
    assert provider.worker.request("GET", "/api/v1/worker/verifications").json() == []

    # A report signed by another key than the drawn verifier's is refused; its own is kept.
    report_path = f"/api/v1/worker/verifications/{pending[0]['id']}/report"
    forged = VerificationReport.sign(SigningKey.generate(), task, status="passed")
    body = {"report": {**forged.to_json(), "verifier": verifier.worker.public_key}}
    assert verifier.worker.request("POST", report_path, body).status_code == 400
    own = VerificationReport.sign(verifier.worker.key, task, status="failed", message="[1]")
    answered = verifier.worker.request("POST", report_path, {"report": own.to_json()})
    assert answered.status_code == 200, answered.text
    assert feed.post_verification(task)["report"] == own.to_json()
    assert verifier.worker.request("GET", "/api/v1/worker/verifications").json() == []


def test_a_gpu_model_the_apis_checks_failed_does_not_make_its_worker_a_verifier_of_it(
    workers: Callable[[], UnitWorker], feed: HttpApiFeed, engine: Engine
) -> None:
    """A worker registers the GPU model a job's proof was made on, but its check of that
    GPU failed (a spoofed model): it asks for verification tasks and is never drawn to
    replay that model's proofs, as it is never leased one; an honest twin is."""
    provider, spoofer, honest = workers(), workers(), workers()
    with open_session(engine) as session:
        row = session.exec(
            select(Provider).where(Provider.worker_key == spoofer.worker.public_key)
        ).one()
        for gpu in session.exec(select(ProviderGpu).where(ProviderGpu.provider_id == row.id)):
            gpu.check_status, gpu.check_reason = "failed", "too slow for an NVIDIA L4"
            session.add(gpu)
        session.commit()
    for verifier in (spoofer, honest):
        assert verifier.worker.request("GET", "/api/v1/worker/verifications").json() == []
    drawn = feed.verifier_candidates(GPU[0], provider.worker.public_key)
    assert [c.worker_key for c in drawn] == [honest.worker.public_key]


def test_the_api_refuses_tasks_it_cannot_stand_behind(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    feed: HttpApiFeed,
) -> None:
    job_id, provider, nonce, _ = _stage_with_proof(client, approved, workers)
    verifier = workers()
    key = verifier.worker.public_key
    # Signed by a key the API does not list as an oracle.
    stranger = HttpApiFeed("", SigningKey.generate(), NETWORK, client=feed.client, ttl_s=0)
    with pytest.raises(FeedError, match="403"):
        stranger.post_verification(_task(job_id, nonce, provider, key))
    # A verifier nobody registered; a file the lease never uploaded; another provider.
    for task in (
        _task(job_id, nonce, provider, "d" * 64),
        _task(job_id, nonce, provider, key, files=["units/0/pot/000009.weights"]),
        _task(job_id, nonce, provider, key, provider="e" * 64),
    ):
        with pytest.raises(FeedError, match="400"):
            feed.post_verification(task)


def test_an_evaluations_recomputation_reaches_its_verifier_with_the_evaluated_checkpoint(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    feed: HttpApiFeed,
) -> None:
    """A recomputation task (kind "eval") names the input unit's completed checkpoint, not
    the evaluating lease's uploads: the API serves that one to the drawn verifier, and
    refuses a task whose file is not the input checkpoint it names (an oracle, or whoever
    relays, pointing the verifier at other bytes)."""
    _, auth = approved
    job_id = submit(client, auth, relay_spec(chain(1), evaluation=evaluation(every=1)))
    trainer = workers()
    trainer.finish_stage(trainer.claim(), b"checkpoint after stage 0")
    evaluator = workers()
    claim = evaluator.claim()
    assert claim["unit"]["kind"] == "eval"
    done = evaluator.complete(claim["lease_token"], claim["unit"]["index"], metrics={"loss": "0.2"})
    assert done.status_code == 200, done.text
    verifier = workers()
    assert verifier.worker.request("GET", "/api/v1/worker/verifications").json() == []
    name = f"units/0/checkpoint/{CHECKPOINT}"
    fields: dict[str, Any] = {
        "kind": "eval",
        "unit": claim["unit"]["index"],
        "segments": [],
        "files": [name],
        "inputs": [sha(b"checkpoint after stage 0")],
    }
    key = verifier.worker.public_key
    with pytest.raises(FeedError, match="400"):
        feed.post_verification(
            _task(job_id, claim["nonce"], evaluator, key, **(fields | {"inputs": ["f" * 64]}))
        )
    task = _task(job_id, claim["nonce"], evaluator, key, **fields)
    assert feed.post_verification(task)["report"] is None
    (pending,) = verifier.worker.request("GET", "/api/v1/worker/verifications").json()
    assert [f["name"] for f in pending["files"]] == [name]
    got = verifier.worker.request(
        "GET", f"/api/v1/worker/verifications/{pending['id']}/files/{name}"
    )
    assert got.status_code == 200 and got.content == b"checkpoint after stage 0"
    answer = VerificationReport.sign(verifier.worker.key, task, status="passed", metric="0.2")
    report_path = f"/api/v1/worker/verifications/{pending['id']}/report"
    posted = verifier.worker.request("POST", report_path, {"report": answer.to_json()})
    assert posted.status_code == 200, posted.text
    assert feed.post_verification(task)["report"] == answer.to_json()
