"""Balances on a real devnet: available on chain, in escrow, earned, pending settlement."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from api_support import FakeClock, Wallet, Worker, job_spec, sign_in
from fastapi import FastAPI
from fastapi.testclient import TestClient
from movement_support import add_movement
from pycardano import Address, Network, StakeSigningKey
from sqlalchemy import Engine
from sqlmodel import select

from api.app import create_app
from api.config import ApiConfig
from api.db import open_session
from api.models import Job, JobEscrow
from api.services.balances import explorer_links
from api.services.users import add_senior
from chain.devnet.testing import RunningDevnet, running_devnet, serve_app
from proofnet.settings import build_settings


@dataclass
class BaseWallet(Wallet):
    """A wallet whose address carries a stake credential (a base address)."""

    stake_key: StakeSigningKey | None = None

    @property
    def address(self) -> str:
        assert self.stake_key is not None
        vk = self.signing_key.to_verification_key()
        stake = self.stake_key.to_verification_key().hash()
        return str(Address(vk.hash(), stake, network=Network.TESTNET))

    @property
    def stake_address(self) -> str:
        assert self.stake_key is not None
        return str(
            Address(
                staking_part=self.stake_key.to_verification_key().hash(), network=Network.TESTNET
            )
        )


@dataclass
class StakeSignIn(Wallet):
    """Signs in as the stake address with the stake key (CIP-30 `signData(rewardAddress)`)."""

    stake_key: StakeSigningKey | None = None

    @property
    def address(self) -> str:
        assert self.stake_key is not None
        stake = self.stake_key.to_verification_key().hash()
        return str(Address(staking_part=stake, network=Network.TESTNET))

    def sign_data(self, message: str) -> dict[str, str]:
        from pycardano.cip import cip8

        signed = cip8.sign(message, self.stake_key, attach_cose_key=True, network=Network.TESTNET)
        assert isinstance(signed, dict)
        return {"signature": signed["signature"], "key": signed["key"]}


class Oracle:
    """A local HTTP server answering the oracle's public per-job attestation status."""

    def __init__(self) -> None:
        self.attestations: dict[str, list[dict[str, Any]]] = {}
        self.calls = 0
        app = FastAPI()

        @app.get("/api/v1/jobs/{job_id}/attestations")
        def job_attestations(job_id: str) -> dict[str, Any]:
            self.calls += 1
            return {"job_id": job_id, "data": self.attestations.get(job_id, [])}

        self.app = app


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[RunningDevnet]:
    with running_devnet(tmp_path, block_time=0.1) as devnet:
        yield devnet


@pytest.fixture
def oracle() -> Iterator[tuple[Oracle, str]]:
    o = Oracle()
    with serve_app(o.app) as url:
        yield o, url


def _client(
    config: ApiConfig, engine: Engine, clock: FakeClock, devnet: RunningDevnet, oracle_url: str
) -> TestClient:
    app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)
    app.state.run_notifier = False
    policy = devnet.admin_status()["faucet_policy_id"]
    app.state.settings = build_settings(
        chain_backend="devnet",
        devnet_url=devnet.url,
        ntx_policy_id=policy,
        ntx_asset_name="4e5458",
        oracle_url=oracle_url,
    )
    return TestClient(app)


