"""Happy paths of every builder and redeemer on a running devnet (one deployment per module):
deploy, mint test NTX, lock (key and CIP-30 flows, and from UTxOs carrying a reference
script), settle a batch, pack a batch by measurement, refund after the deadline, cancel;
and, without a chain, the deployment file and the config reader's address check."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from protocol_fixtures import ProtocolWorld, protocol_world, wallet
from pycardano import (
    Address,
    MultiAsset,
    Network,
    ScriptHash,
    TransactionInput,
    TransactionOutput,
    TransactionWitnessSet,
    UTxO,
    Value,
    VerificationKeyWitness,
    plutus_script_hash,
)
from pycardano.serialization import NonEmptyOrderedSet

from chain.contracts import types as t
from chain.offchain import scripts as S
from chain.offchain.builders import assembly as A
from chain.offchain.builders import fees
from chain.offchain.builders.chain_time import ChainClock
from chain.offchain.builders.deployment import Deployment
from chain.offchain.builders.errors import BuilderError, TransactionTooLarge
from chain.offchain.builders.lock import (
    EscrowJob,
    assemble,
    build_lock,
    build_lock_unsigned,
    lock_escrows,
)
from chain.offchain.builders.mint import mint_test_ntx
from chain.offchain.builders.onchain import address_data, datum_cbor, out_ref_data
from chain.offchain.builders.protocol_utxos import resolve
from chain.offchain.builders.refund import build_cancel, build_refund
from chain.offchain.builders.settle import (
    MEMO_LABEL,
    Settlement,
    build_settle_batch,
    pack_settle_batch,
)
from chain.offchain.errors import TransactionRejectedError


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProtocolWorld]:
    with protocol_world(tmp_path_factory.mktemp("builders")) as w:
        yield w


def ntx(world: ProtocolWorld, address: Address) -> int:
    unit = world.deployment.ntx_unit
    total = 0
    for u in world.context.utxos(address):
        for policy, assets in u.output.amount.multi_asset.items():
            for name, q in assets.items():
                if policy.payload.hex() + name.payload.hex() == unit:
                    total += q
    return total


def api(world: ProtocolWorld, path: str) -> Any:
    response = httpx.get(f"{world.devnet.url}{path}", timeout=10)
    response.raise_for_status()
    return response.json()


def test_deploy_locks_config_publishes_scripts_and_registers_stake(
    world: ProtocolWorld, tmp_path: Path
) -> None:
    dep = world.deployment
    path = tmp_path / "deployment.json"
    dep.save(path)
    assert Deployment.load(path) == dep
    with pytest.raises(BuilderError, match="unsupported deployment format 3"):
        Deployment.from_json(dep.to_json().replace('"format": 2', '"format": 3'))
    assert dep.config_address.payment_part.payload.hex() == dep.config_policy
    assert dep.oracle_config_hash == dep.config_policy  # one script mints and holds the NFT

    live = resolve(world.context, dep)
    cfg = live.config_datum
    assert cfg.oracles == sorted(o.pkh.payload for o in world.oracles)
    assert cfg.threshold == world.threshold and cfg.admins == [world.admin.pkh.payload]
    assert cfg.batch_credential.hex() == dep.batch_hash
    for utxo, expected in (
        (live.escrow_script, dep.escrow_hash),
        (live.batch_script, dep.batch_hash),
        (live.config_script, dep.oracle_config_hash),
    ):
        assert plutus_script_hash(utxo.output.script).payload.hex() == expected
    account = api(world, f"/accounts/{dep.batch_stake_address}")
    assert account["registered"] is True and account["withdrawable_amount"] == "0"


def test_mint_test_ntx_to_an_address(world: ProtocolWorld) -> None:
    provider = wallet(200)
    before = ntx(world, provider.address)
    tx_id, result = mint_test_ntx(world.context, world.admin, provider.address, 1234)
    world.devnet.wait_for_tx(tx_id)
    assert result.unit == world.deployment.ntx_unit
    assert ntx(world, provider.address) == before + 1234


def test_lock_writes_the_escrow_datum_and_budget(world: ProtocolWorld) -> None:
    job = world.job(budget=4_321)
    (escrow,) = world.lock([job])
    assert escrow.output.address == world.deployment.escrow_address
    datum = t.EscrowDatum.from_cbor(datum_cbor(escrow.output.datum))
    assert datum.job_id == job.job_id and datum.budget == 4_321
    assert datum.submitter == address_data(world.submitter.address)
    assert world.deployment.trusts(datum)
    policy = ScriptHash(bytes.fromhex(world.deployment.ntx_policy))
    assert escrow.output.amount.multi_asset[policy].to_primitive() == {b"NTX": 4_321}


@pytest.mark.parametrize(
    "change",
    [
        {"job_id": b"\x00" * 31},
        {"budget": 0},
        {"budget": 2**64},
        {"deadline": 1},
        {"cancel_allowed_until": 2**62},
        {"nonce": -1},
    ],
)
def test_lock_refuses_malformed_jobs(world: ProtocolWorld, change: dict[str, Any]) -> None:
    job = dataclasses.replace(world.job(), **change)
    with pytest.raises(BuilderError):
        lock_escrows(world.context, world.deployment, [job], world.submitter)


def test_lock_spends_a_utxo_carrying_a_reference_script(world: ProtocolWorld) -> None:
    """A stranger parks a reference script on the only UTxO holding a wallet's NTX (what a
    refund to the submitter could do before the escrow refused it). The lock builder must
    select that UTxO, not report "holds 0", and pay the ledger's reference-script fee."""
    owner = wallet(310, staked=True)
    world.fund(owner, 20_000_000)  # script-free ADA: fees alone never need the parked UTxO
    parked = S.apply_params("escrow")  # about 5 KB: a fee no rounding could hide
    ma = MultiAsset.from_primitive(
        {
            bytes.fromhex(world.deployment.ntx_policy): {
                bytes.fromhex(world.deployment.ntx_name): 700
            }
        }
    )
    gift = A.output_with_min_ada(world.context, owner.address, ma, script=parked)
    plan = A.TxPlan(change_address=world.submitter.address, outputs=[gift])
    built = A.finalize(world.context, plan, world.submitter.utxos(world.context))
    tx_id = world.submit(A.sign(built, [world.submitter.signing_key]))
    (held,) = world.utxos_of(tx_id, owner.address)
    assert held.output.script is not None

    job = world.job(600, submitter=owner)
    result = build_lock(world.context, world.deployment, [job], owner.address)
    body = result.built.tx.transaction_body
    assert held.input in body.inputs
    script_size = len(bytes(parked))
    assert result.built.ref_script_size == script_size
    pp = world.context.protocol_param
    ref_fee = fees.ref_script_fee(pp, script_size)
    assert ref_fee >= 15 * script_size
    least = fees.min_fee(pp, result.built.size, [], script_size)
    assert least <= result.built.fee <= least + 2 * int(pp.min_fee_coefficient)
    assert result.built.fee - fees.min_fee(pp, result.built.size, [], 0) >= ref_fee
    # The ledger charges it: the same lock paying all but the reference-script fee (to
    # its change instead) is refused.
    short = copy.deepcopy(result.built.tx)
    short_body = short.transaction_body
    short_body.fee -= ref_fee
    change = short_body.outputs[-1]
    short_body.outputs[-1] = TransactionOutput(change.address, change.amount + Value(ref_fee))
    with pytest.raises(TransactionRejectedError, match="FeeTooSmallUTxO"):
        world.submit(A.sign(short, [owner.signing_key]))
    world.submit(A.sign(result.built, [owner.signing_key]))
    # The change is script-free: the parked script costs one spend, not every later one.
    left = world.context.utxos(owner.address)
    assert left and all(u.output.script is None for u in left)
    assert ntx(world, owner.address) == 100


