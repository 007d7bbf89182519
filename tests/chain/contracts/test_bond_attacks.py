"""Provider bond attacks on a running devnet (issue 14 item 5), in the style of
test_attacks.py: each malicious transaction is built with the project's builders, tampered
with, SUBMITTED, and refused by the ledger (phase 2: the bond script's spend redeemer; or
the ledger's own rule); its honest twin is then accepted.

Scripts are the production build (no trace messages): the contract unit tests
(test_bond_unit.py) show which check stops each attack on a ledger-shaped context.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from attestation_support import signed_attestation  # noqa: E402
from nacl.signing import SigningKey
from pycardano import MultiAsset, Transaction, TransactionOutput, UTxO, Value

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "offchain"))

from protocol_fixtures import ProtocolWorld, protocol_world  # noqa: E402

from chain.contracts import bond_types as bt  # noqa: E402
from chain.offchain.builders import assembly as A  # noqa: E402
from chain.offchain.builders.bond import (  # noqa: E402
    BondTerms,
    bond_address,
    bond_script,
    build_lock_bond,
    build_slash,
    build_unbond,
    build_withdraw,
    citation_of,
    plan_slash,
    read_bond,
)
from chain.offchain.builders.chain_time import ChainClock, tip_slot  # noqa: E402
from chain.offchain.builders.errors import BuilderError  # noqa: E402
from chain.offchain.builders.onchain import out_ref_text  # noqa: E402
from chain.offchain.errors import TransactionRejectedError  # noqa: E402
from chain.offchain.follow.bond_slashes import (  # noqa: E402
    BondClassifier,
    provider_address,
    slash_evidence,
)
from chain.offchain.follow.classify import SLASH, classify  # noqa: E402
from chain.offchain.follow.reader import follower_for  # noqa: E402
from proofnet.messages.attestation import (  # noqa: E402
    EscrowRef,
)

# Chain time runs about 5x the wall clock on the devnet: 20 s of delay is ~4 s of waiting.
TERMS = BondTerms(unbonding_delay_ms=20_000, slash_permille=250)
BONDED = 1_000
SHARE = TERMS.share_of(BONDED)
ROOT = hashlib.sha256(b"pot-root").digest()


@dataclasses.dataclass
class BondWorld:
    w: ProtocolWorld
    script: Any
    provider: Any  # KeyWallet whose key also signs attestations
    jobs: int = 0

    @property
    def address(self) -> Any:
        return bond_address(self.script, self.w.deployment)

    def lock(self, amount: int = BONDED) -> UTxO:
        built = build_lock_bond(
            self.w.context,
            self.w.deployment,
            self.script,
            self.provider.pkh,
            amount,
            self.provider.address,
        )
        tx_id = self.w.submit(A.sign(built.built, [self.provider.signing_key]))
        return self.w.utxos_of(tx_id, self.address, 1)[0]

    def attestation(
        self, job_id: bytes, escrow: EscrowRef | None = None, provider: Any = None
    ) -> bytes:
        key = SigningKey((provider or self.provider).signing_key.payload)
        return signed_attestation(
            key, job_id, ROOT, escrow_script_hash=self.w.deployment.escrow_hash, escrow=escrow
        )

    def citation(self) -> Any:
        self.jobs += 1
        job_id = hashlib.blake2b(b"bond-job%d" % self.jobs, digest_size=32).digest()
        return citation_of(self.attestation(job_id), job_id, ROOT)

    def slash_plan(self, bond: UTxO, citation: Any) -> A.TxPlan:
        q = self.w.oracle_quorum
        return plan_slash(
            self.w.context,
            self.w.deployment,
            self.script,
            TERMS,
            bond,
            citation,
            self.w.submitter.address,
            [o.pkh for o in q],
            q[0].address,
        ).plan

    def quorum_sign(self, built: A.BuiltTx) -> Transaction:
        return A.sign(built, [o.signing_key for o in self.w.oracle_quorum])

    def unbond(self, bond: UTxO) -> UTxO:
        built = build_unbond(
            self.w.context, self.script, bond, self.provider.address, horizon_slots=30
        )
        tx_id = self.w.submit(A.sign(built.built, [self.provider.signing_key]))
        return self.w.utxos_of(tx_id, self.address, 1)[0]

    def wait_withdrawable(self, bond: UTxO) -> None:
        since = read_bond(bond, self.w.deployment).unbonding_since
        assert since is not None
        self.w.wait_until_chain_ms(since + TERMS.unbonding_delay_ms)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BondWorld]:
    with protocol_world(tmp_path_factory.mktemp("bonds")) as w:
        provider = w.providers[0]
        w.fund(provider)
        w.mint_ntx(provider.address, 20 * BONDED)
        yield BondWorld(w, bond_script(w.deployment, TERMS), provider)


def refused_by_bond(world: BondWorld, tx: Transaction) -> str:
    with pytest.raises(TransactionRejectedError) as info:
        world.w.submit(tx)
    reason = info.value.reason
    assert "400" in reason and "ScriptFailure" in reason and "spend #" in reason, reason
    return reason


def malicious(world: BondWorld, plan: A.TxPlan, payer: Any) -> A.BuiltTx:
    return A.finalize(
        world.w.context,
        plan,
        payer.utxos(world.w.context),
        on_script_failure=A.declare_share_of_max(world.w.context),
    )


def ntx(world: BondWorld, lovelace: int, amount: int) -> Value:
    d = world.w.deployment
    return Value(
        lovelace,
        MultiAsset.from_primitive(
            {bytes.fromhex(d.ntx_policy): {bytes.fromhex(d.ntx_name): amount}}
        ),
    )


def honest_slash(world: BondWorld, bond: UTxO, citation: Any) -> str:
    q = world.w.oracle_quorum
    built = build_slash(
        world.w.context,
        world.w.deployment,
        world.script,
        TERMS,
        bond,
        citation,
        world.w.submitter.address,
        [o.pkh for o in q],
        q[0].address,
    )
    return world.w.submit(world.quorum_sign(built.built))


# --- slash ---------------------------------------------------------------------------------


def test_double_slash_with_the_same_attestation_is_refused(world: BondWorld) -> None:
    bond = world.lock()
    citation = world.citation()
    tx_id = honest_slash(world, bond, citation)
    rest = world.w.utxos_of(tx_id, world.address, 1)[0]
    info = read_bond(rest, world.w.deployment)
    assert info.ntx == BONDED - SHARE and info.datum.slashed == [citation.job_id]
    # The builder refuses outright; an attacker forges the off-chain view of the datum.
    with pytest.raises(BuilderError, match="already slashed"):
        world.slash_plan(rest, citation)
    forged = UTxO(
        rest.input,
        TransactionOutput(
            rest.output.address,
            rest.output.amount,
            datum=dataclasses.replace(info.datum, slashed=[]),
        ),
    )
    plan = world.slash_plan(forged, citation)
    again = dataclasses.replace(info.datum, amount=info.ntx - TERMS.share_of(info.ntx))
    again = dataclasses.replace(again, slashed=[citation.job_id, citation.job_id])
    plan.outputs[1] = TransactionOutput(
        plan.outputs[1].address, plan.outputs[1].amount, datum=again
    )
    refused_by_bond(world, world.quorum_sign(malicious(world, plan, world.w.oracle_quorum[0])))
    # Honest twin: another attestation slashes the remainder.
    honest_slash(world, rest, world.citation())


def test_slash_above_the_share_is_refused(world: BondWorld) -> None:
    bond = world.lock()
    citation = world.citation()
    plan = world.slash_plan(bond, citation)
    pay, rest = plan.outputs
    more = SHARE + 100
    plan.outputs = [
        TransactionOutput(pay.address, ntx(world, pay.amount.coin, more), datum=pay.datum),
        TransactionOutput(
            rest.address,
            ntx(world, rest.amount.coin, BONDED - more),
            datum=bt.BondDatum(
                world.provider.pkh.payload, BONDED - more, bt.Bonded(), [citation.job_id]
            ),
        ),
    ]
    refused_by_bond(world, world.quorum_sign(malicious(world, plan, world.w.oracle_quorum[0])))
    honest_slash(world, bond, citation)


def test_slash_paying_someone_else_than_the_named_submitter_is_refused(world: BondWorld) -> None:
    bond = world.lock()
    citation = world.citation()
    plan = world.slash_plan(bond, citation)
    pay = plan.outputs[0]
    thief = world.w.oracle_quorum[0].address
    plan.outputs[0] = TransactionOutput(thief, pay.amount, datum=pay.datum)
    refused_by_bond(world, world.quorum_sign(malicious(world, plan, world.w.oracle_quorum[0])))
    honest_slash(world, bond, citation)


def test_slash_after_withdrawal_is_refused_by_the_ledger(world: BondWorld) -> None:
    bond = world.unbond(world.lock())
    world.wait_withdrawable(bond)
    citation = world.citation()
    plan = world.slash_plan(bond, citation)  # prepared while the bond is still there
    built = build_withdraw(
        world.w.context, world.script, TERMS, bond, world.provider.address, world.provider.address
    )
    world.w.submit(A.sign(built.built, [world.provider.signing_key]))
    late = world.quorum_sign(malicious(world, plan, world.w.oracle_quorum[0]))
    with pytest.raises(TransactionRejectedError) as info:
        world.w.submit(late)
    assert "BadInputsUTxO" in info.value.reason, info.value.reason


def test_slash_while_unbonding_is_accepted(world: BondWorld) -> None:
    """Announcing unbonding does not escape a slash during the delay."""
    bond = world.unbond(world.lock())
    tx_id = honest_slash(world, bond, world.citation())
    rest = read_bond(world.w.utxos_of(tx_id, world.address, 1)[0], world.w.deployment)
    assert rest.unbonding_since == read_bond(bond, world.w.deployment).unbonding_since


# --- withdraw ------------------------------------------------------------------------------


def _withdraw_plan(world: BondWorld, bond: UTxO, *, start: int, signer: Any) -> A.TxPlan:
    return A.TxPlan(
        change_address=signer.address,
        script_inputs=[A.ScriptInput(bond, bt.Withdraw())],
        outputs=[TransactionOutput(signer.address, bond.output.amount)],
        scripts=[world.script],
        required_signers=[signer.pkh],
        validity_start=start,
    )


def test_withdrawal_before_the_delay_is_refused(world: BondWorld) -> None:
    bond = world.unbond(world.lock())
    with pytest.raises(BuilderError, match="unbonding delay not passed"):
        build_withdraw(
            world.w.context,
            world.script,
            TERMS,
            bond,
            world.provider.address,
            world.provider.address,
        )
    now = tip_slot(world.w.context)
    plan = _withdraw_plan(world, bond, start=now, signer=world.provider)
    refused_by_bond(
        world, A.sign(malicious(world, plan, world.provider), [world.provider.signing_key])
    )
    world.wait_withdrawable(bond)
    built = build_withdraw(
        world.w.context, world.script, TERMS, bond, world.provider.address, world.provider.address
    )
    world.w.submit(A.sign(built.built, [world.provider.signing_key]))


def test_withdrawal_without_announced_unbonding_is_refused(world: BondWorld) -> None:
    bond = world.lock()
    plan = _withdraw_plan(world, bond, start=tip_slot(world.w.context), signer=world.provider)
    refused_by_bond(
        world, A.sign(malicious(world, plan, world.provider), [world.provider.signing_key])
    )


def test_withdrawal_by_someone_else_is_refused(world: BondWorld) -> None:
    bond = world.unbond(world.lock())
    world.wait_withdrawable(bond)
    thief = world.w.providers[1]
    world.w.fund(thief)
    clock = ChainClock.of(world.w.context)
    since = read_bond(bond, world.w.deployment).unbonding_since
    assert since is not None
    start = clock.slot_after(since + TERMS.unbonding_delay_ms - 1)
    plan = _withdraw_plan(world, bond, start=start, signer=thief)
    refused_by_bond(world, A.sign(malicious(world, plan, thief), [thief.signing_key]))
    built = build_withdraw(
        world.w.context, world.script, TERMS, bond, world.provider.address, world.provider.address
    )
    world.w.submit(A.sign(built.built, [world.provider.signing_key]))


# --- following slashes -------------------------------------------------------------------


def test_a_slash_is_followed_as_a_movement_with_sound_evidence(world: BondWorld) -> None:
    follower = follower_for(world.w.context)
    since = follower.tip()
    bond = world.lock()
    citation = world.citation()
    tx_id = honest_slash(world, bond, citation)
    classifier = BondClassifier(TERMS)
    d = world.w.deployment
    step = follower.follow([since], classifier.scripts(d), since)
    (tx,) = [t for t in step.txs if t.hash == tx_id]
    (movement,) = classify(tx, d, (classifier,))
    assert movement.kind == SLASH and movement.ntx == SHARE
    assert movement.job_id == citation.job_id.hex()
    assert movement.escrow_ref == out_ref_text(bond.input)
    assert movement.address == provider_address(
        world.provider.pkh.payload.hex(), d.pycardano_network
    )
    (evidence,) = slash_evidence(tx, d, classifier.bond_hash(d))
    assert evidence.sound and evidence.pot_root == ROOT.hex()
    assert evidence.submitter == str(world.w.submitter.address)
    assert evidence.remaining == BONDED - SHARE


# --- the provider's CLI --------------------------------------------------------------------


def test_the_provider_cli_locks_unbonds_and_audits_with_the_worker_key(
    world: BondWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from typer.testing import CliRunner

    from chain.offchain.bond_cli import app

    for name, value in {
        "PROOFNET_CHAIN_BACKEND": "devnet",
        "PROOFNET_NETWORK": "devnet",
        "PROOFNET_DEVNET_URL": world.w.devnet.url,
        "PROOFNET_BOND_UNBONDING_DELAY_MS": str(TERMS.unbonding_delay_ms),
        "PROOFNET_BOND_SLASH_PERMILLE": str(TERMS.slash_permille),
    }.items():
        monkeypatch.setenv(name, value)
    provider = world.w.providers[2]
    world.w.fund(provider)
    world.w.mint_ntx(provider.address, 1_000)
    # The worker's identity key file format (worker.identity), holding the same seed.
    key_file = tmp_path / "worker.skey"
    envelope = {"type": "ProofnetWorkerSigningKey_ed25519", "description": "", "cborHex": ""}
    envelope["cborHex"] = "5820" + provider.signing_key.payload.hex()
    key_file.write_text(json.dumps(envelope))
    deployment_file = tmp_path / "deployment.json"
    world.w.deployment.save(deployment_file)
    runner = CliRunner()
    common = ["--deployment", str(deployment_file)]

    def run(*args: str) -> str:
        result = runner.invoke(app, [*args, *common])
        assert result.exit_code == 0, result.output
        return str(result.output)

    def status() -> list[dict[str, Any]]:
        return list(json.loads(run("status", "--key-file", str(key_file), "--json"))["bonds"])

    lock_out = run("lock", "--key-file", str(key_file), "--amount", "300")
    tx_id = lock_out.split("bond: ")[1].split("#")[0]
    world.w.devnet.wait_for_tx(tx_id)
    (bond,) = status()
    assert bond["ntx"] == 300 and bond["state"] == "bonded" and bond["counts"]
    assert bond["provider"] == provider.pkh.payload.hex()
    unbond_out = run("unbond", "--key-file", str(key_file))
    world.w.devnet.wait_for_tx(unbond_out.split("announced: ")[1].split("#")[0])
    (bond,) = status()
    assert bond["state"] == "unbonding" and not bond["counts"]
    # Slashing is the oracle quorum's, each oracle on its own machine with its own key
    # (`proofnet oracle slash`, tests/oracle/test_slash_quorum_devnet.py): no command here
    # takes several oracles' keys.
    refused = runner.invoke(app, ["slash", *common])
    assert refused.exit_code == 2 and "No such command" in refused.output, refused.output
