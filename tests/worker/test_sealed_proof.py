"""Sealed means sealed: a sealed job's proof files (full weights every k steps) reach the API
as ciphertexts; the manifest stays readable for the oracles; a verifier an oracle draws gets
the keys of the files it must replay, from the provider, through an API host that can read
neither the files nor the keys.

Attacks, each with its honest twin: the API host making up a key request, a request that
names the provider as its own verifier, a stranger reading a grant, a provider granting a
wrong key, an oracle trying to open a grant meant for the verifier.
"""

from __future__ import annotations

import hashlib
import io
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from agent_fixtures import (  # noqa: F401  (fixtures)
    NETWORK,
    AgentHarness,
    ApiServer,
    FixtureRepo,
    RecordingOracle,
    _oracle_app,
    job_path,
    job_spec,
    make_api_server,
    model_repo,
    register_worker,
    script_hash,
)
from nacl.public import PrivateKey
from nacl.signing import SigningKey
from sqlmodel import select
from test_sealing_check import (
    escrow_datum,
    escrow_ref_of,
    put_escrow,
    sealed_submitter,
    submit,
)

from api.db import open_session
from api.models import JobResult, Lease, ProofKeyRequest, Provider
from api.storage import LocalBlobStore
from chain.devnet.testing import serve_app
from oracle.inputs.chain import StaticChainView
from oracle.inputs.feed import FeedError
from oracle.intake.escrow_info import escrow_info_router
from oracle.intake.feed_client import HttpApiFeed
from pot.manifest import Manifest
from proofnet.messages.envelope import (
    SealingError,
    Stanza,
    open_stream,
    sealed_version,
    worker_private_key,
    wrap_key,
)
from proofnet.messages.key_grant import KeyRequest
from worker.api_client import ApiClient, ApiRefused
from worker.key_grants import GrantResponder, answer_key_requests, open_granted
from worker.runtime.process_runtime import ProcessRuntime

ORACLE = SigningKey.generate()
ORACLE_KEY = bytes(ORACLE.verify_key).hex()


@pytest.fixture
def api_server(tmp_path: Path) -> Iterator[ApiServer]:
    yield from make_api_server(tmp_path, oracle_keys=(ORACLE_KEY,))


@pytest.fixture
def chain() -> StaticChainView:
    return StaticChainView()


@pytest.fixture
def oracle(api_server: ApiServer, chain: StaticChainView) -> Iterator[RecordingOracle]:
    recorder = RecordingOracle(escrows=api_server.escrows)
    app = _oracle_app(recorder)
    app.include_router(escrow_info_router(chain, script_hash()))
    with serve_app(app) as url:
        recorder.url = url
        yield recorder


@pytest.fixture
def harness(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,
    model_repo: FixtureRepo,  # noqa: F811
    job_path: None,  # noqa: F811
) -> Iterator[AgentHarness]:
    h = AgentHarness(
        tmp_path,
        api_server,
        oracle,
        model_repo,
        ProcessRuntime(),
        trusted_oracle_keys=(ORACLE_KEY,),
        key_request_poll_s=0.05,
    )
    yield h
    h.close()


def _sealed_job(
    api: ApiServer, chain: StaticChainView, harness: AgentHarness, repo: FixtureRepo
) -> tuple[str, dict[str, str], bytes, str]:
    """A sealed job run to its attestation: (job id, auth, submitter's key, lease nonce)."""
    submitter, auth, sealing_key = sealed_submitter(api)
    job_id = submit(api, auth, job_spec(repo, steps=20))
    put_escrow(chain, escrow_ref_of(api, job_id), escrow_datum(job_id, submitter))
    outcome = harness.agent.run(once=True).outcomes[0]
    assert (outcome.status, outcome.reason) == ("attested", "delivered")
    with open_session(api.engine) as session:
        nonce = session.exec(select(Lease.nonce)).one()
    return job_id, auth, sealing_key, nonce


def _uploads(api: ApiServer, auth: dict[str, str], job_id: str) -> list[dict[str, str]]:
    api.release(job_id)  # the submitter reads them only with the oracle's verdict
    listed = api.http.get(f"/api/v1/jobs/{job_id}/results", headers=auth)
    assert listed.status_code == 200, listed.text
    return list(listed.json())


