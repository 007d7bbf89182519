"""The chain watcher on a running devnet: what it records, what it refuses to, and how it
survives restarts, rollbacks and a second watcher.

One deployment per module (later tests see earlier tests' transactions, as a real watcher
would); each test has its own API database. The rollback tests pause and rewrite the
chain, so they come last.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from api_support import FakeClock, Wallet, job_spec, sign_in
from fastapi.testclient import TestClient
from pycardano import UTxO
from sqlalchemy import Engine, func
from sqlmodel import Session, col, select
from web_fixtures import ProtocolWorld, protocol_world
from web_fixtures import wallet as key_wallet

from api.app import create_app
from api.clock import utcnow
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.models import ChainMovement, ChainWatchCursor, NotificationDelivery
from api.services.balances import recorded_movements
from api.services.chain_watch import ChainWatch, PassReport, WatchConfig
from api.services.users import add_senior
from chain.offchain.builders import assembly as A
from chain.offchain.builders.lock import lock_escrows
from chain.offchain.builders.onchain import out_ref_text
from chain.offchain.builders.refund import build_cancel, build_refund
from chain.offchain.builders.settle import Settlement, build_settle_batch
from chain.offchain.follow.classify import SLASH, Movement
from chain.offchain.follow.model import BlockPoint, ChainTx, FollowStep
from chain.offchain.follow.reader import follower_for

PASS_TIMEOUT_S = 90.0

pytestmark = pytest.mark.slow  # a devnet, a deployment and a few dozen transactions


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProtocolWorld]:
    with protocol_world(tmp_path_factory.mktemp("watch"), providers=3) as w:
        yield w


@dataclass
class Api:
    client: TestClient
    engine: Engine
    owner: Wallet
    auth: dict[str, str]

    def post_job(self) -> str:
        # Priced and sized so that every escrow this module locks can pay it: the API records
        # only escrows whose budget covers the price and whose deadline leaves time to run.
        spec = job_spec()
        spec["pricing"]["amount"] = 100
        spec["resources"]["max_duration_s"] = 600
        posted = self.client.post("/api/v1/jobs", json={"spec": spec}, headers=self.auth)
        assert posted.status_code == 201, posted.text
        return str(posted.json()["job_id"])

    def record_escrow(self, job_id: str, escrow: UTxO) -> None:
        ref = escrow.input
        recorded = self.client.post(
            f"/api/v1/jobs/{job_id}/escrow",
            json={"tx_id": str(ref.transaction_id), "index": ref.index},
            headers=self.auth,
        )
        assert recorded.status_code == 200, recorded.text

    def subscribe(self) -> None:
        hook = self.client.put(
            "/api/v1/notifications/webhook",
            json={"url": "http://127.0.0.1:9/hook"},
            headers=self.auth,
        )
        assert hook.status_code == 200, hook.text


@contextlib.contextmanager
def api_for(world: ProtocolWorld, url: str, **config_overrides: Any) -> Iterator[Api]:
    engine = make_engine(url)
    config = ApiConfig(
        database_url=url,
        network="devnet",
        rate_limit_per_minute=100_000,
        settlement_window_s=600,
        **config_overrides,
    )
    app = create_app(config=config, engine=engine, clock=FakeClock(), run_sweeper=False)
    app.state.run_notifier = False  # deliveries stay in the outbox, where the test reads them
    app.state.chain_context = world.context
    app.state.deployment = world.deployment
    try:
        with TestClient(app) as client:
            # The job owner is the world's submitter: the API records only escrows whose datum
            # names the job's owner (their refund and remainder go back to them).
            owner = Wallet(world.submitter.signing_key)
            with open_session(engine) as s:
                add_senior(s, config, owner.address, FakeClock()())
            yield Api(client, engine, owner, sign_in(client, owner))
    finally:
        engine.dispose()


@pytest.fixture
def api(world: ProtocolWorld, tmp_path: Path) -> Iterator[Api]:
    with api_for(world, f"sqlite:///{tmp_path / 'api.db'}") as a:
        yield a


def watcher(
    world: ProtocolWorld, engine: Engine, *, confirmations: int = 1, **kw: Any
) -> ChainWatch:
    return ChainWatch(
        engine,
        kw.pop("follower", None) or follower_for(world.context),
        world.deployment,
        clock=kw.pop("clock", utcnow),
        config=WatchConfig(confirmations=confirmations, lease_ttl_s=kw.pop("ttl", 60.0)),
        **kw,
    )


def pass_until(watch: ChainWatch, done: Callable[[PassReport], bool]) -> PassReport:
    """Run passes until `done(report)`: waits on the record, never on a fixed time."""
    deadline = time.monotonic() + PASS_TIMEOUT_S
    while True:
        report = watch.run_once()
        if done(report):
            return report
        if time.monotonic() > deadline:
            raise AssertionError(f"the watcher did not get there: last pass {report}")
        time.sleep(0.1)


def rows(engine: Engine, **where: Any) -> list[ChainMovement]:
    with Session(engine) as s:
        stmt = select(ChainMovement).order_by(
            col(ChainMovement.block_height), col(ChainMovement.output_index)
        )
        for name, value in where.items():
            stmt = stmt.where(getattr(ChainMovement, name) == value)
        return list(s.exec(stmt).all())


def deliveries(engine: Engine) -> list[NotificationDelivery]:
    with Session(engine) as s:
        return list(s.exec(select(NotificationDelivery).order_by(NotificationDelivery.id)).all())


def lock(
    world: ProtocolWorld,
    job_id: str,
    budget: int,
    *,
    by: Any = None,
    **job: Any,
) -> UTxO:
    """Lock an escrow whose datum names `job_id` (by the world's submitter by default)."""
    wallet = by or world.submitter
    spec = dataclasses.replace(
        world.job(budget, submitter=wallet, **job), job_id=bytes.fromhex(job_id)
    )
    result = lock_escrows(world.context, world.deployment, [spec], wallet, min_margin_ms=1_000)
    world.devnet.wait_for_tx(result.tx_id)
    (escrow,) = world.utxos_of(result.tx_id, world.deployment.escrow_address, 1)
    return escrow


def settle(world: ProtocolWorld, settlements: Sequence[Settlement]) -> str:
    quorum = world.oracle_quorum
    batch = build_settle_batch(
        world.context,
        world.deployment,
        list(settlements),
        b"\x11" * 32,
        b"watch",
        [o.pkh for o in quorum],
        quorum[0].address,
    )
    return world.submit(A.sign(batch.built, [o.signing_key for o in quorum]))


def recorded(engine: Engine, tx_hash: str) -> Callable[[PassReport], bool]:
    return lambda _report: bool(rows(engine, tx_hash=tx_hash))


# --- what is recorded -----------------------------------------------------------------------


def test_a_settlement_is_recorded_with_its_block_and_notified_once(
    world: ProtocolWorld, api: Api
) -> None:
    api.subscribe()
    job_id = api.post_job()
    escrow = lock(world, job_id, 1_000)
    api.record_escrow(job_id, escrow)
    provider = world.providers[0]
    tx_id = settle(world, [Settlement(escrow, ((provider.address, 700),))])

    watch = watcher(world, api.engine, confirmations=2)
    pass_until(watch, lambda _r: bool(deliveries(api.engine)))
    header = world.context.api.transaction(tx_id, return_type="json")
    got = rows(api.engine, tx_hash=tx_id)
    assert [(r.kind, r.action, r.address, r.ntx) for r in got] == [
        ("payout", "settle", str(provider.address), 700),
        ("refund", "settle", str(world.submitter.address), 300),
    ]
    for r in got:
        assert (r.block_height, r.block_hash, r.slot) == (
            header["block_height"],
            header["block"],
            header["slot"],
        )
        assert (r.job_id, f"{r.escrow_tx_id}#{r.escrow_index}") == (
            job_id,
            out_ref_text(escrow.input),
        )
        assert r.notified_at is not None
    (delivery,) = deliveries(api.engine)
    assert delivery.event == "job.settled"
    assert delivery.payload["tx_hash"] == tx_id and delivery.payload["job_id"] == job_id
    assert (delivery.payload["paid_ntx"], delivery.payload["refunded_ntx"]) == (700, 300)

    for _ in range(3):
        watch.run_once()
    assert len(deliveries(api.engine)) == 1  # once per settlement, however many passes
    assert len(rows(api.engine, tx_hash=tx_id)) == 2

    # Balances read the record: the provider's payout and the submitter's remainder, each
    # with its transaction and confirmations (signed in with the address's payment key).
    paid = balance_of(api, provider.signing_key, str(provider.address))
    assert paid["earned"]["ntx"] >= 700
    (payout,) = [p for p in paid["payouts"] if p["tx_hash"] == tx_id]
    assert payout["amount"] == 700 and payout["kind"] == "payout"
    assert payout["block_height"] == header["block_height"] and payout["confirmations"] >= 2
    back = balance_of(api, world.submitter.signing_key, str(world.submitter.address))
    (refund,) = [r for r in back["refunds"] if r["tx_hash"] == tx_id]
    assert (refund["amount"], refund["action"], refund["job_id"]) == (300, "settle", job_id)
    assert back["refunded"]["ntx"] >= 300


def balance_of(api: Api, key: Any, address: str) -> dict[str, Any]:
    auth = sign_in(api.client, Wallet(key))
    got = api.client.get(f"/api/v1/balances/{address}", headers=auth)
    assert got.status_code == 200, got.text
    return dict(got.json())


def test_a_forged_settlement_is_not_earnings(world: ProtocolWorld, api: Api) -> None:
    """A 'proofnet settlement' memo with a payment to a provider spends no escrow, and an
    escrow of a token that only calls itself NTX is not this deployment's: neither shows up,
    while an honest settlement made meanwhile does (the watcher did look)."""
    from pycardano import MultiAsset

    from chain.offchain.builders.mint import mint_test_ntx
    from chain.offchain.builders.settle import batch_metadata

    outsider = key_wallet(402)
    world.fund(outsider)
    minted_tx, minted = mint_test_ntx(world.context, outsider, outsider.address, 9_000, b"NTX")
    world.devnet.wait_for_tx(minted_tx)
    provider = world.providers[1]
    fake = MultiAsset.from_primitive({minted.policy_id: {b"NTX": 5_000}})
    plan = A.TxPlan(
        change_address=outsider.address,
        outputs=[A.output_with_min_ada(world.context, provider.address, fake)],
        metadata=batch_metadata(b"batch-forged", b"\x11" * 32, b"\x22" * 32, 1),
    )
    built = A.finalize(world.context, plan, outsider.utxos(world.context))
    forged = world.submit(A.sign(built, [outsider.signing_key]))

    job_id = api.post_job()
    escrow = lock(world, job_id, 400)
    honest = settle(world, [Settlement(escrow, ((provider.address, 400),))])
    watch = watcher(world, api.engine)
    pass_until(watch, recorded(api.engine, honest))
    assert rows(api.engine, tx_hash=forged) == []
    mine = {r.tx_hash for r in rows(api.engine, address=str(provider.address))}
    assert honest in mine and forged not in mine


def test_an_escrow_for_someone_elses_job_does_not_notify_them(
    world: ProtocolWorld, api: Api
) -> None:
    """Anyone can lock an escrow naming a job id and later take it back. The refund is a
    fact of the chain (recorded, to the outsider), but the job's owner hears only of the
    escrow they recorded: their own cancel notifies them, the outsider's refund does not."""
    api.subscribe()
    job_id = api.post_job()
    outsider = key_wallet(403)
    world.fund(outsider)
    world.mint_ntx(outsider.address, 1_000)
    theirs = lock(world, job_id, 600, by=outsider, deadline_in_ms=8_000)
    mine = lock(world, job_id, 900, cancel_until_in_ms=600_000)
    api.record_escrow(job_id, mine)

    quorum = world.oracle_quorum
    cancel = build_cancel(
        world.context, world.deployment, [mine], [o.pkh for o in quorum], world.submitter.address
    )
    cancelled = world.submit(
        A.sign(cancel.built, [world.submitter.signing_key, *(o.signing_key for o in quorum)])
    )
    world.wait_until_chain_ms(theirs_deadline(theirs) + 1_000)
    refund = build_refund(world.context, world.deployment, [theirs], outsider.address)
    refunded = world.submit(A.sign(refund.built, [outsider.signing_key]))

    watch = watcher(world, api.engine)
    pass_until(
        watch,
        lambda _r: (
            all(
                r.notified_at is not None
                for tx in (cancelled, refunded)
                for r in rows(api.engine, tx_hash=tx)
            )
            and bool(rows(api.engine, tx_hash=refunded))
        ),
    )
    (outsiders,) = rows(api.engine, tx_hash=refunded)
    assert (outsiders.kind, outsiders.address, outsiders.job_id) == (
        "refund",
        str(outsider.address),
        job_id,
    )
    (delivery,) = deliveries(api.engine)
    assert delivery.event == "job.refunded" and delivery.payload["tx_hash"] == cancelled
    assert delivery.payload["action"] == "cancel" and delivery.payload["refunded_ntx"] == 900


def theirs_deadline(escrow: UTxO) -> int:
    import cbor2

    from chain.offchain.builders.onchain import datum_cbor

    return int(cbor2.loads(datum_cbor(escrow.output.datum)).value[7])


class SlashEverySettlement:
    """A stand-in for the bond classifier (issue 14's bond validator is not written): it
    names no script of its own and calls the change output of each escrow transaction a
    slash of its receiver. Only the seam is under test: kind, record, readers."""

    def scripts(self, deployment: Any) -> tuple[str, ...]:
        return ()

    def __call__(self, tx: ChainTx, deployment: Any) -> tuple[Movement, ...]:
        last = tx.outputs[-1]
        return (
            Movement(
                kind=SLASH,
                action="slash",
                escrow_ref=tx.inputs[0].ref,
                job_id="",
                tx_hash=tx.hash,
                output_index=last.index,
                address=str(last.address),
                lovelace=0,
                ntx=1,
            ),
        )


def test_a_plugged_in_classifier_records_slashes(world: ProtocolWorld, api: Api) -> None:
    from chain.offchain.follow.classify import DEFAULT_CLASSIFIERS

    job_id = api.post_job()
    escrow = lock(world, job_id, 200)
    tx_id = settle(world, [Settlement(escrow, ((world.providers[2].address, 200),))])
    watch = watcher(world, api.engine, classifiers=(*DEFAULT_CLASSIFIERS, SlashEverySettlement()))
    pass_until(watch, recorded(api.engine, tx_id))
    kinds = sorted(r.kind for r in rows(api.engine, tx_hash=tx_id))
    assert kinds == ["payout", "refund", "slash"]
    (slash,) = rows(api.engine, tx_hash=tx_id, kind=SLASH)
    assert slash.notified_at is None  # a slash is no job's settlement or refund
    with Session(api.engine) as s:
        earned, _refunded, slashed, *_ = recorded_movements(
            s, [slash.address], network="devnet", devnet_url=world.devnet.url
        )
    assert slashed.ntx is not None and slashed.ntx >= 1


def test_worker_status_shows_the_payout_with_its_transaction(
    world: ProtocolWorld, api: Api, tmp_path: Path
) -> None:
    """The provider's side end to end: a worker registered with its payout address, a real
    settlement paying that address, the watcher's pass, then `proofnet worker status`
    (a separate process, over HTTP) shows the payout with its transaction."""
    from api_support import Worker

    from chain.devnet.testing import serve_app
    from worker.identity import create_key

    provider = world.providers[2]  # an enterprise address: what Wallet registers
    key = create_key(tmp_path / "worker.skey")
    worker = Worker(api.client, key=key.signing_key)
    worker.register([("NVIDIA A100 80GB", 81920)], payout=Wallet(provider.signing_key))
    job_id = api.post_job()
    escrow = lock(world, job_id, 650)
    api.record_escrow(job_id, escrow)
    tx_id = settle(world, [Settlement(escrow, ((provider.address, 650),))])
    pass_until(watcher(world, api.engine), recorded(api.engine, tx_id))

    with serve_app(api.client.app) as url:  # type: ignore[arg-type]
        argv = [
            sys.executable,
            "-m",
            "proofnet.cli",
            "worker",
            "status",
            "--api-url",
            url,
            "--key-file",
            str(key.path),
            "--network",
            "devnet",
        ]
        shown = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        as_json = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert f"payout address   {provider.address}" in shown.stdout
    assert f"tx {tx_id}" in shown.stdout and "650 NTX" in shown.stdout
    body = json.loads(as_json.stdout)
    (payout,) = [p for p in body["payouts"] if p["tx_hash"] == tx_id]
    assert (payout["amount"], payout["job_id"], payout["kind"]) == (650, job_id, "payout")
    assert body["earned"]["ntx"] >= 650 and body["recorded_to_block"] >= payout["block_height"]

    # Another worker's key sees its own address only; an unregistered key is refused.
    stranger = Worker(api.client)
    assert stranger.request("GET", "/api/v1/worker/earnings").status_code == 403


def test_the_app_runs_the_watcher_and_gives_its_lease_up_on_shutdown(
    world: ProtocolWorld, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'served.db'}"
    with api_for(world, url, chain_watch=True, chain_watch_interval_s=0.2) as a:
        job_id = a.post_job()
        escrow = lock(world, job_id, 350)
        tx_id = settle(world, [Settlement(escrow, ((world.providers[0].address, 350),))])
        deadline = time.monotonic() + PASS_TIMEOUT_S
        while not rows(a.engine, tx_hash=tx_id):
            assert time.monotonic() < deadline, "the app's watcher recorded nothing"
            time.sleep(0.2)
        engine_url = str(a.engine.url)
    engine = make_engine(engine_url)
    try:
        with Session(engine) as s:
            cursor = s.get(ChainWatchCursor, world.deployment.batch_hash)
            assert cursor is not None and cursor.lease_expires_at is not None
            expires = cursor.lease_expires_at
        assert expires.replace(tzinfo=None) <= utcnow().replace(tzinfo=None)
    finally:
        engine.dispose()


# --- restarts and a second watcher ----------------------------------------------------------


def test_a_restart_resumes_from_the_cursor_without_duplicates(
    world: ProtocolWorld, api: Api, tmp_path: Path
) -> None:
    job_id = api.post_job()
    first_escrow = lock(world, job_id, 300)
    first = settle(world, [Settlement(first_escrow, ((world.providers[0].address, 300),))])
    before = watcher(world, api.engine)
    pass_until(before, recorded(api.engine, first))
    count = len(rows(api.engine))
    with Session(api.engine) as s:
        cursor = s.get(ChainWatchCursor, world.deployment.batch_hash)
        assert cursor is not None and cursor.height is not None
        height = cursor.height
    before.release()  # the process stops

    # A new process (its own engine on the same database file, its own watcher) resumes.
    engine = make_engine(str(api.engine.url))
    try:
        after = watcher(world, engine)
        report = after.run_once()
        assert report.held and report.recorded == 0 and len(rows(engine)) == count
        assert report.cursor is not None and report.cursor >= height
        second_escrow = lock(world, job_id, 300)
        second = settle(world, [Settlement(second_escrow, ((world.providers[1].address, 300),))])
        pass_until(after, recorded(engine, second))
        assert len(rows(engine)) == count + 2
        assert len(rows(engine, tx_hash=first)) == 2
    finally:
        engine.dispose()


class Stalling:
    """A follower that lets a test act in the middle of a pass (after the chain was read,
    before the step is written)."""

    def __init__(self, inner: Any, during: Callable[[], None]) -> None:
        self.inner = inner
        self.during = during

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def follow(
        self, known: Sequence[BlockPoint], scripts: Sequence[str], start: BlockPoint
    ) -> FollowStep:
        step = self.inner.follow(known, scripts, start)
        self.during()
        return step


@pytest.mark.postgres
def test_two_watchers_on_postgres_record_each_output_once(
    world: ProtocolWorld, postgres_url: str
) -> None:
    with api_for(world, postgres_url) as a:
        job_id = a.post_job()
        escrow = lock(world, job_id, 500)
        tx_id = settle(world, [Settlement(escrow, ((world.providers[0].address, 500),))])
        other_engine = make_engine(postgres_url)
        try:
            watches = [watcher(world, a.engine), watcher(world, other_engine)]
            reports: list[list[PassReport]] = [[], []]
            stop = threading.Event()

            def loop(i: int) -> None:
                while not stop.is_set():
                    reports[i].append(watches[i].run_once())

            threads = [threading.Thread(target=loop, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            try:
                deadline = time.monotonic() + PASS_TIMEOUT_S
                while not rows(a.engine, tx_hash=tx_id) and time.monotonic() < deadline:
                    time.sleep(0.1)
                # A few more passes of both, racing.
                target = [len(r) + 3 for r in reports]
                while any(len(r) < n for r, n in zip(reports, target, strict=True)):
                    time.sleep(0.05)
            finally:
                stop.set()
                for t in threads:
                    t.join(timeout=60)
            assert len(rows(a.engine, tx_hash=tx_id)) == 2
            with Session(a.engine) as s:
                pairs = s.exec(
                    select(ChainMovement.tx_hash, ChainMovement.output_index, func.count())
                    .group_by(col(ChainMovement.tx_hash), col(ChainMovement.output_index))
                    .having(func.count() > 1)
                ).all()
            assert pairs == []
            held = [sum(r.held for r in rs) for rs in reports]
            assert min(held) == 0 and max(held) > 0  # one watched, the other waited

            # A watcher that loses its lease in the middle of a pass writes nothing.
            for w in watches:
                w.release()
            clock, late = FakeClock(), FakeClock()
            clock.advance(5)
            late.advance(3600)
            thief = watcher(world, other_engine, clock=late, ttl=30.0)
            victim = watcher(
                world,
                a.engine,
                clock=clock,
                ttl=30.0,
                follower=Stalling(follower_for(world.context), lambda: thief.acquire(late())),
            )
            count = len(rows(a.engine))
            assert victim.run_once().held is False
            assert len(rows(a.engine)) == count
            with Session(a.engine) as s:
                cursor = s.get(ChainWatchCursor, world.deployment.batch_hash)
                assert cursor is not None and cursor.holder == thief.holder
        finally:
            other_engine.dispose()


# --- rollbacks (last: they rewrite the chain) -----------------------------------------------


def test_a_rollback_removes_the_record_and_the_rescan_restores_it(
    world: ProtocolWorld, api: Api
) -> None:
    api.subscribe()
    job_id = api.post_job()
    escrow = lock(world, job_id, 800)
    api.record_escrow(job_id, escrow)
    tx_id = settle(world, [Settlement(escrow, ((world.providers[2].address, 800),))])
    watch = watcher(world, api.engine)
    pass_until(watch, lambda _r: bool(deliveries(api.engine)))
    (before,) = rows(api.engine, tx_hash=tx_id, kind="payout")

    devnet = world.devnet
    devnet.admin("pause")
    try:
        devnet.admin("rollback", {"from_height": before.block_height, "drop": False})
        report = watch.run_once()
        assert report.rolled_back and report.removed >= 1
        assert rows(api.engine, tx_hash=tx_id) == []
    finally:
        devnet.admin("resume")
    devnet.wait_for_tx(tx_id)  # the same transaction, in a new block
    pass_until(watch, recorded(api.engine, tx_id))
    (after,) = rows(api.engine, tx_hash=tx_id, kind="payout")
    assert (after.kind, after.ntx, after.address) == (before.kind, before.ntx, before.address)
    assert after.block_hash != before.block_hash
    for _ in range(2):
        watch.run_once()
    assert len(deliveries(api.engine)) == 1  # rolled back and restored: still one notice


def test_a_rollback_that_drops_the_settlement_forgets_it(world: ProtocolWorld, api: Api) -> None:
    job_id = api.post_job()
    escrow = lock(world, job_id, 100)
    tx_id = settle(world, [Settlement(escrow, ((world.providers[0].address, 100),))])
    watch = watcher(world, api.engine)
    pass_until(watch, recorded(api.engine, tx_id))
    (row, _rest) = rows(api.engine, tx_hash=tx_id)
    world.devnet.admin("rollback", {"from_height": row.block_height, "drop": True})
    report = pass_until(watch, lambda r: r.held and r.removed > 0)
    assert report.rolled_back
    for _ in range(2):
        watch.run_once()
    assert rows(api.engine, tx_hash=tx_id) == []
