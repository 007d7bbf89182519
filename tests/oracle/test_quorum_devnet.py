"""2-of-3 oracle quorum on the devnet: three oracle apps with different keys; the proposer
gathers one co-signature over HTTP while another oracle is down or refuses, and every
co-signer refuses a batch that does not pay what its bundle attests."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from settlement_fixtures import oracle_engine, statuses

from chain.devnet.testing import running_devnet, serve_app
from oracle.app import create_app
from oracle.settlement import scenario as sc
from oracle.settlement.audit import settlement_tx_of
from oracle.settlement.builder_port import CardanoSettlementBuilder
from oracle.settlement.bundle import make_bundle
from oracle.settlement.chain_view import BlockfrostChainView
from oracle.settlement.engine import BatchPolicy, SettlementEngine
from oracle.settlement.intents import IntentLog
from oracle.settlement.models import IntentState
from oracle.settlement.ports import Claim
from oracle.settlement.queue import AttestationQueue, claim_of
from oracle.settlement.quorum import (
    CoSigner,
    CoSignerClient,
    QuorumRefusal,
    QuorumSigner,
    SignatureVerifier,
    VerifiedClaim,
)
from oracle.settlement.routes import router
from oracle.settlement.watcher import WatchConfig
from oracle.verification.verify import VerificationContext
from proofnet.settings import build_settings


class _NoFeed:
    def job(self, job_id: str) -> None:
        return None

    def worker(self, worker_key: str) -> None:
        return None

    def artifact(self, job_id: str, name: str) -> bytes:
        raise KeyError(name)


class _Refuses:
    def verify(self, cose: bytes) -> VerifiedClaim:
        raise QuorumRefusal("this oracle's own checks reject the attestation")


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with (
        running_devnet(tmp_path_factory.mktemp("devnet"), block_time=0.2) as devnet,
    ):
        api = sc.Devnet(devnet.url)
        yield api, sc.setup(api, oracles=3, threshold=2, tag="quorum-test")


@contextlib.contextmanager
def oracle_app(tmp_path: Path, scenario: sc.Scenario, index: int, refuse: bool) -> Iterator[str]:
    """One co-signing oracle app (its own database, key and chain view)."""
    db = oracle_engine(tmp_path, f"cosigner-{index}.db")
    chain = BlockfrostChainView(scenario.devnet.url)
    ctx = VerificationContext(
        network="devnet",
        escrow_script_hash=scenario.deployment.escrow_hash,
        chain=None,  # type: ignore[arg-type]
        feed=_NoFeed(),
        store=None,  # type: ignore[arg-type]
    )
    app = create_app(build_settings(), context=ctx, engine=db, routers=[router])
    verifier = (
        _Refuses() if refuse else SignatureVerifier("devnet", scenario.deployment.escrow_hash)
    )
    app.state.settlement_db = db
    app.state.settlement_cosigner = CoSigner(
        scenario.deployment, chain, scenario.oracle_keys[index], verifier
    )
    with serve_app(app) as url:
        yield url
    db.dispose()


def _pkh(scenario: sc.Scenario, index: int) -> str:
    return scenario.oracle_pkhs[index].hex()


def _proposer(tmp_path: Path, scenario: sc.Scenario, cosigners: list[CoSignerClient]):  # type: ignore[no-untyped-def]
    db = oracle_engine(tmp_path, "proposer.db")
    builder = CardanoSettlementBuilder(
        scenario.devnet.context(), scenario.deployment, scenario.oracle_keys[0]
    )
    engine = SettlementEngine(
        IntentLog(db, AttestationQueue()),
        BlockfrostChainView(scenario.devnet.url),
        builder,
        signer=QuorumSigner(builder, cosigners, threshold=2),
        policy=BatchPolicy(batch_size=4, max_wait_s=0),
        watch=WatchConfig(confirmation_depth=1),
        proposer="proposer",
    )
    return db, engine


def _settle(engine: SettlementEngine, db, timeout: float = 90) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while set(statuses(db).values()) != {"settled"}:
        assert time.monotonic() < deadline, f"not settled: {statuses(db)}"
        engine.tick()
        time.sleep(0.1)


def test_two_of_three_with_one_oracle_down(quorum, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    devnet, scenario = quorum
    with oracle_app(tmp_path, scenario, 2, refuse=False) as healthy:
        down = CoSignerClient("http://127.0.0.1:9", _pkh(scenario, 1))  # nothing listens
        db, engine = _proposer(
            tmp_path, scenario, [down, CoSignerClient(healthy, _pkh(scenario, 2))]
        )
        escrows = sc.lock(scenario, 2, nonce_base=500)
        rows = sc.attested_escrows(scenario, db, escrows, amount=70)
        _settle(engine, db)
    (tx_id,) = {settlement_tx_of(devnet.url, e) for e in rows}
    tx = httpx.get(f"{devnet.url}/txs/{tx_id}/cbor").json()["cbor"]
    from pycardano import Transaction

    body = Transaction.from_cbor(bytes.fromhex(tx)).transaction_body
    signers = {k.payload.hex() for k in body.required_signers or []}
    assert signers == {_pkh(scenario, 0), _pkh(scenario, 2)}
    intent = engine.intents.by_tx(tx_id)  # type: ignore[arg-type]
    assert intent is not None and intent.state == IntentState.CONFIRMED


def test_refusing_cosigner_is_skipped_next_time(quorum, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    devnet, scenario = quorum
    with (
        oracle_app(tmp_path, scenario, 1, refuse=True) as refusing,
        oracle_app(tmp_path, scenario, 2, refuse=False) as healthy,
    ):
        cosigners = [
            CoSignerClient(refusing, _pkh(scenario, 1)),
            CoSignerClient(healthy, _pkh(scenario, 2)),
        ]
        db, engine = _proposer(tmp_path, scenario, cosigners)
        escrows = sc.lock(scenario, 1, nonce_base=600)
        sc.attested_escrows(scenario, db, escrows, amount=50)
        assert engine.tick() is None  # refused: nothing submitted
        from sqlmodel import Session, select

        from oracle.settlement.models import SettlementIntent

        with Session(db) as session:
            (dropped,) = session.exec(select(SettlementIntent)).all()
        assert dropped.state == IntentState.DROPPED
        assert "own checks reject" in (dropped.last_error or "")
        assert cosigners[0].refused_until > time.time()
        _settle(engine, db)
    assert set(statuses(db).values()) == {"settled"}


def test_cosigner_refuses_a_batch_that_pays_otherwise(quorum, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    devnet, scenario = quorum
    db = oracle_engine(tmp_path, "tamper.db")
    escrows = sc.lock(scenario, 2, nonce_base=700)
    rows = sc.attested_escrows(scenario, db, escrows, amount=40)
    with contextlib.closing(db.connect()):
        pass
    from sqlmodel import Session, select

    from oracle.models import AttestationRecord

    with Session(db) as session:
        claims = [claim_of(r) for r in session.exec(select(AttestationRecord)).all()]
    assert len(claims) == len(rows)
    builder = CardanoSettlementBuilder(
        scenario.devnet.context(), scenario.deployment, scenario.oracle_keys[0]
    )
    signers = [scenario.oracle_pkhs[0], scenario.oracle_pkhs[1]]
    honest = _unsigned(builder, claims, signers)
    cosigner = CoSigner(
        scenario.deployment,
        BlockfrostChainView(devnet.url),
        scenario.oracle_keys[1],
        SignatureVerifier("devnet", scenario.deployment.escrow_hash),
    )
    witness = cosigner.review(honest[0].tx_cbor, honest[1])
    assert len(witness) > 64

    # The bundle claims one attestation, the tx settles two escrows: refused.
    with pytest.raises(QuorumRefusal):
        cosigner.review(honest[0].tx_cbor, make_bundle(honest[0].claims[:1]).body)
    # A tx paying 1 NTX more than attested to the first provider: refused.
    inflated = [
        Claim(c.attestation_id, c.escrow, c.leaf_hash, c.cose, c.amount + 1, c.payout_address)
        for c in claims
    ]
    tampered = _unsigned(builder, inflated, signers)
    with pytest.raises(QuorumRefusal, match="does not pay it"):
        cosigner.review(tampered[0].tx_cbor, tampered[1])
    # The same amounts, each paid to another attestation's address: the batch script
    # accepts that (payees are the quorum's choice), so each co-signer checks the outputs.
    redirected = [
        Claim(
            c.attestation_id,
            c.escrow,
            c.leaf_hash,
            c.cose,
            c.amount,
            claims[(i + 1) % len(claims)].payout_address,
        )
        for i, c in enumerate(claims)
    ]
    assert all(
        r.payout_address != c.payout_address for r, c in zip(redirected, claims, strict=True)
    )
    tampered = _unsigned(builder, redirected, signers)
    with pytest.raises(QuorumRefusal, match="does not pay it"):
        cosigner.review(tampered[0].tx_cbor, tampered[1])
    # Not named as a required signer: nothing to sign.
    other = _unsigned(builder, claims, [scenario.oracle_pkhs[0], scenario.oracle_pkhs[2]])
    with pytest.raises(QuorumRefusal, match="not a required signer"):
        cosigner.review(other[0].tx_cbor, other[1])


def _unsigned(builder: CardanoSettlementBuilder, claims, signers):  # type: ignore[no-untyped-def]
    from oracle.settlement.bundle import audit_metadata
    from oracle.settlement.ports import Annotation

    bundles = {}

    def annotate(packed):  # type: ignore[no-untyped-def]
        bundle = make_bundle(packed)
        bundles["b"] = bundle
        return Annotation(bundle.merkle_root, audit_metadata(b"\x01" * 32, bundle, len(packed)))

    unsigned = builder.build(claims, batch_id=b"\x01" * 32, annotate=annotate, signers=signers)
    return unsigned, bundles["b"].body


# --- a co-signer never signs away its own funds ---------------------------------------------


def _own_funds_world(quorum, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Attested escrows and a co-signer (oracle 1) with its own wallet on the devnet."""
    devnet, scenario = quorum
    db = oracle_engine(tmp_path, "own-funds.db")
    escrows = sc.lock(scenario, 1, nonce_base=800)
    sc.attested_escrows(scenario, db, escrows, amount=30)
    from sqlmodel import Session, select

    from oracle.models import AttestationRecord

    with Session(db) as session:
        claims = [claim_of(r) for r in session.exec(select(AttestationRecord)).all()]
    cosigner = CoSigner(
        scenario.deployment,
        BlockfrostChainView(devnet.url),
        scenario.oracle_keys[1],
        SignatureVerifier("devnet", scenario.deployment.escrow_hash),
    )
    signers = [scenario.oracle_pkhs[0], scenario.oracle_pkhs[1]]
    return scenario, claims, cosigner, signers


