"""Jobs that require a minimum provider bond (`JobSpec.min_bond`) are handed out only to
workers whose bonds, read on chain at the claim, back that much (issue 12 item 7).

The chain is a fake context serving UTxOs at the bond address (the API reads bonds through
`context.utxos`, as pycardano's backends answer it); the devnet path of the same reader is
covered by tests/chain/contracts/test_bond_attacks.py."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from typing import Any

import pytest
from api_support import NETWORK, Wallet, Worker, job_spec
from escrow_chain import NTX_NAME, NTX_POLICY, deployment
from fastapi.testclient import TestClient
from pycardano import (
    Address,
    MultiAsset,
    TransactionId,
    TransactionInput,
    TransactionOutput,
    UTxO,
    Value,
)

from api.config import ApiConfig
from api.services.bonds import terms_of
from chain.contracts import bond_types as bt
from chain.offchain.builders.bond import bond_address, bond_script
from proofnet.messages.jobspec import JobSpec

DEPLOYED = deployment()
MIN_BOND = 500


class BondChain:
    """UTxOs by address (a stand-in for a chain backend's address query)."""

    def __init__(self) -> None:
        self.by_address: dict[str, list[UTxO]] = {}
        self.down = False

    def utxos(self, address: Any) -> list[UTxO]:
        if self.down:
            raise ConnectionError("the chain backend is down")
        return list(self.by_address.get(str(address), []))


@pytest.fixture
def config(database_url: str) -> ApiConfig:
    """On SQLite and PostgreSQL: the bond filter reads the spec's JSON in the claim query."""
    return ApiConfig(database_url=database_url, network=NETWORK, rate_limit_per_minute=100_000)


@pytest.fixture
def chain(client: TestClient, config: ApiConfig) -> BondChain:
    context = BondChain()
    client.app.state.chain_context = context  # type: ignore[attr-defined]
    client.app.state.deployment = DEPLOYED  # type: ignore[attr-defined]
    return context


def lock_bond(
    chain: BondChain,
    config: ApiConfig,
    worker: Worker,
    amount: int,
    *,
    state: Any = None,
    slashed: list[bytes] | None = None,
) -> None:
    address: Address = bond_address(bond_script(DEPLOYED, terms_of(config)), DEPLOYED)
    pkh = hashlib.blake2b(bytes.fromhex(worker.public_key), digest_size=28).digest()
    datum = bt.BondDatum(pkh, amount, state or bt.Bonded(), slashed or [])
    value = Value(
        2_000_000,
        MultiAsset.from_primitive({bytes.fromhex(NTX_POLICY): {bytes.fromhex(NTX_NAME): amount}}),
    )
    utxo = UTxO(
        TransactionInput(TransactionId(secrets.token_bytes(32)), 0),
        TransactionOutput(address, value, datum=datum),
    )
    chain.by_address.setdefault(str(address), []).append(utxo)


def post(client: TestClient, headers: dict[str, str], min_bond: int | None = MIN_BOND) -> str:
    spec = job_spec(gpus=0)
    if min_bond is not None:
        spec["min_bond"] = min_bond
    response = client.post("/api/v1/jobs", json={"spec": spec}, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["job_id"])


def registered(worker_factory: Callable[[], Worker]) -> Worker:
    worker = worker_factory()
    worker.register([])
    return worker


def test_a_job_requiring_a_bond_goes_only_to_a_bonded_provider(
    client: TestClient,
    chain: BondChain,
    config: ApiConfig,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    job_id = post(client, headers)
    unbonded, small, bonded = (registered(worker_factory) for _ in range(3))
    lock_bond(chain, config, small, MIN_BOND - 1)
    lock_bond(chain, config, bonded, MIN_BOND)
    assert unbonded.claim().status_code == 204
    assert small.claim().status_code == 204
    claimed = bonded.claim()
    assert claimed.status_code == 200, claimed.text
    assert claimed.json()["job_id"] == job_id


def test_a_bond_that_is_unbonding_does_not_count(
    client: TestClient,
    chain: BondChain,
    config: ApiConfig,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    post(client, headers)
    worker = registered(worker_factory)
    lock_bond(chain, config, worker, 10 * MIN_BOND, state=bt.Unbonding(0))
    assert worker.claim().status_code == 204


def test_a_bond_listing_the_job_as_slashed_does_not_back_it(
    client: TestClient,
    chain: BondChain,
    config: ApiConfig,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    """A provider who pre-fills `slashed` with the job's id could never be slashed for it."""
    _, headers = approved
    job_id = post(client, headers)
    worker = registered(worker_factory)
    lock_bond(chain, config, worker, MIN_BOND, slashed=[bytes.fromhex(job_id)])
    assert worker.claim().status_code == 204
    status = client.get(f"/api/v1/jobs/{job_id}/status", headers=headers).json()
    assert status["status"] == "queued"
    lock_bond(chain, config, worker, MIN_BOND)
    assert worker.claim().json()["job_id"] == job_id


def test_unreadable_bonds_hand_out_only_jobs_without_a_bond(
    client: TestClient,
    chain: BondChain,
    config: ApiConfig,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    _, headers = approved
    post(client, headers)
    worker = registered(worker_factory)
    lock_bond(chain, config, worker, MIN_BOND)
    chain.down = True
    assert worker.claim().status_code == 204
    free = post(client, headers, min_bond=None)
    assert worker.claim().json()["job_id"] == free


def test_specs_without_a_bond_keep_their_encoding() -> None:
    spec = JobSpec.model_validate(job_spec(gpus=0))
    assert b"min_bond" not in spec.canonical_bytes()
    bonded = JobSpec.model_validate({**job_spec(gpus=0), "min_bond": MIN_BOND})
    assert b'"min_bond":500' in bonded.canonical_bytes()