def test_lock_refuses_a_script_submitter(world: ProtocolWorld) -> None:
    job = dataclasses.replace(world.job(), submitter=world.deployment.escrow_address)
    with pytest.raises(BuilderError, match="key payment credential"):
        lock_escrows(world.context, world.deployment, [job], world.submitter)


def test_lock_for_a_cip30_wallet_then_assemble(world: ProtocolWorld) -> None:
    unsigned = build_lock_unsigned(
        world.context, world.deployment, [world.job(budget=50)], world.submitter.address
    )
    assert world.submitter.pkh.payload.hex() in unsigned.required_key_hashes
    assert unsigned.signing_inputs
    # What the wallet would return from signTx: a witness set with its vkey witness.
    body_hash = unsigned.result.built.tx.transaction_body.hash()
    key = world.submitter.signing_key
    witness_set = TransactionWitnessSet(
        vkey_witnesses=NonEmptyOrderedSet(
            [VerificationKeyWitness(key.to_verification_key(), key.sign(body_hash))]
        )
    )
    forged = TransactionWitnessSet(
        vkey_witnesses=NonEmptyOrderedSet(
            [VerificationKeyWitness(key.to_verification_key(), key.sign(b"other" * 8))]
        )
    )
    with pytest.raises(BuilderError, match="does not verify"):
        assemble(unsigned.tx_cbor_hex, forged.to_cbor_hex())
    tx = assemble(unsigned.tx_cbor_hex, witness_set.to_cbor_hex())
    assert world.submit(tx) == unsigned.result.tx_id
    escrows = world.utxos_of(unsigned.result.tx_id, world.deployment.escrow_address, 1)
    assert escrows[0].output.datum is not None