def test_cosigner_refuses_fees_paid_from_its_own_wallet(quorum, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The attack: a proposer builds a valid batch whose fee inputs and collateral come from
    the co-signer's wallet (the co-signer's witness would cover them). Honest twin: the same
    batch paid by the proposer is co-signed."""
    scenario, claims, cosigner, signers = _own_funds_world(quorum, tmp_path)
    context = scenario.devnet.context()
    honest = CardanoSettlementBuilder(context, scenario.deployment, scenario.oracle_keys[0])
    unsigned, bundle = _unsigned(honest, claims, signers)
    assert len(cosigner.review(unsigned.tx_cbor, bundle)) > 64

    thief = CardanoSettlementBuilder(
        context, scenario.deployment, scenario.oracle_keys[0], payer_key=scenario.oracle_keys[1]
    )
    unsigned, bundle = _unsigned(thief, claims, signers)
    from pycardano import Transaction

    body = Transaction.from_cbor(unsigned.tx_cbor).transaction_body
    cosigner_wallet = str(sc.enterprise(scenario.oracle_keys[1]))
    assert body.collateral_return is not None
    assert str(body.collateral_return.address) == cosigner_wallet  # the builder did use it
    with pytest.raises(QuorumRefusal, match="address of this co-signer's key"):
        cosigner.review(unsigned.tx_cbor, bundle)


def test_cosigner_signs_a_batch_and_nothing_more(quorum, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Hand-built variants of an honest batch: each adds one thing a witness would
    authorise beyond the batch, and each is refused for it."""
    from pycardano import (
        Address,
        Asset,
        AssetName,
        ExecutionUnits,
        MultiAsset,
        Network,
        RedeemerKey,
        RedeemerTag,
        RedeemerValue,
        ScriptHash,
        StakeCredential,
        StakeRegistration,
        Transaction,
        TransactionOutput,
        Withdrawals,
    )

    from chain.contracts import types as t

    scenario, claims, cosigner, signers = _own_funds_world(quorum, tmp_path)
    context = scenario.devnet.context()
    builder = CardanoSettlementBuilder(context, scenario.deployment, scenario.oracle_keys[0])
    unsigned, bundle = _unsigned(builder, claims, signers)
    assert len(cosigner.review(unsigned.tx_cbor, bundle)) > 64  # the honest twin
    own_key = scenario.oracle_keys[1].to_verification_key().hash()
    own_utxo = context.utxos(sc.enterprise(scenario.oracle_keys[1]))[0]
    deployment = scenario.deployment

    def mint(tx: Transaction) -> None:
        policy = ScriptHash(bytes.fromhex(deployment.ntx_policy))
        tx.transaction_body.mint = MultiAsset({policy: Asset({AssetName(b"NTX"): 1})})

    def certify(tx: Transaction) -> None:
        tx.transaction_body.certificates = [StakeRegistration(StakeCredential(own_key))]

    def withdraw_own_rewards(tx: Transaction) -> None:
        own_rewards = Address(staking_part=own_key, network=Network.TESTNET)
        withdraws = dict(tx.transaction_body.withdraws or {})
        withdraws[bytes(own_rewards)] = 0
        tx.transaction_body.withdraws = Withdrawals(withdraws)

    def spend_own_input(tx: Transaction) -> None:
        tx.transaction_body.inputs.append(own_utxo.input)

    def spend_foreign_script(tx: Transaction) -> None:
        tx.transaction_body.inputs.append(deployment.ref("config_ref"))

    def own_collateral(tx: Transaction) -> None:
        tx.transaction_body.collateral = [own_utxo.input]

    def collateral_return_elsewhere(tx: Transaction) -> None:
        back = tx.transaction_body.collateral_return
        assert back is not None
        elsewhere = sc.enterprise(sc.seeded_key("collateral-thief"))
        tx.transaction_body.collateral_return = TransactionOutput(elsewhere, back.amount)

    def _redeemer(tx: Transaction, key: RedeemerKey, data: object) -> None:
        redeemers = tx.transaction_witness_set.redeemer
        redeemers[key] = RedeemerValue(data, ExecutionUnits(1000, 1000))  # type: ignore[index]

    def extra_mint_redeemer(tx: Transaction) -> None:
        _redeemer(tx, RedeemerKey(RedeemerTag.MINT, 0), t.Settle())

    def spend_redeemer_on_a_fee_input(tx: Transaction) -> None:
        body = tx.transaction_body
        inputs = sorted(body.inputs, key=lambda i: (i.transaction_id.payload, i.index))
        escrows = {str(c.escrow) for c in claims}
        fee_index = next(
            i
            for i, tx_in in enumerate(inputs)
            if f"{tx_in.transaction_id.payload.hex()}#{tx_in.index}" not in escrows
        )
        _redeemer(tx, RedeemerKey(RedeemerTag.SPEND, fee_index), t.Settle())

    def refund_an_escrow(tx: Transaction) -> None:
        redeemers = tx.transaction_witness_set.redeemer
        key = next(k for k in redeemers if k.tag == RedeemerTag.SPEND)  # type: ignore[union-attr]
        _redeemer(tx, key, t.Refund(0))

    attacks = {
        mint: "mints",
        certify: "certifies",
        withdraw_own_rewards: "withdraws from something other",
        spend_own_input: "address of this co-signer's key",
        spend_foreign_script: "not an escrow of this deployment",
        own_collateral: "collateral .* co-signer's key",
        collateral_return_elsewhere: "collateral return goes elsewhere",
        extra_mint_redeemer: "mint redeemer",
        spend_redeemer_on_a_fee_input: "spend redeemer",
        refund_an_escrow: "other than Settle",
    }
    for tamper, refusal in attacks.items():
        tx = Transaction.from_cbor(unsigned.tx_cbor)
        tamper(tx)
        with pytest.raises(QuorumRefusal, match=refusal):
            cosigner.review(tx.to_cbor(), bundle)


