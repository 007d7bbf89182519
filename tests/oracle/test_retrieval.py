"""Retrieval challenges played by the attacker, against real S3 servers (moto's, one per
provider, each on its own port) and the real API (in process, over its HTTP interface):
a provider that deletes the data fails three challenges in a row and is replaced; one that
serves bytes that do not verify is replaced at once; a flaky endpoint (down once) keeps its
copy and is paid only for the periods that ended in a pass; answered challenges pay
GB-months within the job's storage budget; a verdict is recorded once."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
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


DAY = 86400


@pytest.fixture
def moto_servers() -> Iterator[list[ThreadedMotoServer]]:
    servers = []
    try:
        for _ in range(3):
            server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            server.start()
            servers.append(server)
        yield servers
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def s3_servers(moto_servers: list[ThreadedMotoServer]) -> list[str]:
    return ["http://{}:{}".format(*srv.get_host_and_port()) for srv in moto_servers]


@pytest.fixture
def world(
    tmp_path: Path, s3_servers: list[str], moto_servers: list[ThreadedMotoServer]
) -> Iterator[dict[str, Any]]:
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
            "servers": moto_servers,
            "oracle_key": oracle_key,
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
    world["clock"].advance(7 * DAY)
    report = world["challenger"].round()
    assert (report.passed, report.failed) == (2, 0)
    world["clock"].advance(8 * DAY)  # half the term: a pass vouches for a week at most
    world["challenger"].round()
    accruals = _accruals(world["oracle_engine"])
    paid = {r.provider_key: r.amount for r in accruals.values()}
    assert paid[a.key] == 2 * s.storage_cost(len(data), 3_000_000, 7 * DAY)
    assert paid[b.key] == 2 * s.storage_cost(len(data), 1_000_000, 7 * DAY)
    assert all(r.status == ACCRUING for r in accruals.values())
    # The API shows what each copy earned, beside what the provider holds.
    shown = {p["provider_key"]: p["accrued_ntx"] for p in _placements(world)}
    assert shown == paid
    earnings = world["client"].get(f"/api/v1/storage/earnings/{b.key}").json()
    assert (earnings["accrued_ntx"], earnings["held_bytes"]) == (paid[b.key], len(data))
    # Weekly to the end of the term: the last stretch is paid, then nothing more is asked.
    for days in (7, 7, 8):
        world["clock"].advance(days * DAY)
        world["challenger"].round()
    accruals = _accruals(world["oracle_engine"])
    week = s.storage_cost(len(data), 1_000_000, 7 * DAY)
    last = s.storage_cost(len(data), 1_000_000, 2 * DAY)
    assert {r.provider_key: r.amount for r in accruals.values()}[b.key] == 4 * week + last
    assert all(r.status == ENDED for r in accruals.values())
    assert world["challenger"].round().outcomes == []


def test_a_provider_that_deletes_the_data_fails_is_not_paid_and_is_replaced(
    world: dict[str, Any],
) -> None:
    a, b, c = world["providers"]
    data = secrets.token_bytes(7 * CHUNK)
    key, commitment = _place(world, data, [a, b])
    a.s3.delete_object(Bucket=a.bucket, Key=key)  # keeps its proof sidecar, drops the data
    # Not serving is a strike (it could be the network): two in a row keep the copy.
    for strike in (1, 2):
        world["clock"].advance(3600)
        report = world["challenger"].round()
        bad = next(o for o in report.outcomes if not o.passed)
        assert (bad.strikes, bad.lost) == (strike, False)
        assert (
            next(p for p in _placements(world) if p["id"] == bad.placement_id)["status"] == "active"
        )  # noqa: E501
    world["clock"].advance(3600)
    report = world["challenger"].round()
    assert report.failed == 1 and report.passed == 1
    bad = next(o for o in report.outcomes if not o.passed)
    assert bad.provider_key == a.key and "did not serve the chunk" in bad.reason
    assert bad.lost and "3 failed challenges in a row" in bad.reason
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
    # Proof of a bad copy, not of a flaky network: lost at once, re-replicated to c.
    assert bad.lost and bad.replacement_id is not None
    rows = {p["id"]: p for p in _placements(world)}
    assert rows[bad.placement_id]["status"] == "failed"
    assert rows[bad.replacement_id]["provider_key"] == world["providers"][2].key
    assert _accruals(world["oracle_engine"])[bad.placement_id].amount == 0


def test_no_copy_left_to_copy_from_is_recorded_not_hidden(world: dict[str, Any]) -> None:
    a, b, _ = world["providers"]
    key, _ = _place(world, secrets.token_bytes(3 * CHUNK), [a, b])
    for p in (a, b):
        p.s3.delete_object(Bucket=p.bucket, Key=key)
    for _ in range(3):
        world["clock"].advance(3600)
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
        for _ in range(3):
            world["clock"].advance(3600)
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


def _outage(world: dict[str, Any], i: int) -> Callable[[], None]:
    """Stop provider `i`'s S3 server (its port refuses connections); the returned call
    brings it back on the same port (moto keeps the objects in this process)."""
    server: ThreadedMotoServer = world["servers"][i]
    host, port = server.get_host_and_port()
    server.stop()

    def restore() -> None:
        again = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
        again.start()
        world["servers"][i] = again

    return restore


def test_a_flaky_endpoint_keeps_its_copy_and_is_paid_only_for_periods_that_passed(
    world: dict[str, Any],
) -> None:
    a, b, _ = world["providers"]
    data = secrets.token_bytes(5 * CHUNK)
    _place(world, data, [a, b])
    week = s.storage_cost(len(data), 3_000_000, 7 * DAY)
    world["clock"].advance(7 * DAY)
    assert world["challenger"].round().failed == 0
    restore = _outage(world, 0)  # a's endpoint is down for one round
    try:
        world["clock"].advance(7 * DAY)
        report = world["challenger"].round()
    finally:
        restore()
    down = next(o for o in report.outcomes if o.provider_key == a.key)
    assert not down.passed and (down.strikes, down.lost) == (1, False)
    # The API shows the copy at risk (what `proofnet storage status` prints).
    shown = next(p for p in _placements(world) if p["provider_key"] == a.key)
    assert (shown["status"], shown["strikes"]) == ("active", 1)
    assert "did not serve the chunk" in shown["last_failure"]
    world["clock"].advance(7 * DAY)
    back = next(o for o in world["challenger"].round().outcomes if o.provider_key == a.key)
    assert back.passed
    row = next(r for r in _accruals(world["oracle_engine"]).values() if r.provider_key == a.key)
    # Weeks 1 and 3 ended in a pass; week 2 ended in the outage and is not paid.
    assert (row.amount, row.status, row.strikes) == (2 * week, ACCRUING, 0)
    assert [(p["status"], p["strikes"]) for p in _placements(world)] == [("active", 0)] * 2


def test_receipts_of_real_challenges_verify_for_a_co_signer(world: dict[str, Any]) -> None:
    import hashlib

    from sqlmodel import Session

    from oracle.retrieval.ledger import StorageLedger
    from proofnet.messages.storage_receipt import receipt_refusal

    a, b, _ = world["providers"]
    data = secrets.token_bytes(9 * CHUNK + 3)
    _place(world, data, [a, b])
    for _ in range(5):  # weekly, then past the term's end
        world["clock"].advance(7 * DAY)
        world["challenger"].round()
    key = world["oracle_key"]
    ledger = StorageLedger(key, "devnet")
    signer = hashlib.blake2b(bytes(key.verify_key), digest_size=28).hexdigest()
    job = next(iter(_accruals(world["oracle_engine"]).values())).job_id
    with Session(world["oracle_engine"]) as session:
        receipts = ledger.receipts(session, job)
    assert len(receipts) == 2
    for r in receipts:
        assert r.body.challenges_passed == 5
        assert receipt_refusal(r, job_id=job, oracle_key_hashes={signer}) is None
        accrued = _accruals(world["oracle_engine"])[r.body.placement_id].amount
        assert 0 < r.body.amount <= accrued


def test_a_job_verified_before_any_round_waits_for_its_copies_as_the_api_lists_them(
    world: dict[str, Any],
) -> None:
    from sqlmodel import Session

    from oracle.retrieval.ledger import HoldPolicy, StorageLedger

    a, b, _ = world["providers"]
    _place(world, secrets.token_bytes(2 * CHUNK), [a, b])
    challenger: Challenger = world["challenger"]
    clock = world["clock"]
    ledger = StorageLedger(
        world["oracle_key"],
        "devnet",
        source=challenger.feed,  # type: ignore[arg-type]
        policy=HoldPolicy(placement_grace_s=600, final_round_grace_s=3600),
        clock=lambda: clock().timestamp(),
    )
    job = _placements(world)[0]["job_id"]
    now = clock().timestamp()
    with Session(world["oracle_engine"]) as session:
        # No challenge round has run: the copies are learned from the API and hold the job.
        assert ledger.held_jobs(session, {job: now}) == {job}
        session.commit()
    assert len(_accruals(world["oracle_engine"])) == 2
    # Past the term and the grace for its last round (no round ever ran): settled with
    # what was proven, which is nothing.
    clock.advance(31 * DAY)
    with Session(world["oracle_engine"]) as session:
        assert ledger.held_jobs(session, {job: now}) == set()
        session.commit()
    assert {r.status for r in _accruals(world["oracle_engine"]).values()} == {ENDED}


def test_a_job_that_keeps_storage_waits_a_grace_period_for_its_first_copy(
    world: dict[str, Any],
) -> None:
    from sqlmodel import Session

    from oracle.retrieval.ledger import HoldPolicy, StorageLedger

    client: TestClient = world["client"]
    spec = job_spec(seed=1)
    spec["results"] = [{"path": "out/*.json", "kind": "json"}]
    spec["storage"] = {"kinds": ["results"], "replicas": 1, "term_days": 1,
                       "max_ntx_per_gb_month": 5_000_000, "budget": 10}  # fmt: skip
    kept = client.post("/api/v1/jobs", json={"spec": spec}, headers=world["auth"]).json()["job_id"]
    plain = client.post(
        "/api/v1/jobs", json={"spec": job_spec(seed=2)}, headers=world["auth"]
    ).json()["job_id"]  # noqa: E501
    clock = world["clock"]
    ledger = StorageLedger(
        world["oracle_key"],
        "devnet",
        source=world["challenger"].feed,
        policy=HoldPolicy(placement_grace_s=600),
        clock=lambda: clock().timestamp(),
    )
    queued = clock().timestamp()
    with Session(world["oracle_engine"]) as session:
        assert ledger.held_jobs(session, {kept: queued, plain: queued}) == {kept}
        clock.advance(601)
        assert ledger.held_jobs(session, {kept: queued, plain: queued}) == set()
    # The API unreadable: nothing is taken for "no storage", every candidate waits.
    world["challenger"].feed.key = SigningKey.generate()
    with Session(world["oracle_engine"]) as session:
        assert ledger.held_jobs(session, {kept: queued}) == {kept}


def test_a_cosigner_reads_a_beacons_block_by_hash_and_cannot_check_is_never_checked() -> None:
    """`chain_block_time` over a Blockfrost-shaped API: a known block gives its time, an
    unknown hash (a ground beacon) none, an answer for another block or a chain that does
    not answer raises (the co-signer refuses: docs/storage.md)."""
    import httpx

    from oracle.retrieval.blocks import BlockReadError, chain_block_time

    real, other = "ab" * 32, "cd" * 32
    state = {"down": False, "lie": False}

    def answer(request: httpx.Request) -> httpx.Response:
        if state["down"]:
            return httpx.Response(503)
        asked = request.url.path.rsplit("/", 1)[-1]
        if asked != real:
            return httpx.Response(404, json={"status_code": 404})
        return httpx.Response(200, json={"hash": other if state["lie"] else real, "time": 1234})

    block_time = chain_block_time(httpx.Client(transport=httpx.MockTransport(answer)), "http://c")
    assert block_time(real) == 1234
    assert block_time(other) is None
    assert block_time("not hex") is None
    state["lie"] = True
    with pytest.raises(BlockReadError, match="another block"):
        block_time(real)
    state["down"] = True
    with pytest.raises(BlockReadError, match="cannot read"):
        block_time(real)
