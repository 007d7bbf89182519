"""Topology jobs settled on a real devnet with the real builders and scripts: the oracle's
intake verifies real signed unit attestations against real escrows (chaining each stage to
the checkpoint of the stage before), the engine settles each escrow once when its job is
over, with one payout output per verified unit and the rest refunded to the submitter's
exact address, and `proofnet audit --tx` says OK. A stopped pipeline pays the stages and
the evaluation it ran and refunds the rest. Hand-built settlements that pay a stage less
than attested, or whose bundle holds a stage not chained to its predecessor, are named by
the audit and refused by a co-signer."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Response
from sqlalchemy.engine import Engine
from typer.testing import CliRunner
from unit_fixtures import (
    EVAL_AMOUNT,
    STAGE_AMOUNT,
    UnitWorld,
    make_unit_world,
    relay_topology,
)

import oracle.settlement.models  # noqa: F401  (registers the settlement tables)
from auditor import audit as au
from chain.devnet.testing import running_devnet, serve_app
from oracle.inputs.chain import chain_view_for
from oracle.intake.accept import Intake
from oracle.metrics import OracleMetrics
from oracle.service import escrow_script_hash
from oracle.settlement import scenario as sc
from oracle.settlement.audit import settlement_tx_of
from oracle.settlement.builder_port import CardanoSettlementBuilder
from oracle.settlement.bundle import audit_metadata, make_bundle
from oracle.settlement.chain_view import BlockfrostChainView
from oracle.settlement.engine import BatchPolicy, SettlementEngine
from oracle.settlement.intents import IntentLog
from oracle.settlement.ports import Annotation, Claim, UnsignedBatch
from oracle.settlement.queue import AttestationQueue
from oracle.settlement.quorum import CoSigner, IntakeVerifier, QuorumRefusal, SignatureVerifier
from oracle.settlement.readiness import JobEndReadiness, ReadinessPolicy
from oracle.settlement.watcher import WatchConfig
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from proofnet.messages.attestation import EscrowRef, sign_attestation
from proofnet.messages.unit_chain import UNIT_INPUT_NOT_CHAINED


@dataclasses.dataclass
class Devnet:
    api: sc.Devnet
    scenario: sc.Scenario
    bundles: dict[str, bytes]  # served at /api/v1/bundles/{sha256} by `oracle_url`
    oracle_url: str
    deployment_file: Path

    @property
    def unit(self) -> str:
        return self.scenario.ntx_policy + sc.NTX_NAME.hex()


def _bundle_app(bodies: dict[str, bytes]) -> FastAPI:
    app = FastAPI()

    @app.get("/api/v1/bundles/{sha256}")
    def bundle(sha256: str) -> Response:
        if sha256 not in bodies:
            return Response(status_code=404)
        return Response(bodies[sha256], media_type="application/json")

    return app


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    tmp = tmp_path_factory.mktemp("units-devnet")
    with running_devnet(tmp, block_time=0.2) as running:
        api = sc.Devnet(running.url)
        # Two oracle keys, threshold 1: the engine signs alone, the co-signer test names both.
        scenario = sc.setup(api, oracles=2, threshold=1, tag="units-devnet")
        assert scenario.deployment.escrow_hash == escrow_script_hash()
        deployment_file = tmp / "deployment.json"
        deployment_file.write_text(scenario.deployment.to_json())
        bodies: dict[str, bytes] = {}
        with serve_app(_bundle_app(bodies)) as url:
            yield Devnet(api, scenario, bodies, url, deployment_file)


@dataclasses.dataclass
class Oracle:
    db: Engine
    store: AttestationStore
    intake: Intake
    engine: SettlementEngine


def _locked_world(
    devnet: Devnet, topology: dict[str, object], extra: int, store: AttestationStore | None = None
) -> UnitWorld:
    """A topology job whose escrow (its price + `extra` NTX) is locked on the devnet."""
    world = make_unit_world(store, topology)
    ((ref, _job),) = sc.lock(
        devnet.scenario,
        1,
        budget=world.total + extra,
        job_ids=[bytes.fromhex(world.job_id)],
        nonce_base=int(world.job_id[:6], 16),
    )
    world.escrow = EscrowRef(tx_id=ref.tx_id, index=ref.index)
    world.set_job(escrow=world.escrow)
    world.chain = chain_view_for(devnet.scenario.devnet.context(), ttl_s=0.0)  # type: ignore[assignment]
    return world


def _oracle(tmp_path: Path, devnet: Devnet, world: UnitWorld) -> Oracle:
    db = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
    store = AttestationStore(db)
    store.create_schema()
    world.store = store
    context = world.context(ntx_policy=devnet.scenario.ntx_policy)
    intake = Intake(store, context, OracleMetrics(), inline=True)
    chain = BlockfrostChainView(devnet.api.url)
    builder = CardanoSettlementBuilder(
        devnet.api.context(), devnet.scenario.deployment, devnet.scenario.oracle_keys[0]
    )
    engine = SettlementEngine(
        IntentLog(db, AttestationQueue()),
        chain,
        builder,
        policy=BatchPolicy(batch_size=8, max_wait_s=0),
        watch=WatchConfig(confirmation_depth=1),
        proposer="units-devnet",
        readiness=JobEndReadiness(world.feed, chain, db, ReadinessPolicy(recheck_s=0.0)),
    )
    return Oracle(db, store, intake, engine)


def _run_units(oracle: Oracle, world: UnitWorld, done: dict[int, dict[str, int | str]]) -> None:
    """Complete the units (with their metrics) in order, each attested and verified."""
    for index, metrics in done.items():
        world.complete(index, metrics=metrics)
        accepted = oracle.intake.accept(world.sign(index))
        assert accepted.record.status == "verified", accepted.record


def _settle(oracle: Oracle, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        statuses = {r.status for r in oracle.store.for_job(_job_of(oracle))}
        if statuses == {"settled"}:
            break
        assert time.monotonic() < deadline, f"not settled: {statuses}"
        oracle.engine.tick()
        time.sleep(0.1)
    (intent,) = [i for i in _intents(oracle) if i.state == "confirmed"]
    assert intent.tx_id is not None
    return intent.tx_id


def _job_of(oracle: Oracle) -> str:
    from sqlmodel import Session, select

    from oracle.models import AttestationRecord

    with Session(oracle.db) as session:
        row = session.exec(select(AttestationRecord)).first()
        assert row is not None
        return row.job_id


def _intents(oracle: Oracle) -> list:  # type: ignore[type-arg]
    from sqlmodel import Session, select

    from oracle.settlement.models import SettlementIntent

    with Session(oracle.db) as session:
        return list(session.exec(select(SettlementIntent)).all())


def _ntx_outputs(devnet: Devnet, tx_id: str) -> list[tuple[str, int]]:
    utxos = httpx.get(f"{devnet.api.url}/txs/{tx_id}/utxos", timeout=30).json()
    return [
        (o["address"], int(a["quantity"]))
        for o in utxos["outputs"]
        for a in o["amount"]
        if a["unit"] == devnet.unit
    ]


def _audit_cli(devnet: Devnet, tx_id: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        au.app,
        [
            "--tx",
            tx_id,
            "--deployment",
            str(devnet.deployment_file),
            "--chain-url",
            devnet.api.url,
            "--oracle-url",
            devnet.oracle_url,
        ],
        env={"PROOFNET_NETWORK": "devnet", "COLUMNS": "250"},
    )
    return result.exit_code, result.stdout


def _audit(devnet: Devnet, tx_id: str) -> au.AuditReport:
    d = devnet.scenario.deployment
    return au.audit_settlement(
        devnet.api.url,
        tx_id,
        [devnet.oracle_url],
        network="devnet",
        escrow_script_hash=d.escrow_hash,
        ntx_policy=d.ntx_policy,
        ntx_name=d.ntx_name,
    )


def _publish(devnet: Devnet, oracle: Oracle, tx_id: str) -> None:
    intent = oracle.engine.intents.by_tx(tx_id)
    assert intent is not None
    bundle = oracle.engine.intents.bundle(intent.bundle_sha256)
    assert bundle is not None
    devnet.bundles[bundle.sha256] = bytes(bundle.body)


def test_relay_escrow_is_settled_once_after_the_job_completes(
    devnet: Devnet, tmp_path: Path
) -> None:
    world = _locked_world(devnet, relay_topology(3, None), 500)
    oracle = _oracle(tmp_path, devnet, world)
    _run_units(oracle, world, {0: {"loss": "0.9"}, 1: {"loss": "0.5"}, 2: {"loss": "0.2"}})
    # Every stage is verified, but the job is not over yet: nothing is settled.
    for _ in range(3):
        assert oracle.engine.tick() is None
    assert settlement_tx_of(devnet.api.url, str(world.escrow.tx_id) + "#0") is None

    world.set_job(status="completed")
    tx_id = _settle(oracle)
    escrow = f"{world.escrow.tx_id}#{world.escrow.index}"
    assert settlement_tx_of(devnet.api.url, escrow) == tx_id
    paid = _ntx_outputs(devnet, tx_id)
    submitter = str(devnet.scenario.submitter.address)
    assert sorted(paid) == sorted(
        [(world.payout(i), STAGE_AMOUNT) for i in range(3)] + [(submitter, 500)]
    )

    _publish(devnet, oracle, tx_id)
    code, out = _audit_cli(devnet, tx_id)
    assert code == 0, out
    assert "audit: OK" in out and "3 unit(s) attested 3000" in out
    report = _audit(devnet, tx_id)
    (settled,) = report.escrows
    assert [(u.index, u.kind, u.attested, u.paid) for u in settled.units] == [
        (i, "stage", STAGE_AMOUNT, STAGE_AMOUNT) for i in range(3)
    ]
    assert settled.refunded == settled.refund_expected == 500


def test_stopped_pipeline_pays_what_ran_and_refunds_the_rest(
    devnet: Devnet, tmp_path: Path
) -> None:
    world = _locked_world(devnet, relay_topology(3, 2), 0)
    assert [(u.index, u.kind) for u in world.units.values()] == [
        (0, "stage"),
        (1, "stage"),
        (2, "stage"),
        (3, "eval"),  # evaluates stage 1 (the 2nd stage)
        (4, "eval"),  # evaluates stage 2 (the final model)
    ]
    oracle = _oracle(tmp_path, devnet, world)
    # The evaluation after the second stage fails (loss above 0.5): the pipeline stops.
    _run_units(oracle, world, {0: {"loss": "0.9"}, 1: {"loss": "0.8"}, 3: {"loss": "0.75"}})
    world.set_unit(2, status="cancelled")
    world.set_unit(4, status="cancelled")
    world.set_job(status="stopped")
    tx_id = _settle(oracle)
    submitter = str(devnet.scenario.submitter.address)
    refund = STAGE_AMOUNT + EVAL_AMOUNT  # stage 2 and the final evaluation never ran
    assert world.total - 2 * STAGE_AMOUNT - EVAL_AMOUNT == refund
    assert sorted(_ntx_outputs(devnet, tx_id)) == sorted(
        [
            (world.payout(0), STAGE_AMOUNT),
            (world.payout(1), STAGE_AMOUNT),
            (world.payout(3), EVAL_AMOUNT),
            (submitter, refund),
        ]
    )
    _publish(devnet, oracle, tx_id)
    code, out = _audit_cli(devnet, tx_id)
    assert code == 0 and "audit: OK" in out, out


def _unsigned(
    devnet: Devnet, claims: list[Claim], signers: list[bytes]
) -> tuple[UnsignedBatch, bytes]:
    builder = CardanoSettlementBuilder(
        devnet.api.context(), devnet.scenario.deployment, devnet.scenario.oracle_keys[0]
    )
    bodies = {}
    batch_id = hashlib.sha256(repr(claims).encode()).digest()

    def annotate(packed):  # type: ignore[no-untyped-def]
        bundle = make_bundle(packed)
        bodies["b"] = bundle.body
        return Annotation(bundle.merkle_root, audit_metadata(batch_id, bundle, len(packed)))

    return builder.build(claims, batch_id=batch_id, annotate=annotate, signers=signers), bodies["b"]


def _claims(world: UnitWorld, coses: dict[int, bytes]) -> list[Claim]:
    from oracle.settlement.ports import OutRef

    out = []
    for index, cose in coses.items():
        att = world.attestation(index)
        out.append(
            Claim(
                attestation_id=index + 1,
                escrow=OutRef(world.escrow.tx_id, world.escrow.index),
                leaf_hash=bytes.fromhex(_leaf(cose)),
                cose=cose,
                amount=att.amount,
                payout_address=att.payout_address,
                unit=index,
                job_id=world.job_id,
            )
        )
    return out


def _leaf(cose: bytes) -> str:
    from oracle.verification.verify import leaf_of

    return leaf_of(cose)


def test_audit_and_cosigner_name_a_short_payout_and_a_broken_chain(
    devnet: Devnet, tmp_path: Path
) -> None:
    store = AttestationStore(make_engine(f"sqlite:///{tmp_path / 'cosigner.db'}"))
    store.create_schema()  # a co-signer that has seen none of these attestations itself
    world = _locked_world(devnet, relay_topology(3, None), 0, store)
    for index in range(3):
        world.complete(index)
    world.set_job(status="completed")
    honest = {i: world.sign(i) for i in range(3)}
    scenario = devnet.scenario
    both = [scenario.oracle_pkhs[0], scenario.oracle_pkhs[1]]
    cosigner = CoSigner(
        scenario.deployment,
        BlockfrostChainView(devnet.api.url),
        scenario.oracle_keys[1],
        IntakeVerifier(world.context(ntx_policy=scenario.ntx_policy)),
    )
    # The honest batch: the co-signer re-verifies each unit, chaining stage to stage
    # through the bundle itself, and checks one payout per unit.
    unsigned, body = _unsigned(devnet, _claims(world, honest), both)
    assert len(cosigner.review(unsigned.tx_cbor, body)) > 64

    # Stage 1 paid 10 NTX less than attested (the submitter gets them back instead).
    short = [
        dataclasses.replace(c, amount=c.amount - 10) if c.unit == 1 else c
        for c in _claims(world, honest)
    ]
    unsigned, body = _unsigned(devnet, short, both)
    with pytest.raises(QuorumRefusal, match=r"does not pay it \(unit 1\)"):
        cosigner.review(unsigned.tx_cbor, body)
    # Stage 2 attests it started from a checkpoint no stage of the bundle produced.
    work = world.attestation(2).unit
    assert work is not None
    forged_att = world.attestation(2, unit=work.model_copy(update={"inputs": ("e" * 64,)}))
    forged = {**honest, 2: sign_attestation(forged_att, world.workers[2]).cose}
    unsigned, body = _unsigned(devnet, _claims(world, forged), both)
    with pytest.raises(QuorumRefusal, match="unit_chain_broken"):
        cosigner.review(unsigned.tx_cbor, body)
    signature_only = dataclasses.replace(
        cosigner, verifier=SignatureVerifier("devnet", scenario.deployment.escrow_hash)
    )
    with pytest.raises(QuorumRefusal, match="output of no unit in the bundle"):
        signature_only.review(unsigned.tx_cbor, body)

    # A dishonest oracle settles both lies on chain anyway (threshold 1): the audit names them.
    claims = [c for c in short if c.unit != 2] + [c for c in _claims(world, forged) if c.unit == 2]
    unsigned, body = _unsigned(devnet, claims, [scenario.oracle_pkhs[0]])
    builder = CardanoSettlementBuilder(
        devnet.api.context(), scenario.deployment, scenario.oracle_keys[0]
    )
    signed = builder.assemble(unsigned, [builder.witness(unsigned.tx_id)])
    BlockfrostChainView(devnet.api.url).submit(signed)
    devnet.api.wait_for_tx(unsigned.tx_id)
    devnet.bundles[hashlib.sha256(body).hexdigest()] = body

    report = _audit(devnet, unsigned.tx_id)
    kinds = sorted({d.kind for d in report.discrepancies})
    assert kinds == [au.PAYOUT_MISMATCH, au.REFUND_MISMATCH, UNIT_INPUT_NOT_CHAINED], (
        report.problems
    )
    (short_payout,) = [d for d in report.discrepancies if "unit 1 (stage)" in d.detail]
    assert short_payout.kind == au.PAYOUT_MISMATCH
    assert (short_payout.expected, short_payout.actual) == (STAGE_AMOUNT, STAGE_AMOUNT - 10)
    (broken,) = [d for d in report.discrepancies if d.kind == UNIT_INPUT_NOT_CHAINED]
    assert "unit 2 (stage)" in broken.detail and "e" * 64 in broken.detail
    code, out = _audit_cli(devnet, unsigned.tx_id)
    assert code == 1 and "audit: FAILED" in out and "unit-input-not-chained" in out, out
