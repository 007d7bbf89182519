"""The browser-wallet escrow flow against a real devnet with the contracts deployed: the API
builds the lock transaction, a wallet signs it (pycardano here), the API submits it and
records the escrow; bad witnesses, someone else's job and broken input are refused."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from api_support import Wallet, job_spec, sign_in
from fastapi.testclient import TestClient
from pycardano import (
    PaymentSigningKey,
    Transaction,
    TransactionWitnessSet,
    VerificationKeyWitness,
)
from sqlmodel import Session, col, select
from web_fixtures import EscrowWorld, escrow_world, witness_set_hex

from api.config import ApiConfig
from api.models import Job, JobEscrow
from api.services.users import add_senior
from chain.contracts.types import EscrowDatum
from chain.offchain.builders.chain_time import tip_posix_ms

BUDGET = 1_234_567


@pytest.fixture
def config(make_config: Callable[..., ApiConfig]) -> ApiConfig:
    return make_config(claim_requires_escrow=True)  # as served: jobs wait for their escrow


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EscrowWorld]:
    with escrow_world(Path(tmp_path_factory.mktemp("escrow-devnet"))) as w:
        yield w


@pytest.fixture
def api(client: TestClient, world: EscrowWorld) -> TestClient:
    world.attach(client.app)
    return client


def _approve(session: Session, config: ApiConfig, wallet: Wallet, clock: Any) -> None:
    add_senior(session, config, wallet.address, clock())


def _post_job(api: TestClient, headers: dict[str, str], budget: int = BUDGET) -> str:
    spec = job_spec(gpus=0)
    spec["pricing"] = {"kind": "fixed", "amount": budget}
    response = api.post("/api/v1/jobs", json={"spec": spec}, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["job_id"])


@pytest.fixture
def owner(
    api: TestClient, session: Session, config: ApiConfig, clock: Any, world: EscrowWorld
) -> dict[str, str]:
    _approve(session, config, world.wallet, clock)
    return sign_in(api, world.wallet)


def test_build_sign_submit_records_the_escrow(
    api: TestClient, owner: dict[str, str], world: EscrowWorld, session: Session
) -> None:
    job_id = _post_job(api, owner)
    base = f"/api/v1/jobs/{job_id}/escrow"
    status = api.get(f"/api/v1/jobs/{job_id}/status", headers=owner).json()
    assert status["reason"].startswith("waiting for its escrow")
    before_ntx = world.holdings()[1]

    built = api.post(f"{base}/build", json={"change_address": world.wallet.address}, headers=owner)
    assert built.status_code == 200, built.text
    body = built.json()
    assert body["budget"] == BUDGET and body["escrow_index"] == 0
    assert body["escrow_address"] == str(world.world.deployment.escrow_address)
    assert body["ntx_unit"] == world.world.deployment.ntx_unit
    tx = Transaction.from_cbor(body["tx_cbor"])
    assert tx.transaction_body.hash().hex() == body["tx_id"]
    assert tx.transaction_body.fee == body["fee_lovelace"] > 0
    wallet_pkh = world.wallet.signing_key.to_verification_key().hash().payload.hex()
    assert body["required_signers"] == [wallet_pkh]
    out = tx.transaction_body.outputs[0]
    datum = EscrowDatum.from_cbor(out.datum.to_cbor())
    assert datum.job_id.hex() == job_id and datum.budget == BUDGET
    assert datum.deadline == body["deadline_ms"]
    # Room for three one-hour attempts plus the settlement window, counted from chain time.
    now = tip_posix_ms(world.world.context)
    window_ms = ApiConfig.settlement_window_s * 1000
    assert now + window_ms < body["deadline_ms"] <= now + 3 * 3_600_000 + window_ms

    submitted = api.post(
        f"{base}/submit",
        json={"tx_cbor": body["tx_cbor"], "witness_set": world.witness_set(body["tx_cbor"])},
        headers=owner,
    )
    assert submitted.status_code == 200, submitted.text
    done = submitted.json()
    assert done["tx_id"] == body["tx_id"] and done["recorded"] is True
    assert done["escrow"] == {
        "job_id": job_id,
        "tx_id": body["tx_id"],
        "index": 0,
        "budget": BUDGET,
        "deadline_ms": body["deadline_ms"],
    }
    job = session.exec(select(Job).where(Job.job_id == job_id)).one()
    row = session.exec(select(JobEscrow).where(JobEscrow.job_id == job.id)).one()
    assert (row.tx_id, row.output_index, row.budget) == (body["tx_id"], 0, BUDGET)
    session.rollback()  # SQLite: release the write lock the read took before the API writes
    # On chain: the escrow holds the budget, the wallet holds that much less.
    escrows = world.world.utxos_of(body["tx_id"], world.world.deployment.escrow_address, 1)
    assert escrows[0].output.amount.multi_asset.count(lambda *_: True) == 1
    assert world.holdings()[1] == before_ntx - BUDGET
    status = api.get(f"/api/v1/jobs/{job_id}/status", headers=owner).json()
    assert not status["reason"].startswith("waiting for its escrow")
    # A second lock would tie up the budget twice.
    again = api.post(f"{base}/build", json={}, headers=owner)
    assert again.status_code == 409 and "already has an escrow" in again.json()["detail"]


def test_bad_witnesses_and_foreign_transactions_are_refused(
    api: TestClient, owner: dict[str, str], world: EscrowWorld, session: Session
) -> None:
    job_id = _post_job(api, owner)
    other_job = _post_job(api, owner)
    base = f"/api/v1/jobs/{job_id}/escrow"
    body = api.post(f"{base}/build", json={}, headers=owner).json()
    tx_cbor = body["tx_cbor"]

    def submit(witness_set: str, path: str = base, tx: str = tx_cbor) -> Any:
        return api.post(
            f"{path}/submit", json={"tx_cbor": tx, "witness_set": witness_set}, headers=owner
        )

    # A signature that does not verify over this body (signed another message).
    key = world.wallet.signing_key
    bad = TransactionWitnessSet(
        vkey_witnesses=[VerificationKeyWitness(key.to_verification_key(), key.sign(b"x" * 32))]
    ).to_cbor_hex()
    response = submit(bad)
    assert response.status_code == 400 and "does not verify" in response.json()["detail"]
    # A genuine signature by a key that does not own the inputs: the chain refuses it.
    stranger = witness_set_hex(tx_cbor, PaymentSigningKey.generate())
    response = submit(stranger)
    assert response.status_code == 400, response.text
    assert "refused" in response.json()["detail"]
    # No witnesses at all, or not CBOR.
    empty = TransactionWitnessSet().to_cbor_hex()
    assert submit(empty).status_code == 400
    assert submit("00ff").status_code == 400
    # This job's transaction handed in for another job.
    response = submit(world.witness_set(tx_cbor), path=f"/api/v1/jobs/{other_job}/escrow")
    assert response.status_code == 400 and "locks no escrow" in response.json()["detail"]
    # Not hex, unknown fields: the request shape is refused before anything runs.
    assert submit("zz").status_code == 422
    extra = api.post(f"{base}/build", json={"budget": 1}, headers=owner)
    assert extra.status_code == 422
    assert (
        api.post(f"{base}/build", json={"change_address": "addr_test1nope" * 2}, headers=owner)
    ).status_code == 400
    # Nothing was recorded for either job.
    ids = session.exec(select(Job.id).where(col(Job.job_id).in_([job_id, other_job]))).all()
    assert len(ids) == 2
    assert session.exec(select(JobEscrow).where(col(JobEscrow.job_id).in_(ids))).all() == []


def test_only_the_owner_sees_the_job_and_an_unfunded_wallet_is_told_why(
    api: TestClient,
    owner: dict[str, str],
    world: EscrowWorld,
    session: Session,
    config: ApiConfig,
    clock: Any,
) -> None:
    job_id = _post_job(api, owner)
    other = world.funded_wallet(lovelace=50_000_000)
    _approve(session, config, other, clock)
    other_headers = sign_in(api, other)
    base = f"/api/v1/jobs/{job_id}/escrow"
    assert api.post(f"{base}/build", json={}, headers=other_headers).status_code == 404
    body = api.post(f"{base}/build", json={}, headers=owner).json()
    response = api.post(
        f"{base}/submit",
        json={"tx_cbor": body["tx_cbor"], "witness_set": world.witness_set(body["tx_cbor"])},
        headers=other_headers,
    )
    assert response.status_code == 404
    assert api.post(f"{base}/build", json={}).status_code == 401
    missing = secrets.token_hex(32)
    assert api.post(f"/api/v1/jobs/{missing}/escrow/build", json={}, headers=owner).status_code == (
        404
    )
    # The other wallet holds ADA but no NTX: building its own job's escrow says so.
    own = _post_job(api, other_headers)
    response = api.post(f"/api/v1/jobs/{own}/escrow/build", json={}, headers=other_headers)
    assert response.status_code == 400, response.text
    assert "cannot build the escrow transaction" in response.json()["detail"]
    # A cancelled job needs no escrow.
    assert api.post(f"/api/v1/jobs/{own}/cancel", headers=other_headers).status_code == 200
    response = api.post(f"/api/v1/jobs/{own}/escrow/build", json={}, headers=other_headers)
    assert response.status_code == 409


def test_without_a_deployment_the_api_says_so(
    client: TestClient, session: Session, config: ApiConfig, clock: Any
) -> None:
    wallet = Wallet()
    _approve(session, config, wallet, clock)
    headers = sign_in(client, wallet)
    job_id = _post_job(client, headers)
    client.app.state.chain_context = object()  # type: ignore[attr-defined]
    client.app.state.settings = type("S", (), {"deployment_file": None})()  # type: ignore[attr-defined]
    response = client.post(f"/api/v1/jobs/{job_id}/escrow/build", json={}, headers=headers)
    assert response.status_code == 503
    assert "PROOFNET_DEPLOYMENT_FILE" in response.json()["detail"]
    client.app.state.settings = type("S", (), {"deployment_file": "/nonexistent/d.json"})()  # type: ignore[attr-defined]
    response = client.post(f"/api/v1/jobs/{job_id}/escrow/build", json={}, headers=headers)
    assert response.status_code == 503 and "cannot read deployment" in response.json()["detail"]


class _Lookups:
    """Answers None (not on chain yet), a backend failure, or the output, as scripted."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.calls = 0

    def __call__(self) -> object:
        self.calls += 1
        answer = self.answers.pop(0) if self.answers else None
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_a_submitted_escrow_is_looked_for_until_it_shows() -> None:
    from api.services.escrow_tx import await_output
    from api.services.payable_escrow import EscrowBackendError

    lookups, waited = _Lookups(None, EscrowBackendError("502"), "the output"), []
    found = await_output(lookups, confirm_wait_s=8.0, sleep=waited.append)
    assert found == "the output" and lookups.calls == 3 and waited == [0.25, 0.25]


def test_an_escrow_that_never_shows_is_given_up_after_the_confirm_wait() -> None:
    from api.services.escrow_tx import await_output

    lookups, waited = _Lookups(), []
    assert await_output(lookups, confirm_wait_s=1.0, sleep=waited.append) is None
    assert lookups.calls == 5 and sum(waited) == 1.0  # at 0, 0.25, 0.5, 0.75 and 1 s
    # No wait at all: one look, no sleep.
    once, none = _Lookups(), []
    assert await_output(once, confirm_wait_s=0, sleep=none.append) is None
    assert once.calls == 1 and none == []
