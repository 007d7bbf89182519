"""A sealed job's spot check by a drawn verifier: the oracle asks the provider, through the
API, to grant the verifier the keys of the proof files the task names; the verifier opens
them and replays; neither the API host nor the oracle ever holds the plaintext. A provider
that grants a wrong key has withheld its proof: its fault.

Workers run the process runtime here (no engine needed; the verifier is told it is a test).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_fixtures import (  # noqa: F401  (fixtures)
    NETWORK,
    AgentHarness,
    ApiServer,
    FixtureRepo,
    RecordingOracle,
    job_path,
    model_repo,
    register_worker,
)
from nacl.public import PrivateKey
from test_sealed_proof import (  # noqa: F401  (fixtures)
    ORACLE,
    ORACLE_KEY,
    _sealed_job,
    api_server,
    chain,
    harness,
    oracle,
)

from oracle.inputs.chain import StaticChainView
from oracle.intake.feed_client import HttpApiFeed
from oracle.verification.spotcheck import SpotCheckUnavailable
from oracle.verification.verifiers import VerifierSpotChecker
from oracle.verification.verify import Reason
from proofnet.messages.attestation import Attestation
from proofnet.messages.envelope import wrap_key
from proofnet.messages.key_grant import KeyRequest
from worker.api_client import ApiClient
from worker.key_grants import answer_key_requests
from worker.runtime.process_runtime import ProcessRuntime
from worker.verifier import Verifier
from worker.workspace import RepoCache


@pytest.fixture
def feed(api_server: ApiServer) -> Iterator[HttpApiFeed]:  # noqa: F811
    feed = HttpApiFeed(api_server.url, ORACLE, NETWORK, ttl_s=0)
    yield feed
    feed.close()


def _verifier(tmp_path: Path, api: ApiServer, repo: FixtureRepo) -> tuple[Verifier, ApiClient]:
    worker = register_worker(api, tmp_path / "verifier.skey")
    client = ApiClient(api.url, worker.key, NETWORK)
    replayer = Verifier(
        client,
        ProcessRuntime(),
        worker.key,
        tmp_path / "verifier",
        RepoCache(tmp_path / "verifier-repos", rewrites=repo.rewrites),
        trusted_oracle_keys={ORACLE_KEY},
        allow_unisolated=True,  # a test (see the module doc)
        timeout_s=300,
    )
    assert replayer.run_once() == []  # asks for tasks: a candidate from now on
    return replayer, client


def _attested(oracle: RecordingOracle, job_id: str) -> Attestation:  # noqa: F811
    return oracle.accepted[job_id][-1]


def test_a_sealed_proof_is_replayed_with_the_providers_grant(
    api_server: ApiServer,  # noqa: F811
    chain: StaticChainView,  # noqa: F811
    harness: AgentHarness,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
    feed: HttpApiFeed,
    tmp_path: Path,
) -> None:
    job_id, _, _, _ = _sealed_job(api_server, chain, harness, model_repo)
    att = _attested(oracle, job_id)
    replayer, client = _verifier(tmp_path, api_server, model_repo)
    checker = VerifierSpotChecker(feed, ORACLE)
    job = feed.job(job_id)
    assert job is not None and job.sealed
    try:
        with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
            checker.check(att, job)
        # No grant yet: the verifier waits (it does not blame the provider for a slow answer).
        assert replayer.run_once() == []
        provider = harness.worker.key.public_key_hex
        granted = answer_key_requests(
            harness.agent.api, harness.agent.seal_keys, {ORACLE_KEY}, provider
        )
        assert granted.granted == 1, granted
        assert len(replayer.run_once()) == 1
        verdict = checker.check(att, job)
        assert verdict.passed and verdict.fault is None, verdict
    finally:
        client.close()


def test_a_provider_granting_a_wrong_key_withheld_its_proof(
    api_server: ApiServer,  # noqa: F811
    chain: StaticChainView,  # noqa: F811
    harness: AgentHarness,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
    feed: HttpApiFeed,
    tmp_path: Path,
) -> None:
    job_id, _, _, _ = _sealed_job(api_server, chain, harness, model_repo)
    att = _attested(oracle, job_id)
    replayer, client = _verifier(tmp_path, api_server, model_repo)
    checker = VerifierSpotChecker(feed, ORACLE)
    job = feed.job(job_id)
    assert job is not None
    try:
        with pytest.raises(SpotCheckUnavailable, match="waiting for verifier"):
            checker.check(att, job)
        # The provider answers with keys that open nothing.
        for raw in harness.agent.api.key_requests():
            request = KeyRequest.from_json(raw["request"])
            wrong = {
                n: wrap_key(bytes(PrivateKey.generate())[:32], request.recipient_x25519).to_json()
                for n in request.files
            }
            harness.agent.api.grant_keys(int(raw["id"]), wrong)
        assert len(replayer.run_once()) == 1
        verdict = checker.check(att, job)
        assert (verdict.reason, verdict.fault) == (Reason.POT_WITHHELD, "provider"), verdict
    finally:
        client.close()
