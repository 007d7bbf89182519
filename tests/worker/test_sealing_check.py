"""A worker seals results only to a key vouched for by the wallet that locked the job's escrow
on chain (asked of the oracle), never to one the API merely hands over."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from agent_fixtures import (  # noqa: F401  (fixtures)
    AgentHarness,
    ApiServer,
    FixtureRepo,
    RecordingOracle,
    _oracle_app,
    api_server,
    job_path,
    job_spec,
    model_repo,
    script_hash,
)
from api_support import Wallet, sign_in
from nacl.public import PrivateKey
from sqlmodel import select

from api.db import open_session
from api.models import SealingKey, User
from api.services.users import add_senior
from chain.contracts import types as t
from chain.devnet.testing import serve_app
from oracle.inputs.chain import EscrowLookup, EscrowOutput, StaticChainView
from oracle.intake.escrow_info import escrow_info_router
from proofnet.messages.attestation import EscrowRef
from proofnet.messages.envelope import is_sealed
from proofnet.messages.escrow_info import EscrowInfo
from proofnet.messages.sealing import SealingTarget, sealing_key_message
from worker.oracle_client import OracleClient
from worker.runtime.process_runtime import ProcessRuntime
from worker.sealing_check import (
    SealingKeyRefused,
    SealingKeyUnverified,
    check_sealing_wallet,
    verify_sealing_key,
)


def pkh(wallet: Wallet) -> str:
    return str(wallet.signing_key.to_verification_key().hash().payload.hex())


def target(wallet: Wallet, public_key: str | None = None) -> SealingTarget:
    public_key = public_key or bytes(PrivateKey.generate().public_key).hex()
    signed = wallet.sign_data(sealing_key_message(public_key))
    return SealingTarget(
        public_key=public_key, signature=signed["signature"], cose_key=signed["key"]
    )


def escrow_info(job_id: str, submitter: Wallet, tx_id: str = "ab" * 32) -> EscrowInfo:
    return EscrowInfo(
        tx_id=tx_id,
        index=0,
        job_id=job_id,
        submitter_pkh=pkh(submitter),
        budget=10,
        deadline_ms=2**42,
    )


def test_only_the_escrow_submitters_wallet_may_vouch_for_the_key() -> None:
    submitter, host = Wallet(), Wallet()
    job_id = secrets.token_hex(32)
    escrow = escrow_info(job_id, submitter)
    assert check_sealing_wallet(target(submitter), escrow, job_id) == pkh(submitter)
    # The API host signs a key of its own with its own wallet: valid CIP-8, wrong wallet.
    with pytest.raises(SealingKeyRefused, match="locked by " + pkh(submitter)):
        check_sealing_wallet(target(host), escrow, job_id)
    # The right wallet, but the escrow pays for another job.
    with pytest.raises(SealingKeyRefused, match="not " + job_id):
        check_sealing_wallet(target(submitter), escrow_info("0" * 64, submitter), job_id)
    # A signature over another key than the one handed over.
    real = target(submitter)
    swapped = SealingTarget(
        public_key=bytes(PrivateKey.generate().public_key).hex(),
        signature=real.signature,
        cose_key=real.cose_key,
    )
    with pytest.raises(SealingKeyRefused, match="another sealing key"):
        check_sealing_wallet(swapped, escrow, job_id)


# --- through the oracle's endpoint -------------------------------------------------------


def escrow_datum(job_id: str, submitter: Wallet) -> t.EscrowDatum:
    key_hash = bytes.fromhex(pkh(submitter))
    return t.EscrowDatum(
        batch_credential=b"\x11" * 28,
        job_id=bytes.fromhex(job_id),
        submitter=t.Address(t.PubKeyCredential(key_hash), t.NoStakingCredential()),
        submitter_pkh=key_hash,
        budget=2_000_000,
        ntx_policy=b"\xab" * 28,
        ntx_name=b"NTX",
        deadline=int(time.time() * 1000) + 3_600_000,
        config_policy=b"\x22" * 28,
        config_name=t.CONFIG_NFT_NAME,
        cancel_allowed_until=t.NoPosixTime(),
        nonce=0,
        oracle_set=bytes(32),
    )


def put_escrow(chain: StaticChainView, ref: EscrowRef, datum: t.EscrowDatum) -> None:
    output = EscrowOutput(
        ref=ref,
        address="addr_test1-escrow",
        payment_script_hash=script_hash(),
        lovelace=5_000_000,
        assets={"ab" * 28 + "4e5458": 2_000_000},
        datum=datum,
        datum_error="",
    )
    chain.put(EscrowLookup("unspent", output), ref)


@pytest.fixture
def chain() -> StaticChainView:
    return StaticChainView()


@pytest.fixture
def oracle_with_escrows(
    api_server: ApiServer,  # noqa: F811
    chain: StaticChainView,
) -> Iterator[RecordingOracle]:
    """The recording oracle, also answering escrow lookups from `chain` as a real one does."""
    recorder = RecordingOracle(escrows=api_server.escrows)
    app = _oracle_app(recorder)
    app.include_router(escrow_info_router(chain, script_hash()))
    with serve_app(app) as url:
        recorder.url = url
        yield recorder


def test_lookup_through_the_oracle(
    oracle_with_escrows: RecordingOracle, chain: StaticChainView
) -> None:
    submitter, host = Wallet(), Wallet()
    job_id = secrets.token_hex(32)
    ref = EscrowRef(tx_id=secrets.token_hex(32), index=3)
    put_escrow(chain, ref, escrow_datum(job_id, submitter))
    client = OracleClient(oracle_with_escrows.url)
    try:
        checked = verify_sealing_key(
            target(submitter), tx_id=ref.tx_id, index=3, job_id=job_id, oracle=client
        )
        assert checked == pkh(submitter)
        with pytest.raises(SealingKeyRefused, match="locked by"):
            verify_sealing_key(target(host), tx_id=ref.tx_id, index=3, job_id=job_id, oracle=client)
        with pytest.raises(SealingKeyRefused, match="finds no escrow"):
            verify_sealing_key(
                target(submitter), tx_id=ref.tx_id, index=4, job_id=job_id, oracle=client
            )
    finally:
        client.close()
    down = OracleClient("http://127.0.0.1:9", timeout_s=2)
    with pytest.raises(SealingKeyUnverified, match="cannot reach the oracle"):
        verify_sealing_key(target(submitter), tx_id=ref.tx_id, index=3, job_id=job_id, oracle=down)
    down.close()


# --- the agent ----------------------------------------------------------------------------


def sealed_submitter(api: ApiServer) -> tuple[Wallet, dict[str, str], bytes]:
    """An approved submitter with a sealing key registered through the API (and the key)."""
    wallet = Wallet()
    with open_session(api.engine) as session:
        add_senior(session, api.config, wallet.address, datetime.now(UTC))
    auth = sign_in(api.http, wallet)  # type: ignore[arg-type]
    private = PrivateKey.generate()
    public = bytes(private.public_key).hex()
    signed = wallet.sign_data(sealing_key_message(public))
    put = api.http.put("/api/v1/users/me/sealing-key", json=signed, headers=auth)
    assert put.status_code == 200, put.text
    return wallet, auth, bytes(private)


def submit(api: ApiServer, auth: dict[str, str], spec: dict[str, object]) -> str:
    posted = api.http.post("/api/v1/jobs", json={"spec": spec}, headers=auth)
    assert posted.status_code == 201, posted.text
    job_id = str(posted.json()["job_id"])
    api.record_escrow(job_id)
    return job_id


def escrow_ref_of(api: ApiServer, job_id: str) -> EscrowRef:
    escrow = api.escrows[job_id]
    return EscrowRef(tx_id=escrow["tx_id"], index=escrow["index"])


@pytest.fixture
def sealing_harness(
    tmp_path: Path,
    api_server: ApiServer,  # noqa: F811
    oracle_with_escrows: RecordingOracle,
    model_repo: FixtureRepo,  # noqa: F811
    job_path: None,  # noqa: F811
) -> Iterator[AgentHarness]:
    h = AgentHarness(tmp_path, api_server, oracle_with_escrows, model_repo, ProcessRuntime())
    yield h
    h.close()


def test_agent_refuses_a_key_the_api_substituted(
    sealing_harness: AgentHarness,
    api_server: ApiServer,  # noqa: F811
    oracle_with_escrows: RecordingOracle,
    chain: StaticChainView,
    model_repo: FixtureRepo,  # noqa: F811
) -> None:
    submitter, auth, _ = sealed_submitter(api_server)
    job_id = submit(api_server, auth, job_spec(model_repo))
    put_escrow(chain, escrow_ref_of(api_server, job_id), escrow_datum(job_id, submitter))
    # A compromised API host swaps in a key of its own, signed by its own wallet (a valid
    # CIP-8 signature, so the claim parses).
    host = target(Wallet())
    with open_session(api_server.engine) as session:
        user = session.exec(select(User).where(User.address == submitter.address)).one()
        row = session.get(SealingKey, user.id)
        assert row is not None
        row.public_key, row.signature, row.cose_key = host.public_key, host.signature, host.cose_key
        session.add(row)
        session.commit()

    outcome = sealing_harness.agent.run(once=True).outcomes[0]
    assert outcome.status == "failed"
    assert "locked by " + pkh(submitter) in outcome.reason
    job = api_server.http.get(f"/api/v1/jobs/{job_id}", headers=auth).json()
    assert "refusing to seal results" in job["last_error"] and job["failures"] == 1
    # Nothing ran, nothing was uploaded or attested.
    assert api_server.http.get(f"/api/v1/jobs/{job_id}/results", headers=auth).json() == []
    assert oracle_with_escrows.requests == 0


def test_agent_seals_to_the_submitters_verified_key(
    sealing_harness: AgentHarness,
    api_server: ApiServer,  # noqa: F811
    oracle_with_escrows: RecordingOracle,
    chain: StaticChainView,
    model_repo: FixtureRepo,  # noqa: F811
) -> None:
    submitter, auth, _ = sealed_submitter(api_server)
    job_id = submit(api_server, auth, job_spec(model_repo, steps=10))
    put_escrow(chain, escrow_ref_of(api_server, job_id), escrow_datum(job_id, submitter))
    outcome = sealing_harness.agent.run(once=True).outcomes[0]
    assert (outcome.status, outcome.reason) == ("attested", "delivered")
    api_server.release(job_id)  # the submitter reads them only with the oracle's verdict
    uploads = api_server.http.get(f"/api/v1/jobs/{job_id}/results", headers=auth).json()
    named = [u["name"] for u in uploads if not u["name"].startswith("pot/")]
    assert named
    for name in named:
        blob = api_server.http.get(f"/api/v1/jobs/{job_id}/results/{name}", headers=auth)
        assert is_sealed(blob.content)