def test_settle_a_batch_of_several_escrows(world: ProtocolWorld) -> None:
    p = world.providers
    escrows = world.lock([world.job(1_000), world.job(2_000), world.job(500)])
    submitter_ntx = ntx(world, world.submitter.address)
    before = [ntx(world, w.address) for w in p]
    settlements = [
        Settlement(escrows[0], ((p[0].address, 600),)),
        Settlement(escrows[1], ((p[1].address, 2_000),)),
        Settlement(escrows[2], ((p[2].address, 100), (p[3].address, 200))),
    ]
    quorum = world.oracle_quorum
    root, bundle = b"\x11" * 32, b"\x22" * 32
    batch = build_settle_batch(
        world.context,
        world.deployment,
        settlements,
        root,
        b"batch-happy",
        [o.pkh for o in quorum],
        quorum[0].address,
        bundle_hash=bundle,
    )
    body = batch.built.tx.transaction_body
    assert set(body.required_signers) == {o.pkh for o in quorum}
    deadlines = [t.EscrowDatum.from_cbor(datum_cbor(e.output.datum)).deadline for e in escrows]
    assert body.ttl is not None
    assert ChainClock.of(world.context).posix_ms(body.ttl) <= min(deadlines)
    # Fee is at least the ledger's formula over the signed size and declared units.
    pp = world.context.protocol_param
    assert batch.built.fee >= fees.min_fee(
        pp, batch.built.size, [(batch.built.mem, batch.built.steps)], batch.built.ref_script_size
    )
    assert [e.input_index for e in batch.redeemer.entries] == sorted(
        e.input_index for e in batch.redeemer.entries
    )
    # Co-signing: the first oracle signs here, the second's witness arrives separately.
    partly = A.sign(batch.built, [quorum[0].signing_key])
    key = quorum[1].signing_key
    witness = VerificationKeyWitness(key.to_verification_key(), key.sign(body.hash()))
    tx_id = world.submit(A.add_witnesses(partly, [witness]))

    after = [ntx(world, w.address) for w in p]
    assert [a - b for a, b in zip(after, before, strict=True)] == [600, 2_000, 100, 200]
    assert ntx(world, world.submitter.address) == submitter_ntx + 400 + 200
    meta = {int(m["label"]): m["json_metadata"] for m in api(world, f"/txs/{tx_id}/metadata")}
    assert meta[MEMO_LABEL]["msg"][0] == "proofnet settlement"
    tx = api(world, f"/txs/{tx_id}")
    assert tx["withdrawal_count"] == 1 and tx["redeemer_count"] == 4


def test_pack_settles_as_many_as_fit_by_measurement(world: ProtocolWorld) -> None:
    escrows = world.lock([world.job(100) for _ in range(6)])
    p = world.providers
    candidates = [Settlement(e, ((p[i % 4].address, 10),)) for i, e in enumerate(escrows)]
    quorum = world.oracle_quorum
    signers = [o.pkh for o in quorum]
    # Everything fits under the real limits.
    full = pack_settle_batch(
        world.context, world.deployment, candidates, bytes(32), b"pack", signers, quorum[0].address
    )
    assert len(full.settled) == 6 and not full.left_out
    # Under a tighter memory limit the packer measures, shrinks and leaves the rest out.
    one = full.built.mem / 6
    tight = TightLimits(world.context, max_tx_ex_mem=int(one * 3.5))
    packed = pack_settle_batch(
        tight, world.deployment, candidates, bytes(32), b"pack", signers, quorum[0].address
    )
    assert 1 <= len(packed.settled) < 6 and len(packed.left_out) == 6 - len(packed.settled)
    assert packed.built.mem <= tight.protocol_param.max_tx_ex_mem
    world.submit(A.sign(packed.built, [o.signing_key for o in quorum]))


