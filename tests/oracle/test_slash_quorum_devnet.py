"""Bond slashes signed by a quorum of oracles on separate machines (oracle.settlement.slash).

Each oracle holds only its own key. The proposer builds the slash from a fraud in its own
store and asks a co-signer over HTTP; the co-signer signs only after its own checks. The
attacks are a compromised proposer's: slashing a provider the co-signer never found
cheating, paying the share to someone other than the harmed submitter, slipping the
co-signer's own funds or a second script input into what it signs.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from attestation_support import signed_attestation
from nacl.signing import SigningKey
from pycardano import Address, plutus_script_hash
from settlement_fixtures import oracle_engine

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chain" / "offchain"))
from protocol_fixtures import ProtocolWorld, protocol_world  # noqa: E402

from chain.devnet.testing import serve_app  # noqa: E402
from chain.offchain.builders import assembly as A  # noqa: E402
from chain.offchain.builders.bond import (  # noqa: E402
    BondTerms,
    bond_address,
    bond_script,
    build_lock_bond,
    build_slash,
    burn_address,
    citation_of,
    read_bond,
)
from oracle.app import create_app  # noqa: E402
from oracle.models import REJECTED, AttestationRecord  # noqa: E402
from oracle.settlement.chain_view import BlockfrostChainView  # noqa: E402
from oracle.settlement.quorum import QuorumRefusal  # noqa: E402
from oracle.settlement.routes import router  # noqa: E402
from oracle.settlement.slash import (  # noqa: E402
    Peer,
    SlashCoSigner,
    SlashError,
    propose_slash,
)
from oracle.storage.store import AttestationStore  # noqa: E402
from oracle.verification.verify import Reason, VerificationContext  # noqa: E402
from proofnet.messages.attestation import EscrowRef, attestation_of_cose  # noqa: E402
from proofnet.settings import build_settings  # noqa: E402

TERMS = BondTerms(unbonding_delay_ms=60_000, slash_permille=250)
BONDED = 1_000
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Fraud:
    job_id: bytes
    escrow: Any
    cose: bytes


@dataclass
class SlashWorld:
    w: ProtocolWorld
    script: Any
    provider: Any
    bond: Any

    def fraud(self) -> Fraud:
        job = self.w.job(budget=100)
        (escrow,) = self.w.lock([job])
        ref = EscrowRef(tx_id=str(escrow.input.transaction_id), index=escrow.input.index)
        key = SigningKey(self.provider.signing_key.payload)
        root = hashlib.sha256(b"root" + job.job_id).digest()
        cose = signed_attestation(
            key, job.job_id, root, escrow_script_hash=self.w.deployment.escrow_hash, escrow=ref
        )
        return Fraud(job.job_id, escrow, cose)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlashWorld]:
    with protocol_world(tmp_path_factory.mktemp("slash")) as w:
        script = bond_script(w.deployment, TERMS)
        provider = w.providers[0]
        w.fund(provider)
        w.mint_ntx(provider.address, BONDED * 4)
        built = build_lock_bond(
            w.context, w.deployment, script, provider.pkh, BONDED, provider.address
        )
        tx_id = w.submit(A.sign(built.built, [provider.signing_key]))
        (bond,) = w.utxos_of(tx_id, bond_address(script, w.deployment), 1)
        yield SlashWorld(w, script, provider, bond)


def store_with(
    tmp_path: Path, name: str, *frauds: Fraud, reason: str = str(Reason.SPOT_CHECK_FAILED)
) -> AttestationStore:
    """An oracle's own store holding `frauds` as its own spot checks' verdicts."""
    engine = oracle_engine(tmp_path, name)
    store = AttestationStore(engine)
    with store.session() as s:
        for f in frauds:
            att = attestation_of_cose(f.cose)
            ref = att.domain.escrow
            s.add(
                AttestationRecord(
                    job_id=att.job_id,
                    escrow_tx_id=ref.tx_id,
                    escrow_index=ref.index,
                    escrow_ref=f"{ref.tx_id}#{ref.index}",
                    worker_key=att.worker_key,
                    payout_address=att.payout_address,
                    amount=att.amount,
                    cose=f.cose,
                    leaf_hash=att.leaf_hash().hex(),
                    status=REJECTED,
                    reason=reason,
                    message="segment 3 did not replay",
                    received_at=NOW,
                    updated_at=NOW,
                )
            )
        s.commit()
    return store


def cosigner(world: SlashWorld, store: AttestationStore, index: int = 1) -> SlashCoSigner:
    return SlashCoSigner(
        world.w.deployment,
        BlockfrostChainView(world.w.devnet.url),
        world.w.oracles[index].signing_key,
        store,
        plutus_script_hash(world.script),
    )


def served(c: SlashCoSigner, tmp_path: Path) -> Any:
    ctx = VerificationContext(
        network="devnet",
        escrow_script_hash=c.deployment.escrow_hash,
        chain=None,  # type: ignore[arg-type]
        feed=None,  # type: ignore[arg-type]
        store=None,  # type: ignore[arg-type]
    )
    app = create_app(
        build_settings(), context=ctx, engine=oracle_engine(tmp_path, "app.db"), routers=[router]
    )
    app.state.slash_cosigner = c
    return serve_app(app)


def peer(world: SlashWorld, url: str, index: int = 1) -> Peer:
    return Peer(url, world.w.oracles[index].pkh.payload.hex())


def slash_tx(world: SlashWorld, fraud: Fraud, submitter: Address, payer: Any = None) -> bytes:
    """A slash as a proposer would build it (or a hostile one, with other values)."""
    att = attestation_of_cose(fraud.cose)
    citation = citation_of(fraud.cose, fraud.job_id, bytes.fromhex(att.pot_root))
    signers = [o.pkh for o in world.w.oracle_quorum]
    payer = payer or world.w.oracles[0]
    (bond,) = [u for u in world.w.context.utxos(bond_address(world.script, world.w.deployment))]
    built = build_slash(
        world.w.context,
        world.w.deployment,
        world.script,
        TERMS,
        bond,
        citation,
        submitter,
        signers,
        payer.address,
    )
    return bytes(built.built.tx.to_cbor())


def test_a_quorum_on_two_machines_slashes_the_harmed_submitters_share(
    world: SlashWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fraud = world.fraud()
    own = store_with(tmp_path, "proposer.db", fraud)
    theirs = store_with(tmp_path, "cosigner.db", fraud)
    with served(cosigner(world, theirs), tmp_path) as url:
        proposal = propose_slash(
            world.w.context,
            world.w.deployment,
            TERMS,
            world.w.oracles[0].signing_key,
            own,
            [peer(world, url)],
            2,
            fraud.job_id.hex(),
        )
    world.w.devnet.wait_for_tx(proposal.tx_id)
    assert proposal.share == TERMS.share_of(BONDED)
    assert proposal.submitter == str(world.w.submitter.address)
    (rest,) = world.w.utxos_of(proposal.tx_id, bond_address(world.script, world.w.deployment))
    bond = read_bond(rest, world.w.deployment)
    assert bond.ntx == BONDED - proposal.share and bond.slashed_for(fraud.job_id)
    # The audit (`proofnet bond slashes`) finds it with its evidence.
    from typer.testing import CliRunner

    from chain.offchain.bond_cli import app

    deployment_file = tmp_path / "deployment.json"
    world.w.deployment.save(deployment_file)
    for name, value in {
        "PROOFNET_CHAIN_BACKEND": "devnet",
        "PROOFNET_NETWORK": "devnet",
        "PROOFNET_DEVNET_URL": world.w.devnet.url,
        "PROOFNET_BOND_UNBONDING_DELAY_MS": str(TERMS.unbonding_delay_ms),
        "PROOFNET_BOND_SLASH_PERMILLE": str(TERMS.slash_permille),
    }.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["slashes", "--json", "--deployment", str(deployment_file)])
    assert result.exit_code == 0, result.output
    mine = [e for e in json.loads(result.output) if e["job_id"] == fraud.job_id.hex()]
    assert len(mine) == 1 and mine[0]["signature_valid"] and mine[0]["fields_cited"]
    assert mine[0]["submitter"] == str(world.w.submitter.address) and not mine[0]["burnt"]


def test_a_cosigner_that_found_no_fraud_does_not_sign(world: SlashWorld, tmp_path: Path) -> None:
    """A compromised proposer's store says the provider cheated; the co-signer's does not."""
    fraud = world.fraud()
    own = store_with(tmp_path, "proposer.db", fraud)
    theirs = store_with(tmp_path, "cosigner.db")  # its own verdict found no fraud
    with (
        served(cosigner(world, theirs), tmp_path) as url,
        pytest.raises(SlashError, match="409.*holds no fraud"),
    ):
        propose_slash(
            world.w.context,
            world.w.deployment,
            TERMS,
            world.w.oracles[0].signing_key,
            own,
            [peer(world, url)],
            2,
            fraud.job_id.hex(),
        )


def test_a_cosigner_refuses_a_share_paid_to_anyone_but_the_harmed_submitter(
    world: SlashWorld, tmp_path: Path
) -> None:
    fraud = world.fraud()
    c = cosigner(world, store_with(tmp_path, "cosigner.db", fraud))
    hostile = slash_tx(world, fraud, world.w.oracles[0].address)
    with pytest.raises(QuorumRefusal, match="another address than the submitter"):
        c.review(hostile)
    honest = slash_tx(world, fraud, world.w.submitter.address)
    assert c.review(honest)  # the same fraud, paid to the harmed submitter: signed


def test_a_cosigner_refuses_a_slash_another_attestation_cites(
    world: SlashWorld, tmp_path: Path
) -> None:
    """A fraud on record for one job does not let the quorum slash for another."""
    recorded, other = world.fraud(), world.fraud()
    c = cosigner(world, store_with(tmp_path, "cosigner.db", recorded))
    with pytest.raises(QuorumRefusal, match="holds no fraud"):
        c.review(slash_tx(world, other, world.w.submitter.address))


def test_a_cosigner_refuses_to_pay_the_fee_from_its_own_funds(
    world: SlashWorld, tmp_path: Path
) -> None:
    fraud = world.fraud()
    c = cosigner(world, store_with(tmp_path, "cosigner.db", fraud))
    tx = slash_tx(world, fraud, world.w.submitter.address, payer=world.w.oracles[1])
    with pytest.raises(QuorumRefusal, match="belongs to this oracle"):
        c.review(tx)


def test_a_cosigner_refuses_what_is_not_a_transaction_or_not_a_slash(
    world: SlashWorld, tmp_path: Path
) -> None:
    c = cosigner(world, store_with(tmp_path, "cosigner.db"))
    with pytest.raises(QuorumRefusal, match="not a transaction"):
        c.review(b"\x00garbage")
    # An escrow lock spends no script: no bond is slashed.
    job = world.w.job(budget=10)
    from chain.offchain.builders import build_lock

    built = build_lock(world.w.context, world.w.deployment, [job], world.w.submitter.address)
    with pytest.raises(QuorumRefusal, match="not a required signer"):
        c.review(bytes(built.built.tx.to_cbor()))


def audited_slashes(world: SlashWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`proofnet bond slashes --json`: every slash on chain with its evidence."""
    from typer.testing import CliRunner

    from chain.offchain.bond_cli import app

    deployment_file = tmp_path / "deployment.json"
    world.w.deployment.save(deployment_file)
    for name, value in {
        "PROOFNET_CHAIN_BACKEND": "devnet",
        "PROOFNET_NETWORK": "devnet",
        "PROOFNET_DEVNET_URL": world.w.devnet.url,
        "PROOFNET_BOND_UNBONDING_DELAY_MS": str(TERMS.unbonding_delay_ms),
        "PROOFNET_BOND_SLASH_PERMILLE": str(TERMS.slash_permille),
    }.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["slashes", "--json", "--deployment", str(deployment_file)])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_a_refereed_fraud_is_slashed_to_the_burn_address_never_to_the_submitter(
    world: SlashWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The referee of a disputed segment found the fraud (two verifiers agree, the
    provider's sandbox still claims its commitment): the submitter's job code may be what
    departed, so its share burns. A proposer paying the submitter is refused; the quorum's
    burn passes the bond validator on chain."""
    fraud = world.fraud()
    refereed = str(Reason.REFEREED_REPLAY_FAILED)
    own = store_with(tmp_path, "proposer.db", fraud, reason=refereed)
    theirs = store_with(tmp_path, "cosigner.db", fraud, reason=refereed)
    c = cosigner(world, theirs)
    with pytest.raises(QuorumRefusal, match="its slash burns"):
        c.review(slash_tx(world, fraud, world.w.submitter.address))
    with served(c, tmp_path) as url:
        proposal = propose_slash(
            world.w.context,
            world.w.deployment,
            TERMS,
            world.w.oracles[0].signing_key,
            own,
            [peer(world, url)],
            2,
            fraud.job_id.hex(),
        )
    world.w.devnet.wait_for_tx(proposal.tx_id)
    burnt = burn_address(world.w.deployment)
    assert proposal.submitter == str(burnt) != str(world.w.submitter.address)
    (paid,) = world.w.utxos_of(proposal.tx_id, burnt)
    tokens = paid.output.amount.multi_asset
    assert sum(q for names in tokens.values() for q in names.values()) == proposal.share
    (rest,) = world.w.utxos_of(proposal.tx_id, bond_address(world.script, world.w.deployment))
    assert read_bond(rest, world.w.deployment).slashed_for(fraud.job_id)
    (seen,) = [
        e
        for e in audited_slashes(world, tmp_path, monkeypatch)
        if e["job_id"] == fraud.job_id.hex()
    ]
    assert seen["burnt"] and seen["signature_valid"] and seen["fields_cited"]
    assert seen["submitter"] == str(burnt)