def test_balance_parts_on_a_devnet(
    config: ApiConfig,
    engine: Engine,
    clock: FakeClock,
    chain: RunningDevnet,
    oracle: tuple[Oracle, str],
) -> None:
    fake_oracle, oracle_url = oracle
    wallet = BaseWallet(stake_key=StakeSigningKey.generate())
    chain.wait_for_tx(chain.fund(wallet.address, lovelace=7_000_000, assets={"4e5458": 1234}))
    escrow_tx = chain.fund(wallet.address, lovelace=2_000_000, assets={"4e5458": 500})
    chain.wait_for_tx(escrow_tx)
    with _client(config, engine, clock, chain, oracle_url) as client:
        with open_session(engine) as s:
            add_senior(s, config, wallet.address, clock())
        auth = sign_in(client, wallet)
        worker = Worker(client, clock=clock)
        worker.register([("NVIDIA A100 80GB", 81920)], payout=wallet)

        jobs = []
        for _ in range(3):
            posted = client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=auth)
            assert posted.status_code == 201, posted.text
            jobs.append(posted.json()["job_id"])
            lease = worker.claim().json()["lease_token"]
            assert (
                worker.request("POST", f"/api/v1/worker/leases/{lease}/complete", {}).status_code
                == 200
            )
        with open_session(engine) as s:
            rows = {j.job_id: j for j in s.exec(select(Job)).all()}
            # Escrows the submitter recorded: one unspent output, one that does not exist.
            s.add(
                JobEscrow(
                    job_id=rows[jobs[0]].id,
                    tx_id=escrow_tx,
                    output_index=0,
                    budget=500,
                    deadline_ms=0,
                    recorded_at=clock(),
                )
            )
            s.add(
                JobEscrow(
                    job_id=rows[jobs[1]].id,
                    tx_id=escrow_tx,
                    output_index=7,
                    budget=900,
                    deadline_ms=0,
                    recorded_at=clock(),
                )
            )
            s.commit()
            # The chain watcher saw jobs[0]'s escrow settled: 40 NTX to the provider.
            add_movement(
                s,
                address=wallet.address,
                ntx=40,
                tx_hash="cd" * 32,
                job_id=jobs[0],
                escrow=(escrow_tx, 0),
            )
        att = {"payout_address": wallet.address, "amount": 25}
        fake_oracle.attestations = {
            jobs[0]: [dict(att, status="settled")],  # paid already: not pending
            # Settled by the oracle but not on the record yet: still pending, not dropped.
            jobs[1]: [dict(att, status="settled"), dict(att, status="rejected")],
            jobs[2]: [
                dict(att, status="batched"),
                dict(att, status="verified", payout_address="addr_test1other"),
            ],
        }

        got = client.get(f"/api/v1/balances/{wallet.address}", headers=auth)
        assert got.status_code == 200, got.text
        b = got.json()
        assert b["kind"] == "address" and b["addresses"] == [wallet.address]
        assert b["available"] == {"lovelace": 9_000_000, "ntx": 1734, "note": ""}
        assert b["in_escrow"]["ntx"] == 500
        assert b["earned"]["ntx"] == 40
        assert b["pending_settlement"] == {"lovelace": None, "ntx": 50, "note": ""}
        (payout,) = b["payouts"]
        assert payout["job_id"] == jobs[0] and payout["tx_hash"] == "cd" * 32
        root = chain.url.removesuffix("/").removesuffix("/api/v0")
        assert payout["explorer"] == {"devnet": f"{root}/explorer/tx/{'cd' * 32}"}

        # The stake address covers the addresses the API knows with that stake key; reading
        # it takes a session signed by the stake key (signed in as the stake address).
        stake_path = f"/api/v1/balances/{wallet.stake_address}"
        assert client.get(stake_path, headers=auth).status_code == 403
        stake_auth = sign_in(client, StakeSignIn(stake_key=wallet.stake_key))
        by_stake = client.get(stake_path, headers=stake_auth).json()
        assert by_stake["kind"] == "stake" and by_stake["addresses"] == [wallet.address]
        assert by_stake["available"]["ntx"] == 1734 and by_stake["earned"]["ntx"] == 40

        # Chain and oracle answers are cached: a new UTxO shows up only after the TTL.
        calls = fake_oracle.calls
        chain.wait_for_tx(chain.fund(wallet.address, lovelace=1_000_000))
        again = client.get(f"/api/v1/balances/{wallet.address}", headers=auth).json()
        assert again["available"]["lovelace"] == 9_000_000 and fake_oracle.calls == calls