def test_pack_finds_the_size_limit_without_sending_an_oversize_transaction(
    world: ProtocolWorld,
) -> None:
    """Size binds before memory since the hand-written cores (issue 14.6): the packer must
    shrink a batch that is too large without handing it to the evaluator (a backend may
    refuse the request itself: the devnet answered 413 for a 17 KB transaction)."""
    escrows = world.lock([world.job(100) for _ in range(6)])
    p = world.providers
    candidates = [Settlement(e, ((p[i % 4].address, 10),)) for i, e in enumerate(escrows)]
    quorum = world.oracle_quorum
    signers = [o.pkh for o in quorum]
    one = build_settle_batch(
        world.context,
        world.deployment,
        candidates[:1],
        bytes(32),
        b"size",
        signers,
        quorum[0].address,
    )
    four = build_settle_batch(
        world.context,
        world.deployment,
        candidates[:4],
        bytes(32),
        b"size",
        signers,
        quorum[0].address,
    )
    per = (four.built.size - one.built.size) / 3
    limit = int(one.built.size + 2.5 * per)  # room for 3 settlements, not 4
    sent: list[int] = []

    class Watching(TightLimits):
        def evaluate_tx(self, tx: Any) -> Any:
            sent.append(len(tx.to_cbor()))
            return self._inner.evaluate_tx(tx)

    tight = Watching(world.context, max_tx_size=limit)
    packed = pack_settle_batch(
        tight, world.deployment, candidates, bytes(32), b"size", signers, quorum[0].address
    )
    assert len(packed.settled) == 3 and len(packed.left_out) == 3
    assert packed.built.size <= limit
    assert sent and max(sent) <= limit, (sent, limit)
    world.submit(A.sign(packed.built, [o.signing_key for o in quorum]))
    with pytest.raises(TransactionTooLarge):
        build_settle_batch(
            tight, world.deployment, candidates, bytes(32), b"size", signers, quorum[0].address
        )


class TightLimits:
    """A chain context whose reported limits are lower than the devnet's."""

    def __init__(self, inner: Any, **limits: int) -> None:
        self._inner = inner
        self.protocol_param = dataclasses.replace(inner.protocol_param, **limits)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_refund_after_the_deadline_by_anyone(world: ProtocolWorld) -> None:
    (escrow,) = world.lock([world.job(700, deadline_in_ms=8_000)], min_margin_ms=1_000)
    stranger = wallet(300)
    world.fund(stranger)
    # Said in UTC and from now, never in slots.
    with pytest.raises(
        BuilderError,
        match=r"deadline not passed: refund possible after \d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? UTC \(in \d",
    ) as refused:
        build_refund(world.context, world.deployment, [escrow], stranger.address)
    assert "slot" not in str(refused.value)
    datum = t.EscrowDatum.from_cbor(datum_cbor(escrow.output.datum))
    world.wait_until_chain_ms(datum.deadline + 1_000)
    refund = build_refund(world.context, world.deployment, [escrow], stranger.address)
    tx_id = world.submit(A.sign(refund.built, [stranger.signing_key]))
    (back,) = world.utxos_of(tx_id, world.submitter.address)
    assert back.output.amount == escrow.output.amount
    assert datum_cbor(back.output.datum) == out_ref_data(escrow.input).to_cbor()


