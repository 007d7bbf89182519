"""Retrieval challenges played by the attacker, against real S3 servers (moto's, one per
provider, each on its own port) and the real API (in process, over its HTTP interface):
a provider that deletes the data, or keeps the proofs but not the chunks, fails and is not
paid, and its copy is re-replicated from a copy that still verifies; answered challenges
pay GB-months within the job's storage budget; a verdict is recorded once."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from moto.server import ThreadedMotoServer
from nacl.signing import SigningKey
from sqlalchemy.engine import Engine

from api.app import create_app
from api.config import ApiConfig
from api.db import make_engine as api_engine
from api.services.users import add_senior
from oracle.models import StorageAccrual, StorageChallengeRecord
from oracle.retrieval.challenger import ACCRUING, ENDED, FAILED, Challenger, payable, s3_writer
from oracle.retrieval.feed import HttpPlacementFeed
from oracle.storage.db import make_engine
from oracle.storage.schema import create_tables
from proofnet.egress import EgressPolicy
from proofnet.messages import storage as s
from proofnet.pinned_http import pinned_client
from proofnet.storage_objects import PROOFS_SUFFIX, allow_public_reads, put_committed, s3_client
from tests.api.api_support import FakeClock, Wallet, Worker, job_spec, sign_in

BUCKET = "proofnet-store"
CHUNK = 1024


@dataclass
class Provider:
    worker: Worker
    endpoint: str
    s3: Any
    bucket: str

    @property
    def key(self) -> str:
        return self.worker.public_key


@pytest.fixture
def s3_servers() -> Iterator[list[str]]:
    servers = []
    try:
        for _ in range(3):
            server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            server.start()
            servers.append(server)
        yield ["http://{}:{}".format(*srv.get_host_and_port()) for srv in servers]
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def world(tmp_path: Path, s3_servers: list[str]) -> Iterator[dict[str, Any]]:
    oracle_key = SigningKey.generate()
    config = ApiConfig(
        database_url=f"sqlite:///{tmp_path / 'api.db'}",
        network="devnet",
        rate_limit_per_minute=100_000,
        oracle_keys=(bytes(oracle_key.verify_key).hex(),),
    )
    engine = api_engine(config.database_url)
    clock = FakeClock()
    app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)
    with TestClient(app, base_url="http://api.test") as client:
        from api.db import open_session

        wallet = Wallet()
        with open_session(engine) as session:
            add_senior(session, config, wallet.address, clock())
        auth = sign_in(client, wallet)
        providers = []
        for i, endpoint in enumerate(s3_servers):
            s3 = s3_client(endpoint, access_key="p", secret_key="p")
            # moto's servers in one process share one store (across tests too): each
            # provider of each test its own bucket.
            bucket = f"{BUCKET}-{secrets.token_hex(4)}-{i}"
            s3.create_bucket(Bucket=bucket)
            allow_public_reads(s3, bucket)
            worker = Worker(client, clock=clock)
            offer = s.sign_offer(
                worker.key,
                network="devnet",
                payout_address=Wallet().address,
                nonce=worker.request("POST", s.STORAGE_CHALLENGE_PATH).json()["nonce"],
                terms=s.StorageTerms(
                    endpoint=endpoint,
                    bucket=bucket,
                    capacity_bytes=2**30,
                    ntx_per_gb_month=[3_000_000, 1_000_000, 2_000_000][i],
                ),
            )
            put = worker.request("PUT", s.STORAGE_OFFER_PATH, offer.model_dump(mode="json"))
            assert put.status_code == 200, put.text
            providers.append(Provider(worker, endpoint, s3, bucket))
        oracle_engine = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
        create_tables(oracle_engine)
        http = pinned_client(EgressPolicy.allowing(["127.0.0.1/32"]), allow_http=True)
        challenger = Challenger(
            engine=oracle_engine,
            feed=HttpPlacementFeed(client, "http://api.test", oracle_key, "devnet", clock=clock),
            http=http,
            writer=s3_writer(http, access_key="oracle", secret_key="oracle"),
            clock=clock,
        )
        yield {
            "client": client,
            "auth": auth,
            "providers": providers,
            "challenger": challenger,
            "clock": clock,
            "oracle_engine": oracle_engine,
        }
        http.close()
    engine.dispose()


def _place(world: dict[str, Any], data: bytes, holders: list[Provider], budget: int = 10**9) -> tuple[str, s.Commitment]:  # fmt: skip
    client: TestClient = world["client"]
    spec = job_spec()
    spec["results"] = [{"path": "out/*.json", "kind": "json"}]
    spec["storage"] = {
        "kinds": ["results"],
        "replicas": 2,
        "term_days": 30,
        "max_ntx_per_gb_month": 5_000_000,
        "budget": budget,
    }
    job_id = client.post("/api/v1/jobs", json={"spec": spec}, headers=world["auth"]).json()["job_id"]  # fmt: skip
    key = f"jobs/{job_id}/results/out.json"
    commitment = None
    for holder in holders:
        commitment = put_committed(holder.s3, holder.bucket, key, data, chunk_size=CHUNK)
        placed = client.post(
            "/api/v1/storage/placements",
            json={
                "job_id": job_id,
                "kind": "results",
                "object_key": key,
                "provider_key": holder.key,
                "commitment": commitment.model_dump(mode="json"),
            },
            headers=world["auth"],
        )
        assert placed.status_code == 200, placed.text
    assert commitment is not None
    return key, commitment


def _placements(world: dict[str, Any]) -> list[dict[str, Any]]:
    return list(world["client"].get("/api/v1/storage/placements").json()["data"])


def _accruals(engine: Engine) -> dict[int, StorageAccrual]:
    from sqlmodel import Session, select

    with Session(engine) as session:
        return {r.placement_id: r for r in session.exec(select(StorageAccrual))}


def test_answered_challenges_pay_gb_months_at_the_placements_price(world: dict[str, Any]) -> None:
    a, b, _ = world["providers"]
    data = secrets.token_bytes(10 * CHUNK + 5)
    _place(world, data, [a, b])
    world["clock"].advance(15 * 86400)  # half the term
    report = world["challenger"].round()
    assert (report.passed, report.failed) == (2, 0)
    accruals = _accruals(world["oracle_engine"])
    paid = {r.provider_key: r.amount for r in accruals.values()}
    assert paid[a.key] == s.storage_cost(len(data), 3_000_000, 15 * 86400)
    assert paid[b.key] == s.storage_cost(len(data), 1_000_000, 15 * 86400)
    assert all(r.status == ACCRUING for r in accruals.values())
    # The API shows what each copy earned, beside what the provider holds.
    shown = {p["provider_key"]: p["accrued_ntx"] for p in _placements(world)}
    assert shown == paid
    earnings = world["client"].get(f"/api/v1/storage/earnings/{b.key}").json()
    assert (earnings["accrued_ntx"], earnings["held_bytes"]) == (paid[b.key], len(data))
    # Past the end of the term: the last stretch is paid, then nothing more is asked.
    world["clock"].advance(20 * 86400)
    world["challenger"].round()
    accruals = _accruals(world["oracle_engine"])
    assert {r.provider_key: r.amount for r in accruals.values()}[b.key] == s.storage_cost(
        len(data), 1_000_000, 15 * 86400
    ) + s.storage_cost(len(data), 1_000_000, 15 * 86400)
    assert all(r.status == ENDED for r in accruals.values())
    assert world["challenger"].round().outcomes == []


def test_a_provider_that_deletes_the_data_fails_is_not_paid_and_is_replaced(
    world: dict[str, Any],
) -> None:
    a, b, c = world["providers"]
    data = secrets.token_bytes(7 * CHUNK)
    key, commitment = _place(world, data, [a, b])
    a.s3.delete_object(Bucket=a.bucket, Key=key)  # keeps its proof sidecar, drops the data
    world["clock"].advance(10 * 86400)
    report = world["challenger"].round()
    assert report.failed == 1 and report.passed == 1
    bad = next(o for o in report.outcomes if not o.passed)
    assert bad.provider_key == a.key and "did not serve the chunk" in bad.reason
    accruals = _accruals(world["oracle_engine"])
    assert accruals[bad.placement_id].amount == 0 and accruals[bad.placement_id].status == FAILED
    # Re-replicated from b's copy (which verifies) to c, the only other offer that fits.
    rows = {p["id"]: p for p in _placements(world)}
    assert rows[bad.placement_id]["status"] == "failed"
    assert bad.replacement_id is not None
    new = rows[bad.replacement_id]
    assert (new["provider_key"], new["status"], new["replaces_id"]) == (
        c.key,
        "active",
        bad.placement_id,
    )
    assert new["content_root"] == commitment.content_root
    assert new["ends_at"] == rows[bad.placement_id]["ends_at"]  # the rest of the term only
    assert c.s3.get_object(Bucket=c.bucket, Key=key)["Body"].read() == data
    # The failed copy is never asked again, and the new one answers.
    world["clock"].advance(86400)
    again = world["challenger"].round()
    assert {o.provider_key for o in again.outcomes} == {b.key, c.key}
    assert again.failed == 0
    assert [r.provider_key for r in payable(world["oracle_engine"])].count(a.key) == 0


def test_a_provider_serving_forged_chunks_with_made_up_proofs_fails(world: dict[str, Any]) -> None:
    a, b, _ = world["providers"]
    data = secrets.token_bytes(4 * CHUNK)
    key, commitment = _place(world, data, [a, b])
    # a replaces the object with other bytes of the same length and a sidecar built for them.
    forged = secrets.token_bytes(len(data))
    fake = s.commit(forged, CHUNK)
    a.s3.put_object(Bucket=a.bucket, Key=key, Body=forged)
    a.s3.put_object(Bucket=a.bucket, Key=key + PROOFS_SUFFIX, Body=s.proof_sidecar(forged, fake))
    world["clock"].advance(86400)
    report = world["challenger"].round()
    bad = next(o for o in report.outcomes if o.provider_key == a.key)
    assert not bad.passed and "committed root" in bad.reason


def test_no_copy_left_to_copy_from_is_recorded_not_hidden(world: dict[str, Any]) -> None:
    a, b, _ = world["providers"]
    key, _ = _place(world, secrets.token_bytes(3 * CHUNK), [a, b])
    for p in (a, b):
        p.s3.delete_object(Bucket=p.bucket, Key=key)
    world["clock"].advance(86400)
    report = world["challenger"].round()
    assert report.failed == 2
    reasons = [p["reason"] for p in _placements(world)]
    assert all("not re-replicated: no other copy verifies" in r for r in reasons), reasons


def test_the_job_budget_caps_what_all_its_copies_earn(world: dict[str, Any]) -> None:
    a, b, _ = world["providers"]
    _place(world, secrets.token_bytes(2 * CHUNK), [a, b], budget=3)
    world["clock"].advance(29 * 86400)
    world["challenger"].round()
    assert sum(r.amount for r in _accruals(world["oracle_engine"]).values()) == 3


def test_a_verdict_is_recorded_once(world: dict[str, Any]) -> None:
    a, b, _ = world["providers"]
    _place(world, secrets.token_bytes(2 * CHUNK), [a, b])
    challenger: Challenger = world["challenger"]
    from oracle.retrieval.feed import by_key

    placement = challenger.feed.active_placements()[0]
    offer = by_key(challenger.feed.offers())[placement.provider_key]
    challenge = challenger.challenge(placement)
    answer = challenger._fetch(offer, challenge)
    assert challenger.verdict(challenge, answer).passed
    # The same (valid) answer again: the challenge is spent, the replay is not a pass.
    replay = challenger.verdict(challenge, answer)
    assert not replay.passed and "already answered" in replay.reason
    from sqlmodel import Session

    with Session(world["oracle_engine"]) as session:
        row = session.get(StorageChallengeRecord, challenge.challenge_id)
        assert row is not None and row.passed is True


def test_a_private_endpoint_is_not_read_unless_the_operator_allows_it(
    world: dict[str, Any],
) -> None:
    a, b, _ = world["providers"]
    _place(world, secrets.token_bytes(2 * CHUNK), [a, b])
    challenger: Challenger = world["challenger"]
    strict = pinned_client(EgressPolicy(), allow_http=True)
    try:
        challenger.http = strict
        report = challenger.round()
    finally:
        strict.close()
    assert report.failed == 2
    assert all("refusing to connect" in o.reason for o in report.outcomes)


def test_the_oracle_refuses_unusable_retrieval_settings_at_start() -> None:
    from oracle.retrieval.service import RetrievalConfigError, retrieval_hook
    from proofnet.settings import build_settings

    settings = build_settings().model_copy(
        update={"oracle_storage_allow_networks": "not-a-network"}
    )
    with pytest.raises(RetrievalConfigError, match="PROOFNET_ORACLE_STORAGE_ALLOW_NETWORKS"):
        retrieval_hook(settings, SigningKey.generate())


def test_a_round_the_api_cannot_answer_records_nothing(world: dict[str, Any]) -> None:
    from sqlmodel import Session, select

    from oracle.retrieval.feed import PlacementFeedError
    from oracle.retrieval.service import run_round

    a, b, _ = world["providers"]
    _place(world, secrets.token_bytes(2 * CHUNK), [a, b])
    challenger: Challenger = world["challenger"]
    feed = challenger.feed
    assert isinstance(feed, HttpPlacementFeed)
    feed.key = SigningKey.generate()  # not an oracle key of this API
    with pytest.raises(PlacementFeedError, match="HTTP 403"):
        challenger.round()
    run_round(challenger)  # the scheduled job logs and waits for the next interval
    with Session(world["oracle_engine"]) as session:
        assert session.exec(select(StorageChallengeRecord)).all() == []


def test_the_oracle_writes_no_copy_to_an_endpoint_its_policy_refuses(
    world: dict[str, Any],
) -> None:
    # Reads are allowed (the copies to check and to copy from), writes go through a client
    # that refuses loopback: the replacement target is never written to.
    a, b, c = world["providers"]
    key, _ = _place(world, secrets.token_bytes(3 * CHUNK), [a, b])
    a.s3.delete_object(Bucket=a.bucket, Key=key)
    challenger: Challenger = world["challenger"]
    strict = pinned_client(EgressPolicy(), allow_http=True)
    try:
        challenger.writer = s3_writer(strict)
        world["clock"].advance(86400)
        report = challenger.round()
    finally:
        strict.close()
    bad = next(o for o in report.outcomes if not o.passed)
    assert bad.replacement_id is None
    failed = next(p for p in _placements(world) if p["id"] == bad.placement_id)
    assert "not re-replicated: no offer took the copy" in failed["reason"]
    listed = c.s3.list_objects_v2(Bucket=c.bucket)
    assert key not in [o["Key"] for o in listed.get("Contents", [])]


def test_a_copy_another_oracle_failed_stops_holding_its_jobs_escrow(
    world: dict[str, Any],
) -> None:
    from oracle.retrieval.ledger import StorageLedger

    a, b, _ = world["providers"]
    _place(world, secrets.token_bytes(2 * CHUNK), [a, b])
    challenger: Challenger = world["challenger"]
    world["clock"].advance(86400)
    challenger.round()
    ledger = StorageLedger(SigningKey.generate(), "devnet")
    from sqlmodel import Session

    with Session(world["oracle_engine"]) as session:
        assert len(ledger.held_jobs(session)) == 1  # both copies are within their term
    # Another oracle reports both copies failed (the API lists them no more).
    feed = challenger.feed
    for p in feed.active_placements():
        feed.report_failure(p.id, "failed another oracle's challenge", None)
    challenger.round()
    with Session(world["oracle_engine"]) as session:
        assert ledger.held_jobs(session) == set()
    # What they earned before stays payable.
    assert sum(r.amount for r in payable(world["oracle_engine"])) > 0