def test_balances_are_private_and_validated(
    config: ApiConfig, engine: Engine, clock: FakeClock, chain: RunningDevnet
) -> None:
    # The oracle URL points at a closed port: pending settlement is unknown, and says so.
    with _client(config, engine, clock, chain, "http://127.0.0.1:9") as client:
        owner, other = Wallet(), Wallet()
        owner_auth, other_auth = sign_in(client, owner), sign_in(client, other)
        mine = client.get(f"/api/v1/balances/{owner.address}", headers=owner_auth)
        assert mine.status_code == 200, mine.text
        body = mine.json()
        assert body["available"] == {"lovelace": 0, "ntx": 0, "note": ""}
        assert body["pending_settlement"]["ntx"] == 0  # no completed jobs: nothing to ask
        assert (
            client.get(f"/api/v1/balances/{owner.address}", headers=other_auth).status_code == 403
        )
        assert client.get(f"/api/v1/balances/{owner.address}").status_code == 401
        bad = client.get("/api/v1/balances/addr_test1notanaddressatall", headers=owner_auth)
        assert bad.status_code == 400
        mainnet = str(
            Address(owner.signing_key.to_verification_key().hash(), network=Network.MAINNET)
        )
        wrong = client.get(f"/api/v1/balances/{mainnet}", headers=owner_auth)
        assert wrong.status_code == 400 and "network" in wrong.json()["detail"]


def test_unknown_parts_say_why(config: ApiConfig, engine: Engine, clock: FakeClock) -> None:
    app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)
    app.state.run_notifier = False
    app.state.settings = build_settings(devnet_url="http://127.0.0.1:9/api/v0", oracle_url="")
    with TestClient(app) as client:
        wallet = Wallet()
        with open_session(engine) as s:
            add_senior(s, config, wallet.address, clock())
        auth = sign_in(client, wallet)
        worker = Worker(client, clock=clock)
        worker.register([("NVIDIA A100 80GB", 81920)], payout=wallet)
        client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=auth)
        lease = worker.claim().json()["lease_token"]
        worker.request("POST", f"/api/v1/worker/leases/{lease}/complete", {})
        b = client.get(f"/api/v1/balances/{wallet.address}", headers=auth).json()
        assert b["available"]["lovelace"] is None and b["available"]["note"].startswith("unknown")
        assert b["pending_settlement"]["ntx"] is None
        assert "no oracle status endpoint" in b["pending_settlement"]["note"]
        assert b["ntx_unit"] is None


def test_explorer_links_per_network() -> None:
    h = "ef" * 32
    assert explorer_links("preprod", "", h) == {
        "cardanoscan": f"https://preprod.cardanoscan.io/transaction/{h}",
        "cexplorer": f"https://preprod.cexplorer.io/tx/{h}",
    }
    assert (
        explorer_links("mainnet", "", h)["cardanoscan"] == f"https://cardanoscan.io/transaction/{h}"
    )
    assert explorer_links("devnet", "http://127.0.0.1:3030/api/v0/", h) == {
        "devnet": f"http://127.0.0.1:3030/explorer/tx/{h}"
    }


def test_urls_in_balance_notes_never_show_their_credentials(
    config: ApiConfig, engine: Engine, clock: FakeClock
) -> None:
    """The leak reported: a provider read the oracle's URL, password included, in the note
    of its pending settlement. Both lookups fail here (closed ports), so both notes name
    their URL."""
    app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)
    app.state.run_notifier = False
    app.state.settings = build_settings(
        chain_backend="devnet",
        devnet_url="http://chain-user:chain-pass@127.0.0.1:9/api/v0",
        oracle_url="http://oracle-user:oracle-pass@127.0.0.1:9",
    )
    with TestClient(app) as client:
        wallet = Wallet()
        with open_session(engine) as s:
            add_senior(s, config, wallet.address, clock())
        auth = sign_in(client, wallet)
        worker = Worker(client, clock=clock)
        worker.register([("NVIDIA A100 80GB", 81920)], payout=wallet)
        client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=auth)
        lease = worker.claim().json()["lease_token"]
        worker.request("POST", f"/api/v1/worker/leases/{lease}/complete", {})
        answer = client.get(f"/api/v1/balances/{wallet.address}", headers=auth)
    body = answer.json()
    assert body["pending_settlement"]["note"].startswith("unknown: oracle at http://***@")
    for secret in ("oracle-pass", "oracle-user", "chain-pass", "chain-user"):
        assert secret not in answer.text


def test_devnet_explorer_links_never_show_credentials() -> None:
    links = explorer_links("devnet", "http://u:p4ss@127.0.0.1:3030/api/v0/", "ef" * 32)
    assert "p4ss" not in links["devnet"] and links["devnet"].startswith("http://***@")