def test_refund_paid_from_a_lone_utxo_carrying_a_reference_script(world: ProtocolWorld) -> None:
    """The payer's only UTxO carries a parked reference script: it pays the fee and stands
    as collateral (script transactions need one), and the fee counts its script beside
    the escrow script the refund references."""
    (escrow,) = world.lock([world.job(300, deadline_in_ms=8_000)], min_margin_ms=1_000)
    payer = wallet(311)
    parked = S.ntx_test_policy(world.admin.pkh)
    gift = A.output_with_min_ada(world.context, payer.address, script=parked, at_least=30_000_000)
    plan = A.TxPlan(change_address=world.submitter.address, outputs=[gift])
    built = A.finalize(world.context, plan, world.submitter.utxos(world.context))
    tx_id = world.submit(A.sign(built, [world.submitter.signing_key]))
    (lone,) = world.context.utxos(payer.address)
    assert str(lone.input.transaction_id) == tx_id and lone.output.script is not None
    world.wait_until_chain_ms(t.EscrowDatum.from_cbor(datum_cbor(escrow.output.datum)).deadline)
    world.wait_until_chain_ms(world.now_ms() + 1_000)
    refund = build_refund(world.context, world.deployment, [escrow], payer.address)
    body = refund.built.tx.transaction_body
    assert lone.input in body.inputs and list(body.collateral) == [lone.input]
    escrow_script = resolve(world.context, world.deployment).escrow_script.output.script
    assert refund.built.ref_script_size == len(bytes(parked)) + len(bytes(escrow_script))
    world.submit(A.sign(refund.built, [payer.signing_key]))
    assert all(u.output.script is None for u in world.context.utxos(payer.address))


def test_cancel_with_submitter_and_oracle_quorum(world: ProtocolWorld) -> None:
    (escrow,) = world.lock([world.job(800, cancel_until_in_ms=600_000)])
    quorum = world.oracle_quorum
    with pytest.raises(BuilderError, match="oracles of the config"):
        build_cancel(
            world.context, world.deployment, [escrow], [world.admin.pkh], world.submitter.address
        )
    cancel = build_cancel(
        world.context, world.deployment, [escrow], [o.pkh for o in quorum], world.submitter.address
    )
    keys = [world.submitter.signing_key, *(o.signing_key for o in quorum)]
    tx_id = world.submit(A.sign(cancel.built, keys))
    back = [u for u in world.utxos_of(tx_id, world.submitter.address) if u.output.datum]
    assert len(back) == 1 and back[0].output.amount == escrow.output.amount


def _offline_deployment() -> Deployment:
    return Deployment(
        network="testnet",
        seed="00" * 32 + "#0",
        config_policy="11" * 28,
        config_name=b"proofnet-config".hex(),
        oracle_config_hash="11" * 28,
        escrow_hash="33" * 28,
        batch_hash="44" * 28,
        config_ref="55" * 32 + "#0",
        escrow_script_ref="55" * 32 + "#1",
        batch_script_ref="55" * 32 + "#2",
        config_script_ref="55" * 32 + "#3",
        ntx_policy="66" * 28,
        ntx_name="4e5458",
    )


def test_escrow_job_validation_needs_no_chain() -> None:
    from chain.offchain.builders.lock import escrow_datum

    dep = _offline_deployment()
    owner = wallet(7, staked=True).address
    datum = escrow_datum(dep, EscrowJob(b"\x01" * 32, 10, 10**12, owner), b"\x07" * 32)
    assert datum.batch_credential == bytes.fromhex("44" * 28)
    assert dep.trusts(datum)
    with pytest.raises(BuilderError):
        Deployment.from_json(dep.to_json().replace('"batch_hash"', '"batch"'))


def test_deployment_files_name_their_protocol_version() -> None:
    """Format 2 files record the version of their scripts (absent: the current build's);
    a format-1 file is read only as a 1.0.0 deployment, so escrows locked under it can still
    settle or refund with those scripts; any other claim is refused with a clear error."""
    from chain.offchain.builders.deployment import CURRENT_PROTOCOL, FIRST_PROTOCOL

    dep = _offline_deployment()
    assert dep.protocol_version == CURRENT_PROTOCOL == S.current_version()
    data = json.loads(dep.to_json())
    assert data["format"] == 2 and data["protocol_version"] == CURRENT_PROTOCOL
    del data["protocol_version"]
    assert Deployment.from_json(json.dumps(data)).protocol_version == CURRENT_PROTOCOL
    data["protocol_version"] = FIRST_PROTOCOL  # a 1.0.0 deployment written by this build
    assert Deployment.from_json(json.dumps(data)).protocol_version == FIRST_PROTOCOL

    old = {**data, "format": 1}
    del old["protocol_version"]
    assert Deployment.from_json(json.dumps(old)).protocol_version == FIRST_PROTOCOL
    with pytest.raises(BuilderError, match="format 1 files are read only as protocol 1.0.0"):
        Deployment.from_json(json.dumps({**old, "protocol_version": CURRENT_PROTOCOL}))
    with pytest.raises(BuilderError, match="unsupported deployment format 3"):
        Deployment.from_json(json.dumps({**data, "format": 3}))
    assert S.release_blueprint(FIRST_PROTOCOL) != S.BLUEPRINT_PATH
    with pytest.raises(S.ScriptLoadError):
        S.release_blueprint("0.9.0")


