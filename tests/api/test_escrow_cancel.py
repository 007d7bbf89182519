"""Money back at once: `proofnet job cancel` on a locked job no provider touched returns the
whole escrow through the quorum-signed Cancel path, on a devnet with the contracts deployed.

The API and an oracle run as HTTP servers, as deployed: the API asks the oracle to co-sign
(`POST /api/v1/quorum/cancel`), and the oracle checks from its own view (the API's signed
feed, its own attestation store, its chain) that no work started, marks the escrow, and
signs. The attacks: a cancel the API would build for a job a provider leased (the API
refuses, and so does the oracle when asked directly, each saying when work started), and a
cancel that would spend the oracle's own funds with its witness.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_support import FakeClock, Worker, job_spec
from fastapi import FastAPI
from fastapi.testclient import TestClient
from nacl.signing import SigningKey
from pycardano import Address
from sqlalchemy import Engine
from web_fixtures import EscrowWorld, escrow_world

from api.app import create_app
from api.client_cli import JobClient, JobCliError
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.migrate import upgrade_head
from api.services.cancel_quorum import HttpCancelQuorum
from api.services.users import add_senior
from chain.devnet.testing import serve_app
from chain.offchain.builders import build_cancel
from chain.offchain.builders.onchain import out_ref_text
from oracle.intake.feed_client import HttpApiFeed
from oracle.settlement.cancel import CancelCoSigner
from oracle.settlement.chain_view import BlockfrostChainView
from oracle.settlement.quorum import QuorumRefusal
from oracle.settlement.routes import router as oracle_router
from oracle.storage import cancel_marks
from oracle.storage.db import make_engine as make_oracle_engine
from oracle.storage.schema import create_tables

BUDGET = 2_000_000

pytestmark = pytest.mark.slow  # a devnet, a deployment and a handful of transactions


@dataclass
class Served:
    root: str
    world: EscrowWorld
    api_engine: Engine
    oracle_engine: Engine
    cosigner: CancelCoSigner
    worker: Worker
    cli: JobClient


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = Path(tmp_path_factory.mktemp("cancel"))
    with escrow_world(tmp / "world") as world:
        oracle_wallet = world.world.oracle_quorum[0]
        oracle_ed25519 = SigningKey(oracle_wallet.signing_key.payload)
        config = ApiConfig(
            database_url=f"sqlite:///{tmp / 'api.db'}",
            network="devnet",
            rate_limit_per_minute=100_000,
            claim_requires_escrow=True,
            oracle_keys=(bytes(oracle_ed25519.verify_key).hex(),),
        )
        api_engine = make_engine(config.database_url)
        upgrade_head(api_engine)
        clock = FakeClock()
        app = create_app(config=config, engine=api_engine, clock=clock, run_sweeper=False)
        app.state.run_notifier = False
        world.attach(app)
        oracle_engine = make_oracle_engine(f"sqlite:///{tmp / 'oracle.db'}")
        create_tables(oracle_engine)
        with open_session(api_engine) as session:
            add_senior(session, config, world.wallet.address, clock())
        with serve_app(app) as root:
            cosigner = CancelCoSigner(
                world.world.deployment,
                BlockfrostChainView(world.world.devnet.url),
                oracle_wallet.signing_key,
                HttpApiFeed(root, oracle_ed25519, "devnet", ttl_s=0.0),
                oracle_engine,
            )
            oracle = FastAPI()
            oracle.state.cancel_cosigner = cosigner
            oracle.include_router(oracle_router)
            with serve_app(oracle) as oracle_root:
                app.state.cancel_quorum = HttpCancelQuorum([oracle_root])
                http = httpx.Client(timeout=120)
                cli = JobClient(root, world.wallet.signing_key, http=http)
                worker = Worker(TestClient(app), clock=clock)
                worker.register([("NVIDIA A100-SXM4-80GB", 81920)])
                yield Served(root, world, api_engine, oracle_engine, cosigner, worker, cli)
                http.close()
        api_engine.dispose()
        oracle_engine.dispose()


def _locked_job(served: Served) -> tuple[str, dict[str, Any]]:
    spec = job_spec()
    spec["pricing"] = {"kind": "fixed", "amount": BUDGET}
    job_id = served.cli.submit(spec)["job_id"]
    locked = served.cli.lock(job_id)  # submitted without --lock: locked later
    assert locked["recorded"] is True, locked
    escrow = served.cli.escrow(job_id)
    assert escrow["state"] == "locked" and escrow["cancel"]["possible"] is True, escrow
    return job_id, escrow


def _wait_ntx(served: Served, expected: int) -> None:
    end = time.monotonic() + 60
    while served.world.holdings()[1] != expected and time.monotonic() < end:
        time.sleep(0.25)
    assert served.world.holdings()[1] == expected


def test_cancel_before_any_work_returns_the_whole_escrow_at_once(served: Served) -> None:
    ntx_before = served.world.holdings()[1]
    job_id, escrow = _locked_job(served)
    _wait_ntx(served, ntx_before - BUDGET)

    done = served.cli.cancel(job_id)
    assert done["status"] == "cancelled" and done["returned"] is not None, done
    assert done["returned"]["to"] == served.world.wallet.address
    _wait_ntx(served, ntx_before)  # every unit of NTX is back, not in a day

    # The oracle marked the escrow: it never pays an attestation for it.
    ref = f"{escrow['tx_id']}#{escrow['index']}"
    marks = cancel_marks.find(served.oracle_engine, [ref])
    assert marks[ref].job_id == job_id
    assert marks[ref].cancel_tx_id == done["returned"]["tx_id"]
    # And the API no longer offers anything for it.
    with pytest.raises(JobCliError, match="no longer on chain|409"):
        served.cli.refund(job_id)


def test_once_a_provider_leased_the_job_neither_the_api_nor_the_oracle_cancels(
    served: Served,
) -> None:
    job_id, escrow = _locked_job(served)
    claimed = served.worker.claim()
    assert claimed.status_code == 200 and claimed.json()["job_id"] == job_id, claimed.text

    done = served.cli.cancel(job_id)
    assert done["status"] == "cancelled" and done["returned"] is None
    message = done["message"]
    assert "work started at" in message and "in lease by provider" in message, message
    assert "refund possible after the deadline" in message and "UTC (in " in message
    assert "slot" not in message

    # A cancel built by hand (an API that lied, or a submitter around it): the oracle
    # refuses from its own read of the feed, saying when work started.
    world = served.world
    (utxo,) = [
        u
        for u in world.world.context.utxos(world.world.deployment.escrow_address)
        if (str(u.input.transaction_id), u.input.index) == (escrow["tx_id"], escrow["index"])
    ]
    cancel = build_cancel(
        world.world.context,
        world.world.deployment,
        [utxo],
        [served.cosigner.key_hash],
        world.address,
    )
    with pytest.raises(QuorumRefusal, match="work on job .* started at .* UTC"):
        served.cosigner.review(cancel.built.tx.to_cbor())
    assert cancel_marks.find(served.oracle_engine, [out_ref_text(utxo.input)]) == {}


def test_the_oracle_never_signs_a_cancel_that_spends_its_own_funds(served: Served) -> None:
    job_id, escrow = _locked_job(served)
    served.cli.cancel_job(job_id)  # cancelled, no work: an honest cancel would be signed
    world = served.world
    oracle = world.world.oracle_quorum[0]
    oracle_address = Address(oracle.pkh, network=world.world.deployment.pycardano_network)
    world.world.fund(oracle_address, 20_000_000)
    (utxo,) = [
        u
        for u in world.world.context.utxos(world.world.deployment.escrow_address)
        if (str(u.input.transaction_id), u.input.index) == (escrow["tx_id"], escrow["index"])
    ]
    # The oracle's own UTxOs pay the fee: its witness would spend them.
    theft = build_cancel(
        world.world.context, world.world.deployment, [utxo], [oracle.pkh], oracle_address
    )
    with pytest.raises(QuorumRefusal, match="belongs to this oracle"):
        served.cosigner.review(theft.built.tx.to_cbor())
    # The honest twin, paid by the submitter, is signed.
    honest = build_cancel(
        world.world.context, world.world.deployment, [utxo], [oracle.pkh], world.address
    )
    assert served.cosigner.review(honest.built.tx.to_cbor())
