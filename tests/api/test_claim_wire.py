"""The claim and lease answers keep their wire bytes: field names, order, nulls and datetime
format are what workers already in the field parse (captured before the claim message moved
to proofnet/messages/claim.py). Values that differ per run are replaced by placeholders."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from api_support import FakeClock, Wallet, Worker, job_spec
from fastapi.testclient import TestClient
from sqlmodel import Session, select
from unit_support import UnitWorker, chain, multi_node_spec, relay_spec, submit, unit_workers

from api.client_cli import JobClient
from api.models import Job, JobEscrow
from proofnet.messages.claim import Claim, LeaseAnswer
from proofnet.messages.sealing import generate_sealing_key

Approved = tuple[Wallet, dict[str, str]]
FIXED_NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


@pytest.fixture
def workers(worker_factory: Callable[[], Worker]) -> Callable[[], UnitWorker]:
    return unit_workers(worker_factory, ("NVIDIA H100", 81920))


def _normalised(raw: str, spec: dict[str, Any] | None, **dynamic: str) -> str:
    """`raw` with the per-run values swapped for <name>; the spec must be sent compact."""
    if spec is not None:
        compact = json.dumps(spec, separators=(",", ":"), ensure_ascii=False)
        assert compact in raw
        raw = raw.replace(compact, "<spec>")
    for name, value in dynamic.items():
        raw = raw.replace(json.dumps(value), f'"<{name}>"')
    return raw


def _claim_placeholders(body: dict[str, Any]) -> dict[str, str]:
    return {"job_id": body["job_id"], "lease_token": body["lease_token"], "nonce": body["nonce"]}


def test_single_job_claim_with_escrow_and_sealing_keeps_its_bytes(
    client: TestClient,
    approved: Approved,
    worker_factory: Callable[[], Worker],
    session: Session,
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    clock.now = FIXED_NOW
    wallet, auth = approved
    cli = JobClient(
        "http://testserver", wallet.signing_key, http=client, token_cache=tmp_path / "session"
    )
    cli.register_sealing_key(generate_sealing_key(tmp_path / "sealing.key"))
    spec = job_spec(gpus=0)
    job_id = cli.submit(spec)["job_id"]
    job = session.exec(select(Job).where(Job.job_id == job_id)).one()
    assert job.id is not None
    tx_id = hashlib.sha256(job_id.encode()).hexdigest()
    session.add(
        JobEscrow(
            job_id=job.id,
            tx_id=tx_id,
            output_index=2,
            budget=1_000_000,
            deadline_ms=2**40,
            recorded_at=clock(),
        )
    )
    session.commit()
    worker = worker_factory()
    worker.register([])
    answer = worker.claim()
    assert answer.status_code == 200, answer.text
    body = answer.json()
    sealing = body["sealing"]
    text = _normalised(
        answer.text,
        body["spec"],
        tx_id=tx_id,
        script_hash=body["escrow"]["script_hash"],
        public_key=sealing["public_key"],
        signature=sealing["signature"],
        cose_key=sealing["cose_key"],
        **_claim_placeholders(body),
    )
    assert text == (
        '{"job_id":"<job_id>","spec":<spec>,"lease_token":"<lease_token>","nonce":"<nonce>",'
        '"attempt":1,"expires_at":"2026-03-04T05:08:07Z","lease_ttl_s":120,'
        '"escrow":{"network":"devnet","script_hash":"<script_hash>","tx_id":"<tx_id>",'
        '"index":2},"sealing":{"public_key":"<public_key>","signature":"<signature>",'
        '"cose_key":"<cose_key>"},"unit":null,"resume":null}'
    )
    Claim.model_validate_json(answer.text)


def test_relay_stage_claim_keeps_its_bytes(
    client: TestClient, approved: Approved, workers: Callable[[], UnitWorker], clock: FakeClock
) -> None:
    clock.now = FIXED_NOW
    _, auth = approved
    spec = relay_spec(chain(2))
    submit(client, auth, spec)
    first = workers()
    c0 = first.claim()
    first.finish_stage(c0, b"stage zero weights")
    second = workers()
    answer = second.worker.claim()
    assert answer.status_code == 200, answer.text
    body = answer.json()
    text = _normalised(answer.text, body["spec"], **_claim_placeholders(body))
    assert text == (
        '{"job_id":"<job_id>","spec":<spec>,"lease_token":"<lease_token>","nonce":"<nonce>",'
        '"attempt":1,"expires_at":"2026-03-04T05:08:07Z","lease_ttl_s":120,"escrow":null,'
        '"sealing":null,"unit":{"index":1,"kind":"stage","inputs":[{"unit":0,'
        f'"sha256":"{hashlib.sha256(b"stage zero weights").hexdigest()}","size":18}}],'
        '"shards":[1],"amount":100,"evaluates":null,"rank":null,"cluster":null},"resume":null}'
    )
    Claim.model_validate_json(answer.text)


def test_cluster_node_claim_and_heartbeat_keep_their_bytes(
    client: TestClient, approved: Approved, workers: Callable[[], UnitWorker], clock: FakeClock
) -> None:
    clock.now = FIXED_NOW
    _, auth = approved
    spec = multi_node_spec(2)
    job_id = submit(client, auth, spec)
    node = workers()
    answer = node.worker.claim()
    assert answer.status_code == 200, answer.text
    body = answer.json()
    text = _normalised(answer.text, body["spec"], **_claim_placeholders(body))
    assert text == (
        '{"job_id":"<job_id>","spec":<spec>,"lease_token":"<lease_token>","nonce":"<nonce>",'
        '"attempt":1,"expires_at":"2026-03-04T05:08:07Z","lease_ttl_s":120,"escrow":null,'
        '"sealing":null,"unit":{"index":0,"kind":"node","inputs":[],"shards":[],'
        '"amount":50,"evaluates":null,"rank":0,"cluster":{"state":"waiting","world_size":2,'
        f'"rank":0,"endpoint":null,"rdzv_id":"{job_id}-1"}}}},"resume":null}}'
    )
    Claim.model_validate_json(answer.text)
    beat = node.heartbeat(body["lease_token"], rendezvous="10.1.2.3:29500")
    assert beat.status_code == 200, beat.text
    assert _normalised(beat.text, None, job_id=job_id) == (
        '{"job_id":"<job_id>","status":"running","expires_at":"2026-03-04T05:08:07Z",'
        '"outcome":null,"cluster":{"state":"waiting","world_size":2,"rank":0,'
        f'"endpoint":"10.1.2.3:29500","rdzv_id":"{job_id}-1"}},"stop":null}}'
    )
    LeaseAnswer.model_validate_json(beat.text)
