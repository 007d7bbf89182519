"""The compiled provider bond validator on ledger-shaped contexts: Unbond, Withdraw, Slash.

Each test is one attack on the honest transaction of its path (and the honest twin runs
first, so a refusal proves the attack). The slash cites a real attestation signed with the
provider's Ed25519 key (`proofnet.messages.attestation`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import pytest
from attestation_support import signed_attestation
from contracts_harness import (
    NTX_NAME,
    NTX_POLICY,
    Tx,
    config_input,
    evaluate,
    h28,
    h32,
    key_address,
    ntx_value,
    out,
    ref,
    script_address,
    script_hash_bytes,
    txin,
    with_tokens,
)
from nacl.signing import SigningKey
from pycardano import PlutusData, PlutusV3Script

from chain.contracts import bond_types as B
from chain.contracts import ledger as L
from chain.contracts import types as T
from chain.offchain import scripts as S
from chain.offchain.builders.bond import Citation, citation_of

DELAY = 1_000_000
PERMILLE = 250
BONDED = 1_000
SHARE = BONDED * PERMILLE // 1000
PROVIDER_KEY = SigningKey(b"\x09" * 32)
PROVIDER_VK = bytes(PROVIDER_KEY.verify_key)
PROVIDER = hashlib.blake2b(PROVIDER_VK, digest_size=28).digest()
JOB = h32("job")
ROOT = h32("pot-root")
SUBMITTER = key_address(h28("submitter"), h28("submitter-stake"))
BOND_REF = ref("bond")
NOW = 50_000_000


def attestation(key: SigningKey = PROVIDER_KEY, job: bytes = JOB, root: bytes = ROOT) -> bytes:
    return signed_attestation(key, job, root)


@dataclass(frozen=True)
class World:
    script: PlutusV3Script
    address: L.Address
    config: L.TxInInfo
    oracles: list[bytes]


@pytest.fixture(scope="module")
def world(deployment, oracles, admins) -> World:  # type: ignore[no-untyped-def]
    script = S.apply_params(
        "bond",
        deployment.config_policy.payload,
        deployment.oracle_config_hash.payload,
        NTX_POLICY,
        NTX_NAME,
        DELAY,
        PERMILLE,
    )
    cfg = T.OracleConfigDatum(oracles, 2, admins, 2, deployment.batch_hash.payload)
    return World(
        script, script_address(script_hash_bytes(script)), config_input(deployment, cfg), oracles
    )


@pytest.fixture(scope="module")
def citation() -> Citation:
    return citation_of(attestation(), JOB, ROOT)


def bond_datum(state: object = None, slashed: list[bytes] | None = None) -> B.BondDatum:
    return B.BondDatum(PROVIDER, BONDED, state or B.Bonded(), slashed or [])


def bond_input(w: World, datum: B.BondDatum | None = None, value=None) -> L.TxInInfo:  # type: ignore[no-untyped-def]
    v = value if value is not None else ntx_value(3_000_000, BONDED)
    return txin(BOND_REF, out(w.address, v, datum or bond_datum()))


def fee_input() -> L.TxInInfo:
    return txin(ref("fee"), out(key_address(h28("payer")), ntx_value(9_000_000, 0)))


def run(w: World, tx: Tx, redeemer: object) -> bool:
    return evaluate(w.script, tx.spend(BOND_REF, redeemer)).ok  # type: ignore[arg-type]


# --- Slash -------------------------------------------------------------------------------


def slash_tx(
    w: World,
    *,
    datum: B.BondDatum | None = None,
    pay: int = SHARE,
    pay_to: L.Address = SUBMITTER,
    rest_datum: B.BondDatum | None = None,
    signers: list[bytes] | None = None,
) -> Tx:
    d = datum or bond_datum()
    rest = rest_datum or B.BondDatum(PROVIDER, BONDED - pay, d.state, [JOB, *d.slashed])
    return Tx(
        inputs=[bond_input(w, d), fee_input()],
        reference_inputs=[w.config],
        outputs=[
            out(pay_to, ntx_value(2_000_000, pay), BOND_REF),
            out(w.address, ntx_value(3_000_000, BONDED - pay), rest),
        ],
        lower=NOW,
        upper=NOW + 100_000,
        signatories=w.oracles[:2] if signers is None else signers,
    )


def slash(tx: Tx, c: Citation, **changes: object) -> B.Slash:
    r = B.Slash(
        config_ref_index=tx.ref_index(w_config_ref(tx)),
        payout_index=0,
        bond_index=1,
        submitter=SUBMITTER,
        job_id=c.job_id,
        merkle_root=c.merkle_root,
        provider_key=c.provider_key,
        signature=c.signature,
        signed=c.chunks,
        tag_at=c.tag_at,
        job_id_at=c.job_id_at,
        root_at=c.root_at,
    )
    return replace(r, **changes)


def w_config_ref(tx: Tx) -> L.TxOutRef:
    return tx.reference_inputs[0].out_ref


def test_honest_slash_pays_the_share_to_the_named_submitter(world, citation) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world)
    assert run(world, tx, slash(tx, citation))


def test_slash_while_unbonding_is_accepted(world, citation) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world, datum=bond_datum(B.Unbonding(NOW)))
    assert run(world, tx, slash(tx, citation))


def test_double_slash_for_the_same_job_is_refused(world, citation) -> None:  # type: ignore[no-untyped-def]
    once = bond_datum(slashed=[JOB])
    tx = slash_tx(
        world,
        datum=once,
        pay=SHARE,
        rest_datum=B.BondDatum(PROVIDER, BONDED - SHARE, B.Bonded(), [JOB, JOB]),
    )
    assert not run(world, tx, slash(tx, citation))


def test_slash_above_the_share_is_refused(world, citation) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world, pay=SHARE + 1)
    assert not run(world, tx, slash(tx, citation))


def test_slash_paying_someone_else_than_the_named_submitter_is_refused(world, citation) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world, pay_to=key_address(h28("oracle-friend")))
    assert not run(world, tx, slash(tx, citation))


def test_slash_payout_with_the_submitters_payment_key_but_another_stake_key_is_refused(
    world, citation
) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world, pay_to=key_address(h28("submitter"), h28("attacker-stake")))
    assert not run(world, tx, slash(tx, citation))


def test_slash_without_the_oracle_quorum_is_refused(world, citation) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world, signers=world.oracles[:1])
    assert not run(world, tx, slash(tx, citation))


def test_slash_with_a_config_outside_the_config_script_is_refused(
    world, citation, deployment
) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world)
    real = tx.reference_inputs[0]
    fake = txin(
        real.out_ref,
        out(key_address(h28("admin-wallet")), real.resolved.value, real.resolved.datum.datum),
    )
    tx.reference_inputs = [fake]
    assert not run(world, tx, slash(tx, citation))


def test_slash_citing_another_providers_attestation_is_refused(world) -> None:  # type: ignore[no-untyped-def]
    other = citation_of(attestation(SigningKey(b"\x05" * 32)), JOB, ROOT)
    tx = slash_tx(world)
    assert not run(world, tx, slash(tx, other))


def test_slash_with_a_forged_signature_is_refused(world, citation) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world)
    forged = bytes([citation.signature[0] ^ 1]) + citation.signature[1:]
    assert not run(world, tx, slash(tx, citation, signature=forged))


def test_slash_citing_a_job_the_attestation_does_not_name_is_refused(world, citation) -> None:  # type: ignore[no-untyped-def]
    other_job = h32("other-job")
    tx = slash_tx(world, rest_datum=B.BondDatum(PROVIDER, BONDED - SHARE, B.Bonded(), [other_job]))
    assert not run(world, tx, slash(tx, citation, job_id=other_job))


def test_slash_citing_a_root_the_attestation_does_not_name_is_refused(world, citation) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world)
    assert not run(world, tx, slash(tx, citation, merkle_root=h32("other-root")))


def test_slash_that_does_not_record_the_job_is_refused(world, citation) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world, rest_datum=B.BondDatum(PROVIDER, BONDED - SHARE, B.Bonded(), []))
    assert not run(world, tx, slash(tx, citation))


def test_slash_that_takes_the_bonds_ada_is_refused(world, citation) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world)
    rest = tx.outputs[1]
    tx.outputs[1] = L.TxOut(
        rest.address, ntx_value(1_000_000, BONDED - SHARE), rest.datum, rest.reference_script
    )
    assert not run(world, tx, slash(tx, citation))


def test_slash_payout_tagged_for_another_bond_is_refused(world, citation) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world)
    pay = tx.outputs[0]
    tx.outputs[0] = L.TxOut(
        pay.address, pay.value, L.SomeOutputDatum(ref("other-bond")), pay.reference_script
    )
    assert not run(world, tx, slash(tx, citation))


def test_two_bonds_in_one_transaction_are_refused(world, citation) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world)
    tx.inputs.append(
        txin(ref("bond-2"), out(world.address, ntx_value(3_000_000, BONDED), bond_datum()))
    )
    assert not run(world, tx, slash(tx, citation))


# --- Unbond --------------------------------------------------------------------------------


def unbond_tx(
    w: World, *, since: int = NOW + 100_000, signers: list[bytes] | None = None, value=None
) -> Tx:  # type: ignore[no-untyped-def]
    return Tx(
        inputs=[bond_input(w), fee_input()],
        outputs=[
            out(w.address, value or ntx_value(3_000_000, BONDED), bond_datum(B.Unbonding(since)))
        ],
        lower=NOW,
        upper=NOW + 100_000,
        signatories=[PROVIDER] if signers is None else signers,
    )


def test_honest_unbond_announces_on_chain(world) -> None:  # type: ignore[no-untyped-def]
    assert run(world, unbond_tx(world), B.Unbond(0))


def test_unbond_by_someone_else_is_refused(world) -> None:  # type: ignore[no-untyped-def]
    assert not run(world, unbond_tx(world, signers=[h28("thief")]), B.Unbond(0))


def test_backdated_unbonding_start_is_refused(world) -> None:  # type: ignore[no-untyped-def]
    assert not run(world, unbond_tx(world, since=NOW), B.Unbond(0))


def test_unbond_that_takes_part_of_the_bond_is_refused(world) -> None:  # type: ignore[no-untyped-def]
    assert not run(world, unbond_tx(world, value=ntx_value(3_000_000, BONDED - 1)), B.Unbond(0))


# --- Withdraw ------------------------------------------------------------------------------


def withdraw_tx(
    w: World, *, lower: int, state: object = None, signers: list[bytes] | None = None
) -> Tx:  # type: ignore[no-untyped-def]
    return Tx(
        inputs=[bond_input(w, bond_datum(state or B.Unbonding(NOW))), fee_input()],
        outputs=[out(key_address(PROVIDER), ntx_value(3_000_000, BONDED))],
        lower=lower,
        upper=lower + 100_000,
        signatories=[PROVIDER] if signers is None else signers,
    )


def test_honest_withdraw_after_the_delay(world) -> None:  # type: ignore[no-untyped-def]
    assert run(world, withdraw_tx(world, lower=NOW + DELAY), B.Withdraw())


def test_withdraw_before_the_delay_is_refused(world) -> None:  # type: ignore[no-untyped-def]
    assert not run(world, withdraw_tx(world, lower=NOW + DELAY - 1), B.Withdraw())


def test_withdraw_of_a_bonded_bond_is_refused(world) -> None:  # type: ignore[no-untyped-def]
    assert not run(world, withdraw_tx(world, lower=NOW + DELAY, state=B.Bonded()), B.Withdraw())


def test_withdraw_by_someone_else_is_refused(world) -> None:  # type: ignore[no-untyped-def]
    assert not run(
        world, withdraw_tx(world, lower=NOW + DELAY, signers=[h28("thief")]), B.Withdraw()
    )


def test_withdraw_with_an_open_lower_bound_is_refused(world) -> None:  # type: ignore[no-untyped-def]
    tx = withdraw_tx(world, lower=NOW + DELAY)
    tx.lower = None
    assert not run(world, tx, B.Withdraw())


# --- more of the same paths ----------------------------------------------------------------


def test_unbond_that_rewrites_the_provider_is_refused(world) -> None:  # type: ignore[no-untyped-def]
    tx = unbond_tx(world)
    o = tx.outputs[0]
    stolen = B.BondDatum(h28("thief"), BONDED, B.Unbonding(NOW + 100_000), [])
    tx.outputs[0] = L.TxOut(o.address, o.value, L.SomeOutputDatum(stolen), o.reference_script)
    assert not run(world, tx, B.Unbond(0))


def test_unbond_that_moves_the_bond_elsewhere_is_refused(world) -> None:  # type: ignore[no-untyped-def]
    tx = unbond_tx(world)
    o = tx.outputs[0]
    tx.outputs[0] = L.TxOut(key_address(PROVIDER), o.value, o.datum, o.reference_script)
    assert not run(world, tx, B.Unbond(0))


def test_slash_leaving_a_reference_script_on_the_bond_is_refused(world, citation) -> None:  # type: ignore[no-untyped-def]
    tx = slash_tx(world)
    rest = tx.outputs[1]
    tx.outputs[1] = L.TxOut(rest.address, rest.value, rest.datum, L.SomeScriptHash(h28("junk")))
    assert not run(world, tx, slash(tx, citation))


def test_a_bond_dusted_with_other_tokens_is_still_slashable_and_keeps_them(world, citation) -> None:  # type: ignore[no-untyped-def]
    junk = {h28(f"junk{i}"): {b"x": 1} for i in range(20)}
    dusted = with_tokens(3_000_000, {NTX_POLICY: {NTX_NAME: BONDED}, **junk})
    tx = slash_tx(world)
    tx.inputs[0] = bond_input(world, value=dusted)
    rest = tx.outputs[1]
    kept = with_tokens(3_000_000, {NTX_POLICY: {NTX_NAME: BONDED - SHARE}, **junk})
    tx.outputs[1] = L.TxOut(rest.address, kept, rest.datum, rest.reference_script)
    assert run(world, tx, slash(tx, citation))
    tx.outputs[1] = rest  # the slasher keeps the junk tokens: refused
    assert not run(world, tx, slash(tx, citation))


@dataclass
class _Unknown(PlutusData):
    CONSTR_ID = 3


def test_a_redeemer_of_another_constructor_moves_nothing(world, citation) -> None:  # type: ignore[no-untyped-def]
    """It reaches the Slash branch and fails there (no field), even with the quorum."""
    tx = slash_tx(world)
    assert not run(world, tx, _Unknown())
    assert not run(world, unbond_tx(world), _Unknown())