def test_proof_files_are_sealed_to_the_submitter_and_the_manifest_is_not(
    api_server: ApiServer,
    chain: StaticChainView,
    harness: AgentHarness,
    model_repo: FixtureRepo,  # noqa: F811
    tmp_path: Path,
) -> None:
    job_id, auth, sealing_key, _ = _sealed_job(api_server, chain, harness, model_repo)
    uploads = _uploads(api_server, auth, job_id)
    store = LocalBlobStore(tmp_path / "blobs")
    proof = {u["name"]: u["sha256"] for u in uploads if u["name"].startswith("pot/")}
    assert "pot/manifest.json" in proof and len(proof) > 4
    manifest = Manifest.from_bytes(store.read_bytes(proof.pop("pot/manifest.json")))
    weights = {f"pot/{i:06d}.weights": leaf.weights for i, leaf in enumerate(manifest.leaves)}
    assert set(weights) <= set(proof)
    # Commitments stay readable: the committed prefix (what a resume picks its checkpoint
    # by) and the signed claims (hashes only: what pays a lost attempt).
    clear = {n for n in proof if n == "pot/prefix.json" or n.startswith("pot/claim-")}
    for name in clear:
        assert sealed_version(store.read_bytes(proof.pop(name))) is None, name
    for name, stored in proof.items():
        blob = store.read_bytes(stored)
        # What the API host holds: an envelope it has no key for.
        assert sealed_version(blob) == 2, name
        with pytest.raises(SealingError, match="not sealed to this key"):
            open_stream(io.BytesIO(blob), io.BytesIO(), private_key=bytes(PrivateKey.generate()))
        # The submitter opens it, and a weights file is what the manifest committed to.
        plain = io.BytesIO()
        opened = open_stream(io.BytesIO(blob), plain, private_key=sealing_key, name=name)
        assert hashlib.sha256(plain.getvalue()).hexdigest() == opened.sha256
        if name in weights:
            assert opened.sha256 == weights[name] != stored
    # The provider kept only the lease's 32-byte secret, not the files.
    assert [p.stat().st_size for p in harness.config.seal_keys_dir.iterdir()] == [32]


def test_a_drawn_verifier_gets_the_keys_and_no_one_else_does(
    api_server: ApiServer,
    chain: StaticChainView,
    harness: AgentHarness,
    model_repo: FixtureRepo,  # noqa: F811
    tmp_path: Path,
) -> None:
    job_id, auth, _, nonce = _sealed_job(api_server, chain, harness, model_repo)
    provider = harness.worker.key.public_key_hex
    verifier = register_worker(api_server, tmp_path / "verifier.skey")
    files = ("pot/000001.weights", "pot/000001.optim")
    feed = HttpApiFeed(api_server.url, ORACLE, NETWORK)
    api = harness.agent.api
    try:
        # The oracle may not name the provider as its own verifier, nor files it never sent.
        for recipient, names in ((provider, files), (verifier.key.public_key_hex, ("pot/x",))):
            bad = KeyRequest.sign(
                ORACLE, job_id=job_id, nonce=nonce, recipient=recipient, files=names
            )
            with pytest.raises(FeedError, match="400"):
                feed.request_keys(bad)
        request = KeyRequest.sign(
            ORACLE, job_id=job_id, nonce=nonce, recipient=verifier.key.public_key_hex, files=files
        )
        request_id = feed.request_keys(request)
        assert feed.request_keys(request) == request_id  # the same request is one request

        # The API host makes up a request of its own (it holds no oracle key).
        host = SigningKey.generate()
        forged = KeyRequest.sign(
            host, job_id=job_id, nonce=nonce, recipient=verifier.key.public_key_hex, files=files[:1]
        )
        with open_session(api_server.engine) as session:
            real = session.get(ProofKeyRequest, request_id)
            assert real is not None
            session.add(
                ProofKeyRequest(
                    digest=forged.digest,
                    job_id=real.job_id,
                    lease_id=real.lease_id,
                    provider_id=real.provider_id,
                    recipient_key=forged.recipient,
                    request=forged.to_json(),
                    created_at=datetime.now(UTC),
                )
            )
            session.commit()

        report = answer_key_requests(api, harness.agent.seal_keys, {ORACLE_KEY}, provider)
        assert report.granted == 1
        assert len(report.ignored) == 1 and "not a trusted oracle" in report.ignored[0]
        with open_session(api_server.engine) as session:
            rows = {r.digest: r for r in session.exec(select(ProofKeyRequest)).all()}
        assert rows[forged.digest].grants is None and rows[request.digest].grants is not None

        # The verifier opens exactly the files it was granted, checked against the manifest.
        with ApiClient(api_server.url, verifier.key, NETWORK) as as_verifier:
            opened = open_granted(
                as_verifier, request_id, tmp_path / "replay", verifier.key.signing_key
            )
        assert [o.name for o in opened] == list(files)
        store = LocalBlobStore(tmp_path / "blobs")
        uploads = _uploads(api_server, auth, job_id)
        manifest_hash = next(u["sha256"] for u in uploads if u["name"] == "pot/manifest.json")
        manifest = Manifest.from_bytes(store.read_bytes(manifest_hash))
        assert opened[0].sha256 == manifest.leaves[1].weights
        assert (tmp_path / "replay" / "pot" / "000001.weights").is_file()

        # A stranger (the provider itself, here) reads neither the grant nor the files.
        with pytest.raises(ApiRefused, match="404"):
            api.key_grant(request_id)
        with pytest.raises(ApiRefused, match="404"):
            api.download_granted(request_id, files[0], tmp_path / "x", "0" * 64)
        # The oracle that asked cannot unwrap what was granted: wrapped for the verifier.
        grant = ApiClient(api_server.url, verifier.key, NETWORK)
        try:
            body = grant.key_grant(request_id)
        finally:
            grant.close()
        blob = store.read_bytes(next(u["sha256"] for u in uploads if u["name"] == files[0]))
        stanza = Stanza.from_json(body["grants"][files[0]])
        with pytest.raises(SealingError):
            open_stream(
                io.BytesIO(blob),
                io.BytesIO(),
                private_key=worker_private_key(ORACLE),
                grants=[stanza],
            )
    finally:
        feed.close()