# --- a co-signer's own verdict reaches the API only with its signature ---------------------


class _RecordingSink:
    def __init__(self) -> None:
        self.posted: list[object] = []

    def post_verdict(self, verdict: object) -> None:
        self.posted.append(verdict)


def test_cosigner_posts_its_verdict_only_for_a_batch_it_signs(quorum, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The API releases results only with `result_release_quorum` distinct oracles' verdicts;
    a co-signer adds its own for each attestation it signs the payment of. A batch it refuses
    (here: one that pays a provider more than attested) posts nothing, so a proposer cannot
    use a co-signer to release results the co-signer never accepted."""
    from oracle.intake.announce import Announcer

    scenario, claims, _, signers = _own_funds_world(quorum, tmp_path)
    sink = _RecordingSink()
    cosigner = CoSigner(
        scenario.deployment,
        BlockfrostChainView(scenario.devnet.url),
        scenario.oracle_keys[1],
        SignatureVerifier("devnet", scenario.deployment.escrow_hash),
        announcer=Announcer(sink),
    )
    builder = CardanoSettlementBuilder(
        scenario.devnet.context(), scenario.deployment, scenario.oracle_keys[0]
    )
    inflated = [
        Claim(c.attestation_id, c.escrow, c.leaf_hash, c.cose, c.amount + 1, c.payout_address)
        for c in claims
    ]
    tampered = _unsigned(builder, inflated, signers)
    with pytest.raises(QuorumRefusal, match="does not pay it"):
        cosigner.review(tampered[0].tx_cbor, tampered[1])
    assert sink.posted == []

    honest = _unsigned(builder, claims, signers)
    assert len(cosigner.review(honest[0].tx_cbor, honest[1])) > 64
    posted = sink.posted
    assert len(posted) == len(claims) >= 1
    for verdict in posted:
        assert verdict.status == "verified" and verdict.fault is None  # type: ignore[attr-defined]
    from oracle.verification.unit_checks import attested_nonce

    nonces = {attested_nonce(c.cose) for c in claims}
    assert {v.nonce for v in posted} == nonces  # type: ignore[attr-defined]
