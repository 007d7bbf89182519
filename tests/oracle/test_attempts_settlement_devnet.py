"""A resumed job's attempts settled on a real devnet with the real builders and scripts: the
lost attempt's claim (segments 1..2) and the completing attempt's attestation (3..4) are paid
from the job's one escrow in one settlement entry, one payout output each, the rest refunded
to the submitter, and `proofnet audit` says OK. Played as the attacker: a batch paying two
attempts for one segment, or one attempt twice, or an attempt beside a whole-job
attestation, is refused by a co-signer; settled anyway by a dishonest quorum, the audit
names it. A lease stopped for the job's fault is paid its share beside the stop's evidence
and audited OK; paid over its share or without the evidence, the audit names each."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Response
from nacl.signing import SigningKey
from pycardano import PaymentSigningKey

from auditor import audit as au
from chain.devnet.testing import running_devnet, serve_app
from oracle.settlement import scenario as sc
from oracle.settlement.builder_port import CardanoSettlementBuilder
from oracle.settlement.bundle import audit_metadata, make_bundle
from oracle.settlement.chain_view import BlockfrostChainView
from oracle.settlement.ports import Annotation, Claim, OutRef, UnpayableClaims, UnsignedBatch
from oracle.settlement.quorum import CoSigner, QuorumRefusal, SignatureVerifier
from proofnet.messages.attestation import SegmentClaim, StopClaim, sign_attestation
from proofnet.messages.job_fault import JobFaultVerdict
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.segment_share import segment_cap, stopped_share
from proofnet.messages.stop_evidence import StopEvidence

PRICE = 1_000
EXTRA = 100  # the escrow holds more than the price: the submitter gets it back


@dataclass
class Devnet:
    api: sc.Devnet
    scenario: sc.Scenario
    bundles: dict[str, bytes]
    oracle_url: str

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
    tmp = tmp_path_factory.mktemp("attempts-devnet")
    with running_devnet(tmp, block_time=0.2) as running:
        api = sc.Devnet(running.url)
        scenario = sc.setup(api, oracles=2, threshold=1, tag="attempts-devnet")
        bodies: dict[str, bytes] = {}
        with serve_app(_bundle_app(bodies)) as url:
            yield Devnet(api, scenario, bodies, url)


class Ready:
    """The readiness rule as it answers once the job is over and every attempt decided."""

    def refusal(self, *_args: object) -> str | None:
        return None


# Four segments; attempt 1 (worker 1) was lost after 2, attempt 2 (worker 2) resumed.
SEGMENTS = 4


def _spec_share(first: int, last: int) -> int:
    return segment_cap(_spec(), PRICE, first, last)


def _spec() -> JobSpec:
    return JobSpec.from_dict(
        {
            "model": {"repo_url": "https://example.org/train.git", "commit": "c" * 40},
            "framework": "numpy",
            "image": "python@sha256:" + "d" * 64,
            "commands": [["python", "train.py"]],
            "resources": {
                "gpus": 1,
                "gpu_memory_mb": 1024,
                "cpus": 1,
                "ram_mb": 1024,
                "disk_mb": 1024,
                "max_duration_s": 3600,
            },
            "results": [{"path": "pot/**", "kind": "model"}],
            "pricing": {"kind": "fixed", "amount": PRICE},
            "seed": 7,
            "proof": {
                "steps_per_checkpoint": 10,
                "schedule": {"steps": 40, "dataset_size": 128, "batch_size": 16},
            },
        }
    )


def _claim(
    devnet: Devnet,
    ref: OutRef,
    job: bytes,
    worker: PaymentSigningKey,
    segments: SegmentClaim | None,
    amount: int,
    ident: int,
) -> Claim:
    base = sc.attestation(devnet.scenario, ref, job, amount, worker).attestation
    att = base.model_copy(update={"segments": segments})
    signed = sign_attestation(type(att).model_validate(att.model_dump()), bytes(worker.payload))
    return Claim(
        attestation_id=ident,
        escrow=ref,
        leaf_hash=signed.attestation.leaf_hash(),
        cose=signed.cose,
        amount=amount,
        payout_address=att.payout_address,
        job_id=job.hex(),
        worker_key=att.worker_key,
        attempt=None if segments is None else segments.attempt,
    )


def _attempts(devnet: Devnet, ref: OutRef, job: bytes, *, second_first: int = 3) -> list[Claim]:
    lost = SegmentClaim(attempt=1, first=1, last=2)
    resumed = SegmentClaim(attempt=2, first=second_first, last=SEGMENTS)
    return [
        _claim(devnet, ref, job, sc.worker_key(1), lost, _spec_share(1, 2), 1),
        _claim(devnet, ref, job, sc.worker_key(2), resumed, _spec_share(3, SEGMENTS), 2),
    ]


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


def _submit(devnet: Devnet, unsigned: UnsignedBatch, body: bytes, *others: bytes) -> str:
    builder = CardanoSettlementBuilder(
        devnet.api.context(), devnet.scenario.deployment, devnet.scenario.oracle_keys[0]
    )
    signed = builder.assemble(unsigned, [builder.witness(unsigned.tx_id), *others])
    BlockfrostChainView(devnet.api.url).submit(signed)
    devnet.api.wait_for_tx(unsigned.tx_id)
    devnet.bundles[hashlib.sha256(body).hexdigest()] = body
    return unsigned.tx_id


def _ntx_outputs(devnet: Devnet, tx_id: str) -> list[tuple[str, int]]:
    utxos = httpx.get(f"{devnet.api.url}/txs/{tx_id}/utxos", timeout=30).json()
    return [
        (o["address"], int(a["quantity"]))
        for o in utxos["outputs"]
        for a in o["amount"]
        if a["unit"] == devnet.unit
    ]


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


def _cosigner(devnet: Devnet) -> CoSigner:
    scenario = devnet.scenario
    return CoSigner(
        scenario.deployment,
        BlockfrostChainView(devnet.api.url),
        scenario.oracle_keys[1],
        SignatureVerifier("devnet", scenario.deployment.escrow_hash),
        Ready(),
    )


def _locked(devnet: Devnet, tag: int) -> tuple[OutRef, bytes]:
    job = hashlib.sha256(f"resumed-job-{tag}".encode()).digest()
    ((ref, _job),) = sc.lock(
        devnet.scenario, 1, budget=PRICE + EXTRA, job_ids=[job], nonce_base=7_000 + tag
    )
    return ref, job


@pytest.mark.slow
def test_both_attempts_are_paid_from_the_one_escrow_in_one_entry(devnet: Devnet) -> None:
    ref, job = _locked(devnet, 1)
    claims = _attempts(devnet, ref, job)
    assert sum(c.amount for c in claims) == PRICE  # 2 of 4 segments each: half the price
    both = [devnet.scenario.oracle_pkhs[0], devnet.scenario.oracle_pkhs[1]]
    unsigned, body = _unsigned(devnet, claims, both)
    witness = _cosigner(devnet).review(unsigned.tx_cbor, body)
    assert len(witness) > 64
    tx_id = _submit(devnet, unsigned, body, witness)
    submitter = str(devnet.scenario.submitter.address)
    assert sorted(_ntx_outputs(devnet, tx_id)) == sorted(
        [
            (claims[0].payout_address, PRICE // 2),
            (claims[1].payout_address, PRICE // 2),
            (submitter, EXTRA),
        ]
    )
    report = _audit(devnet, tx_id)
    assert report.ok, report.problems
    (escrow,) = report.escrows
    assert [(u.index, u.kind, u.paid) for u in escrow.units] == [
        (1, "attempt", PRICE // 2),
        (2, "attempt", PRICE // 2),
    ]


@pytest.mark.slow
def test_a_batch_paying_a_segment_twice_is_refused_and_named_by_the_audit(
    devnet: Devnet,
) -> None:
    ref, job = _locked(devnet, 2)
    both = [devnet.scenario.oracle_pkhs[0], devnet.scenario.oracle_pkhs[1]]
    cosigner = _cosigner(devnet)
    # The resumed attempt claims segment 2 too (its amount still within the escrow).
    overlapping = _attempts(devnet, ref, job, second_first=2)
    unsigned, body = _unsigned(devnet, overlapping, both)
    with pytest.raises(QuorumRefusal, match="two attempts claim the same segments"):
        cosigner.review(unsigned.tx_cbor, body)
    # One attempt paid twice (two claims both naming attempt 1) never even builds.
    lost, resumed = _attempts(devnet, ref, job)
    twice = [lost, replace(resumed, attempt=1)]
    with pytest.raises(UnpayableClaims):
        _unsigned(devnet, twice, both)
    # A whole-job attestation beside an attempt's claim: the escrow claimed twice.
    whole = _claim(devnet, ref, job, sc.worker_key(2), None, _spec_share(3, SEGMENTS), 3)
    with pytest.raises(UnpayableClaims, match="claimed twice"):
        _unsigned(devnet, [lost, whole], both)

    # A dishonest quorum (threshold 1) settles the overlap anyway: the audit names it.
    unsigned, body = _unsigned(devnet, overlapping, [devnet.scenario.oracle_pkhs[0]])
    tx_id = _submit(devnet, unsigned, body)
    report = _audit(devnet, tx_id)
    kinds = {d.kind for d in report.discrepancies}
    assert au.DUPLICATE_ATTESTATION in kinds, report.problems
    assert any("two attempts claim the same segments" in d.detail for d in report.discrepancies)


@pytest.mark.slow
def test_the_engine_waits_for_the_lost_attempt_then_settles_both(
    devnet: Devnet, tmp_path: Path
) -> None:
    """The oracle's own loop: the completing attempt's verified attestation alone is not
    settled (the lost attempt proved segments 1..2 and its claim is not decided yet); once
    the lost attempt's claim is verified too, the engine settles both in one transaction."""
    from types import MappingProxyType

    from oracle_fixtures import FakeFeed
    from sqlmodel import Session, select
    from waiting import until

    from oracle.inputs.feed import AttemptInfo, JobInfo
    from oracle.settlement.engine import BatchPolicy, SettlementEngine
    from oracle.settlement.intents import IntentLog
    from oracle.settlement.models import SettlementIntent
    from oracle.settlement.queue import AttestationQueue
    from oracle.settlement.readiness import JobEndReadiness, ReadinessPolicy
    from oracle.settlement.watcher import WatchConfig
    from oracle.storage.db import make_engine
    from oracle.storage.store import AttestationStore
    from proofnet.messages.attestation import EscrowRef, SignedAttestation, verify_attestation

    ref, job = _locked(devnet, 3)
    lost, resumed = _attempts(devnet, ref, job)
    db = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
    store = AttestationStore(db)
    store.create_schema()

    def stored(claim: Claim) -> int:
        att = verify_attestation(
            claim.cose,
            expected_network="devnet",
            expected_script_hash=devnet.scenario.deployment.escrow_hash,
        )
        return sc.store_verified(db, SignedAttestation(claim.cose, att))

    def attempt(n: int, worker: str, outcome: str, first: int, last: int | None) -> AttemptInfo:
        return AttemptInfo(
            n,
            worker,
            "addr",
            "ab" * 16,
            outcome,
            0,
            1,
            n - 1 or None,
            first - 1 or None,
            first,
            last,
            MappingProxyType({}),
        )

    feed = FakeFeed()
    spec_job = JobInfo(
        job.hex(),
        _spec(),
        "completed",
        EscrowRef(tx_id=ref.tx_id, index=ref.index),
        None,
        attempts=(
            attempt(1, lost.worker_key, "released", 1, 2),
            attempt(2, resumed.worker_key, "completed", 3, None),
        ),
    )
    feed.jobs[job.hex()] = spec_job
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
        proposer="attempts-devnet",
        readiness=JobEndReadiness(feed, chain, db, ReadinessPolicy(recheck_s=0.0)),
    )
    stored(resumed)
    for _ in range(3):
        assert engine.tick() is None
    assert {r.status for r in store.for_job(job.hex())} == {"verified"}

    stored(lost)

    def settled() -> bool:
        engine.tick()
        return {r.status for r in store.for_job(job.hex())} == {"settled"}

    until("both attempts settled", settled)
    assert engine.intents.open_intents() == []  # confirmed
    rows = store.for_job(job.hex())
    assert sorted(r.attempt or 0 for r in rows) == [1, 2]
    with Session(db) as session:
        (intent,) = session.exec(select(SettlementIntent)).all()
    assert intent.state == "confirmed" and intent.tx_id is not None
    assert sorted(_ntx_outputs(devnet, intent.tx_id)) == sorted(
        [
            (lost.payout_address, PRICE // 2),
            (resumed.payout_address, PRICE // 2),
            (str(devnet.scenario.submitter.address), EXTRA),
        ]
    )


def _stopped_claim(
    devnet: Devnet, ref: OutRef, worker: int, amount: int, ident: int, *, evidence: bool = True
) -> Claim:
    """A lease stopped for the job's fault with 1 segment committed (paid 2 of 4 with the
    grace), beside the stop's evidence: the deployment's oracle's signed verdict, the spec."""
    spec, key = _spec(), sc.worker_key(worker)
    base = sc.attestation(devnet.scenario, ref, bytes.fromhex(spec.job_id), amount, key)
    att = base.attestation.model_copy(update={"stop": StopClaim(segments=1)})
    signed = sign_attestation(type(att).model_validate(att.model_dump()), bytes(key.payload))
    oracle = SigningKey(bytes(devnet.scenario.oracle_keys[0].payload))
    verdict = JobFaultVerdict.sign(
        oracle,
        job_id=spec.job_id,
        nonce=att.nonce,
        attempt=1,
        reason="job_not_replayable",
        message="the two replays of segment 1 disagree",
        prefix_root="ab" * 32,
    )
    stop = StopEvidence(spec=spec.canonical_bytes().decode(), segments=1, verdicts=(verdict,))
    return Claim(
        attestation_id=ident,
        escrow=ref,
        leaf_hash=signed.attestation.leaf_hash(),
        cose=signed.cose,
        amount=amount,
        payout_address=att.payout_address,
        job_id=spec.job_id,
        worker_key=att.worker_key,
        stop=stop if evidence else None,
    )


@pytest.mark.slow
def test_a_stopped_leases_share_is_audited_from_the_stop_evidence_in_the_bundle(
    devnet: Devnet,
) -> None:
    """The honest stopped payout audits OK (the verdict checked against the oracle set and
    threshold of the config the settlement reads); paid over its share, or with no stop
    evidence, by a dishonest quorum (threshold 1), the audit names each."""
    share = stopped_share(_spec(), PRICE, 1, 1)
    assert share == PRICE // 2
    job = bytes.fromhex(_spec().job_id)
    refs = [
        ref
        for ref, _ in sc.lock(
            devnet.scenario, 3, budget=PRICE + EXTRA, job_ids=[job] * 3, nonce_base=7_900
        )
    ]
    own = [devnet.scenario.oracle_pkhs[0]]
    honest = _stopped_claim(devnet, refs[0], 5, share, 1)
    unsigned, body = _unsigned(devnet, [honest], own)
    report = _audit(devnet, _submit(devnet, unsigned, body))
    assert report.ok, report.discrepancies
    inflated = _stopped_claim(devnet, refs[1], 6, PRICE, 2)
    bare = _stopped_claim(devnet, refs[2], 7, share, 3, evidence=False)
    unsigned, body = _unsigned(devnet, [inflated, bare], own)
    report = _audit(devnet, _submit(devnet, unsigned, body))
    kinds = sorted(d.kind for d in report.discrepancies)
    assert kinds == sorted([au.STOP_SHARE_EXCEEDED, au.STOP_UNPROVEN]), report.discrepancies