def test_a_wrong_key_from_the_provider_is_caught_by_the_verifier(
    api_server: ApiServer,
    chain: StaticChainView,
    harness: AgentHarness,
    model_repo: FixtureRepo,  # noqa: F811
    tmp_path: Path,
) -> None:
    job_id, _, _, nonce = _sealed_job(api_server, chain, harness, model_repo)
    verifier = register_worker(api_server, tmp_path / "verifier.skey")
    feed = HttpApiFeed(api_server.url, ORACLE, NETWORK)
    try:
        request = KeyRequest.sign(
            ORACLE,
            job_id=job_id,
            nonce=nonce,
            recipient=verifier.key.public_key_hex,
            files=("pot/000002.weights",),
        )
        request_id = feed.request_keys(request)
    finally:
        feed.close()
    # A dishonest provider wraps some other key; the API cannot tell (it cannot unwrap).
    wrong = wrap_key(secrets.token_bytes(32), request.recipient_x25519)
    harness.agent.api.grant_keys(request_id, {"pot/000002.weights": wrong.to_json()})
    with (
        ApiClient(api_server.url, verifier.key, NETWORK) as as_verifier,
        pytest.raises(SealingError, match="not the one this file uses"),
    ):
        open_granted(as_verifier, request_id, tmp_path / "replay", verifier.key.signing_key)
    assert not (tmp_path / "replay" / "pot" / "000002.weights").exists()


def test_the_agent_answers_key_requests_in_the_background(
    api_server: ApiServer,
    chain: StaticChainView,
    harness: AgentHarness,
    model_repo: FixtureRepo,  # noqa: F811
    tmp_path: Path,
) -> None:
    job_id, _, _, nonce = _sealed_job(api_server, chain, harness, model_repo)
    verifier = register_worker(api_server, tmp_path / "verifier.skey")
    feed = HttpApiFeed(api_server.url, ORACLE, NETWORK)
    try:
        request_id = feed.request_keys(
            KeyRequest.sign(
                ORACLE,
                job_id=job_id,
                nonce=nonce,
                recipient=verifier.key.public_key_hex,
                files=("pot/000001.weights",),
            )
        )
    finally:
        feed.close()
    responder = GrantResponder(
        harness.agent.api,
        harness.agent.seal_keys,
        (ORACLE_KEY,),
        harness.worker.key.public_key_hex,
        interval_s=0.05,
    )
    responder.start()
    try:
        deadline = time.monotonic() + 60
        while True:
            with open_session(api_server.engine) as session:
                row = session.get(ProofKeyRequest, request_id)
                assert row is not None
                if row.grants is not None:
                    break
            assert time.monotonic() < deadline, "the responder never answered"
            time.sleep(0.02)
    finally:
        responder.stop()
    assert set(row.grants) == {"pot/000001.weights"}


def _resumed_by(api: ApiServer, other: Any, nonce: str) -> tuple[int, int]:
    """The job's lease is lost (expired) and another worker's lease resumed it, with the
    same nonce (as api.services.resume does); (lost lease id, resuming lease id)."""
    with open_session(api.engine) as session:
        lost = session.exec(select(Lease).where(Lease.nonce == nonce)).one()
        resuming_provider = session.exec(
            select(Provider).where(Provider.worker_key == other.key.public_key_hex)
        ).one()
        lost.outcome, lost.ended_at = "expired", datetime.now(UTC)
        resumed = Lease(
            job_id=lost.job_id,
            provider_id=resuming_provider.id,
            token_hash=secrets.token_hex(32),
            nonce=nonce,
            attempt=lost.attempt + 1,
            created_at=datetime.now(UTC),
            expires_at=datetime.now(UTC),
            resumed_lease_id=lost.id,
            resumed_at=1,
        )
        session.add_all([lost, resumed])
        session.commit()
        assert lost.id is not None and resumed.id is not None
        return lost.id, resumed.id


