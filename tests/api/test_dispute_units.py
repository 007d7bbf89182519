"""Dispute units through the API (api/services/disputes.py): an oracle posts a signed
dispute of a stage's segment after two verifiers' tasks; the disputed provider lists it,
reads the very files the verifiers got, commits to its sandbox replay and reveals it; the
oracle reads both back. The attacks: a dispute arbitrating tasks the oracle never posted or
signed by a key the API does not list; a verifier (or anyone but the provider) reading the
files or answering; a reveal before the commitment, one that opens nothing, or a second
answer that differs from the first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from api_support import FakeClock, Wallet
from fastapi.testclient import TestClient
from nacl.signing import SigningKey
from test_verification_units import GPU, ORACLE, _stage_with_proof, _task
from unit_support import UnitWorker

from api.config import ApiConfig
from api.storage import LocalBlobStore
from oracle.inputs.feed import FeedError
from oracle.intake.feed_client import HttpApiFeed
from oracle.verification.referee import read_answer
from proofnet.messages.dispute import (
    DisputeAnswer,
    DisputeCommitment,
    DisputeReveal,
    DisputeTask,
    commitment_of,
    new_salt,
)

Approved = tuple[Wallet, dict[str, str]]


@pytest.fixture
def config(make_config: Callable[..., ApiConfig]) -> ApiConfig:
    return make_config(oracle_keys=(bytes(ORACLE.verify_key).hex(),))


@pytest.fixture
def feed(client: TestClient, tmp_path: Path) -> HttpApiFeed:
    client.app.state.blob_store = LocalBlobStore(tmp_path / "blobs")  # type: ignore[attr-defined]
    return HttpApiFeed("", ORACLE, "devnet", client=client, ttl_s=0)


@pytest.fixture
def workers(worker_factory: Callable[[], object]) -> Callable[[], UnitWorker]:
    from unit_support import unit_workers

    return unit_workers(worker_factory, GPU)  # type: ignore[arg-type]


ANSWER = DisputeAnswer.model_validate(
    {
        "status": "passed",
        "initial_weights_hash": "1" * 64,
        "results": [
            {"segment": 1, "weights_hash": "2" * 64, "update_norm": "0.5", "distance": "0"}
        ],
    }
)


def test_a_provider_answers_its_dispute_in_order_and_alone(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    feed: HttpApiFeed,
    clock: FakeClock,
) -> None:
    job_id, provider, nonce, files = _stage_with_proof(client, approved, workers)
    first, second = workers(), workers()
    for v in (first, second):
        v.worker.request("GET", "/api/v1/worker/verifications")  # online as verifiers
    tasks = [_task(job_id, nonce, provider, v.worker.public_key) for v in (first, second)]
    for t in tasks:
        feed.post_verification(t)
    fields = {
        "job_id": job_id,
        "nonce": nonce,
        "unit": 0,
        "attestation": "a" * 64,
        "pot_root": "b" * 64,
        "provider": provider.worker.public_key,
        "segments": [1],
        "files": list(tasks[0].files),
    }
    # A dispute of tasks this oracle never posted, or signed by a key that is no oracle's.
    unknown = DisputeTask.sign(ORACLE, **fields, verifier_tasks=["e" * 64, "f" * 64])
    with pytest.raises(FeedError, match="did not post"):
        feed.post_dispute(unknown)
    stranger = HttpApiFeed("", SigningKey.generate(), "devnet", client=client, ttl_s=0)
    forged = DisputeTask.sign(
        SigningKey.generate(), **fields, verifier_tasks=[t.digest for t in tasks]
    )
    with pytest.raises(FeedError):
        stranger.post_dispute(forged)

    dispute = DisputeTask.sign(ORACLE, **fields, verifier_tasks=[t.digest for t in tasks])
    state = feed.post_dispute(dispute)
    assert state["commitment"] is None and feed.post_dispute(dispute)["id"] == state["id"]

    pending = provider.worker.request("GET", "/api/v1/worker/disputes").json()
    assert len(pending) == 1 and pending[0]["task"] == dispute.to_json()
    unit = pending[0]["id"]
    name = "units/0/pot/000000.weights"
    path = f"/api/v1/worker/disputes/{unit}/files/{name}"
    got = provider.worker.request("GET", path)
    assert got.status_code == 200 and got.content == files["pot/000000.weights"]
    # The verifiers (or anyone else) neither list it, read its files, nor answer for it.
    assert first.worker.request("GET", "/api/v1/worker/disputes").json() == []
    assert first.worker.request("GET", path).status_code == 404

    salt = new_salt()
    commitment = DisputeCommitment.sign(
        provider.worker.key, dispute, commitment_of(ANSWER, salt, dispute)
    )
    reveal = DisputeReveal.sign(provider.worker.key, dispute, ANSWER, salt)
    commit_path = f"/api/v1/worker/disputes/{unit}/commitment"
    reveal_path = f"/api/v1/worker/disputes/{unit}/reveal"
    assert (
        first.worker.request("POST", commit_path, {"answer": commitment.to_json()}).status_code
        == 404
    )
    # No reveal before the commitment.
    early = provider.worker.request("POST", reveal_path, {"answer": reveal.to_json()})
    assert early.status_code == 409, early.text
    # A commitment signed by another key than the provider's.
    other = DisputeCommitment.sign(SigningKey.generate(), dispute, "0" * 64)
    assert (
        provider.worker.request("POST", commit_path, {"answer": other.to_json()}).status_code == 400
    )
    done = provider.worker.request("POST", commit_path, {"answer": commitment.to_json()})
    assert done.status_code == 200, done.text
    # Committed once: another commitment is refused, the same is the same.
    again = DisputeCommitment.sign(provider.worker.key, dispute, "1" * 64)
    assert (
        provider.worker.request("POST", commit_path, {"answer": again.to_json()}).status_code == 409
    )
    # A reveal that does not open the commitment (another salt).
    wrong = DisputeReveal.sign(provider.worker.key, dispute, ANSWER, new_salt())
    assert (
        provider.worker.request("POST", reveal_path, {"answer": wrong.to_json()}).status_code == 400
    )
    opened = provider.worker.request("POST", reveal_path, {"answer": reveal.to_json()})
    assert opened.status_code == 200, opened.text

    state = feed.post_dispute(dispute)
    assert read_answer(dispute, state) == ANSWER
    assert provider.worker.request("GET", "/api/v1/worker/disputes").json() == []