def test_release_1_0_0_keeps_its_separate_config_nft_policy() -> None:
    """1.0.0 deployments derive their scripts as 1.0.0 did (config_nft(seed) is the NFT's
    policy, oracle_config takes that policy); the current build's oracle-config script is
    itself the policy."""
    seed = TransactionInput.from_primitive(["88" * 32, 0])
    old = S.protocol_scripts(seed, Network.TESTNET, release="1.0.0")
    new = S.protocol_scripts(seed, Network.TESTNET)
    assert old.config_nft is not None and new.config_nft is None
    assert old.config_policy == S.script_hash(old.config_nft) != old.oracle_config_hash
    assert new.config_policy == new.oracle_config_hash
    assert old.batch_hash != new.batch_hash and old.escrow_hash != new.escrow_hash


def test_escrow_datums_of_both_versions_read_as_todays() -> None:
    """Builders and the auditor read 1.0.0 escrows (12 fields) beside 2.0.0 ones; a 1.0.0
    datum pins no oracle set. Neither schema is taken for foreign data."""
    from chain.offchain.builders.lock import escrow_datum
    from chain.offchain.builders.onchain import EscrowDatumV1, escrow_datum_from_cbor

    dep = _offline_deployment()
    owner = wallet(7, staked=True).address
    current = escrow_datum(dep, EscrowJob(b"\x01" * 32, 10, 10**12, owner), b"\x07" * 32)
    assert escrow_datum_from_cbor(current.to_cbor()) == current
    old = EscrowDatumV1.of(current)
    assert escrow_datum_from_cbor(old.to_cbor()) == dataclasses.replace(current, oracle_set=b"")
    from pycardano.exception import PyCardanoException

    with pytest.raises(PyCardanoException):
        escrow_datum_from_cbor(bytes.fromhex("d8799f01ff"))


class _ConfigAt:
    """A backend that answers the config address with a config NFT UTxO at `address`: a
    stand-in for a faulty or lying Blockfrost (the devnet answers addresses exactly, and
    the scripts refuse to mint or move the NFT elsewhere, so no real chain can show it)."""

    def __init__(self, utxo: UTxO) -> None:
        self.utxo = utxo

    def utxos(self, address: Address) -> list[UTxO]:
        return [self.utxo]


def _config_utxo(dep: Deployment, address: Address) -> UTxO:
    nft = MultiAsset.from_primitive(
        {bytes.fromhex(dep.config_policy): {bytes.fromhex(dep.config_name): 1}}
    )
    datum = t.OracleConfigDatum([b"\x01" * 28], 1, [b"\x02" * 28], 1, b"\x03" * 28)
    return UTxO(
        TransactionInput.from_primitive(["77" * 32, 0]),
        TransactionOutput(address, Value(2_000_000, nft), datum=datum),
    )


@pytest.mark.parametrize("where", ["key wallet", "another script"])
def test_config_reader_refuses_a_config_nft_at_a_wrong_address(where: str) -> None:
    dep = _offline_deployment()
    away = (
        wallet(8).address
        if where == "key wallet"
        else Address(ScriptHash(bytes.fromhex("99" * 28)), network=dep.pycardano_network)
    )
    with pytest.raises(BuilderError, match="not at the oracle-config script"):
        resolve(_ConfigAt(_config_utxo(dep, away)), dep)  # type: ignore[arg-type]
    # The same UTxO at the config script passes the address check (and then wants the
    # deployment's reference scripts, which this offline backend does not hold).
    with pytest.raises(BuilderError, match="reference script"):
        resolve(_ConfigAt(_config_utxo(dep, dep.config_address)), dep)  # type: ignore[arg-type]