def test_a_lost_attempts_keys_come_from_its_own_worker_after_its_lease_is_lost(
    api_server: ApiServer,
    chain: StaticChainView,
    harness: AgentHarness,
    model_repo: FixtureRepo,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A resumed job's attempts share a nonce. A key request naming the lost attempt's
    provider is that attempt's, whatever lease came after; its worker answers it though its
    lease expired, and the verifier opens the lost attempt's checkpoint with the grant.
    Attacks: the same request naming the resuming provider (whose lease never uploaded
    those files) is refused; without a provider it would be the newest lease's (refused
    the same way, so the oracle always names it)."""
    job_id, _, _, nonce = _sealed_job(api_server, chain, harness, model_repo)
    provider = harness.worker.key.public_key_hex
    resuming = register_worker(api_server, tmp_path / "resuming.skey")
    verifier = register_worker(api_server, tmp_path / "verifier.skey")
    lost_id, _ = _resumed_by(api_server, resuming, nonce)
    files = ("pot/000001.weights",)
    feed = HttpApiFeed(api_server.url, ORACLE, NETWORK)
    try:
        for named in (resuming.key.public_key_hex, None):
            wrong = KeyRequest.sign(
                ORACLE,
                job_id=job_id,
                nonce=nonce,
                recipient=verifier.key.public_key_hex,
                files=files,
                provider=named,
            )
            with pytest.raises(FeedError, match="400"):
                feed.request_keys(wrong)
        request = KeyRequest.sign(
            ORACLE,
            job_id=job_id,
            nonce=nonce,
            recipient=verifier.key.public_key_hex,
            files=files,
            provider=provider,
        )
        request_id = feed.request_keys(request)
    finally:
        feed.close()
    with open_session(api_server.engine) as session:
        row = session.get(ProofKeyRequest, request_id)
        assert row is not None and row.lease_id == lost_id
    report = answer_key_requests(harness.agent.api, harness.agent.seal_keys, {ORACLE_KEY}, provider)
    assert report.granted == 1, report
    with ApiClient(api_server.url, verifier.key, NETWORK) as as_verifier:
        (opened,) = open_granted(
            as_verifier, request_id, tmp_path / "replay", verifier.key.signing_key
        )
    with open_session(api_server.engine) as session:
        manifest_hash = session.exec(
            select(JobResult.sha256).where(
                JobResult.lease_id == lost_id, JobResult.name == "pot/manifest.json"
            )
        ).one()
    manifest = Manifest.from_bytes(LocalBlobStore(tmp_path / "blobs").read_bytes(manifest_hash))
    assert opened.sha256 == manifest.leaves[1].weights


def test_a_worker_answers_no_request_for_another_providers_lease(
    api_server: ApiServer,
    chain: StaticChainView,
    harness: AgentHarness,
    model_repo: FixtureRepo,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The API host relays to the lost provider an oracle's request for the resuming
    provider's lease (same nonce): answered with the lost provider's keys, it would open
    nothing and blame the resuming provider for withholding. The worker refuses it."""
    job_id, _, _, nonce = _sealed_job(api_server, chain, harness, model_repo)
    provider = harness.worker.key.public_key_hex
    resuming = register_worker(api_server, tmp_path / "resuming.skey")
    verifier = register_worker(api_server, tmp_path / "verifier.skey")
    lost_id, resumed_id = _resumed_by(api_server, resuming, nonce)
    others = KeyRequest.sign(
        ORACLE,
        job_id=job_id,
        nonce=nonce,
        recipient=verifier.key.public_key_hex,
        files=("pot/000001.weights",),
        provider=resuming.key.public_key_hex,
    )
    with open_session(api_server.engine) as session:
        lost = session.get(Lease, lost_id)
        assert lost is not None
        session.add(
            ProofKeyRequest(
                digest=others.digest,
                job_id=lost.job_id,
                lease_id=lost_id,  # the host's relay: to the lost provider, its own files
                provider_id=lost.provider_id,
                recipient_key=others.recipient,
                request=others.to_json(),
                created_at=datetime.now(UTC),
            )
        )
        session.commit()
    report = answer_key_requests(harness.agent.api, harness.agent.seal_keys, {ORACLE_KEY}, provider)
    assert report.granted == 0
    assert len(report.ignored) == 1 and "another provider's lease" in report.ignored[0]
    with open_session(api_server.engine) as session:
        assert session.exec(select(ProofKeyRequest)).one().grants is None
    assert resumed_id != lost_id
