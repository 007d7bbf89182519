"""The compiled escrow validator on ledger-shaped contexts: Settle, Refund, Cancel."""

from __future__ import annotations

import pytest
from contracts_harness import (
    CONFIG_REF,
    DEADLINE,
    Tx,
    config_input,
    escrow_datum,
    evaluate,
    h28,
    key_address,
    ntx_value,
    out,
    ref,
    script_address,
    txin,
    with_tokens,
)

from chain.contracts import ledger as L
from chain.contracts import types as T
from chain.offchain.oracle_set import oracle_set_hash

SUB = h28("submitter")
SUB_STAKE = h28("submitter-stake")
SUBMITTER = key_address(SUB, SUB_STAKE)
ESCROW_REF = ref("escrow")
VALUE = ntx_value(3_000_000, 100)


def _datum(deployment, **kw):  # type: ignore[no-untyped-def]
    args = dict(
        submitter=SUBMITTER,
        submitter_pkh=SUB,
        budget=100,
        deadline=DEADLINE,
        config_policy=deployment.config_policy.payload,
        batch_credential=deployment.batch_hash.payload,
    )
    args.update(kw)
    return escrow_datum(**args)


def _tx(deployment, datum=None, value=VALUE, **kw) -> Tx:  # type: ignore[no-untyped-def]
    d = datum if datum is not None else _datum(deployment)
    escrow = txin(ESCROW_REF, out(script_address(deployment.escrow_hash.payload), value, d))
    fee_input = txin(ref("fee"), out(key_address(h28("anyone")), ntx_value(9_000_000, 0)))
    return Tx(inputs=[escrow, fee_input], **kw)


def _refund_output(value=VALUE, address=SUBMITTER, tag=ESCROW_REF) -> L.TxOut:  # type: ignore[no-untyped-def]
    return out(address, value, tag)


# --- Settle ---------------------------------------------------------------------------


def test_settle_forwards_to_the_batch_withdrawal(deployment) -> None:  # type: ignore[no-untyped-def]
    tx = _tx(deployment, withdrawals={L.ScriptCredential(deployment.batch_hash.payload): 0})
    assert evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Settle())).ok


def test_settle_without_batch_withdrawal_fails(deployment) -> None:  # type: ignore[no-untyped-def]
    assert not evaluate(deployment.escrow, _tx(deployment).spend(ESCROW_REF, T.Settle())).ok


def test_settle_with_withdrawal_from_another_credential_fails(deployment) -> None:  # type: ignore[no-untyped-def]
    other = {
        L.ScriptCredential(h28("other")): 0,
        L.PubKeyCredential(deployment.batch_hash.payload): 0,
    }
    tx = _tx(deployment, withdrawals=other)
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Settle())).ok


def test_spend_without_datum_fails(deployment) -> None:  # type: ignore[no-untyped-def]
    tx = _tx(deployment, withdrawals={L.ScriptCredential(deployment.batch_hash.payload): 0})
    ctx = tx.spend(ESCROW_REF, T.Settle())
    ctx.purpose = L.SpendingScript(ESCROW_REF, L.NoDatum())
    assert not evaluate(deployment.escrow, ctx).ok


# --- Refund ---------------------------------------------------------------------------


def _refund_tx(deployment, **kw) -> Tx:  # type: ignore[no-untyped-def]
    params = dict(lower=DEADLINE + 1, upper=DEADLINE + 100_000, outputs=[_refund_output()])
    params.update(kw)
    return _tx(deployment, **params)


def test_refund_after_deadline_by_anyone(deployment) -> None:  # type: ignore[no-untyped-def]
    result = evaluate(deployment.escrow, _refund_tx(deployment).spend(ESCROW_REF, T.Refund(0)))
    assert result.ok, result.logs


@pytest.mark.parametrize("lower", [DEADLINE, DEADLINE - 1, None])
def test_refund_needs_lower_bound_after_deadline(deployment, lower) -> None:  # type: ignore[no-untyped-def]
    tx = _refund_tx(deployment, lower=lower)
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Refund(0))).ok


def test_refund_to_submitter_payment_key_with_attacker_stake_fails(deployment) -> None:  # type: ignore[no-untyped-def]
    hijacked = key_address(SUB, h28("attacker-stake"))
    tx = _refund_tx(deployment, outputs=[_refund_output(address=hijacked)])
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Refund(0))).ok


def test_refund_of_part_of_the_value_fails(deployment) -> None:  # type: ignore[no-untyped-def]
    tx = _refund_tx(deployment, outputs=[_refund_output(value=ntx_value(3_000_000, 99))])
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Refund(0))).ok


@pytest.mark.parametrize("tag", [None, ref("another-escrow")])
def test_refund_output_must_be_tagged_with_this_escrow(deployment, tag) -> None:  # type: ignore[no-untyped-def]
    tx = _refund_tx(deployment, outputs=[out(SUBMITTER, VALUE, tag)])
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Refund(0))).ok


def _with_reference_script(o: L.TxOut) -> L.TxOut:
    return L.TxOut(o.address, o.value, o.datum, L.SomeScriptHash(h28("a parked script")))


def test_refund_output_datum_is_only_the_tag(deployment) -> None:  # type: ignore[no-untyped-def]
    """The tag with something riding along (same constructor, an extra field) is refused:
    the escrow compares the whole inline datum with its out-ref."""
    from dataclasses import dataclass

    @dataclass
    class TagPlus(L.PlutusData):
        CONSTR_ID = 0
        id: bytes
        idx: int
        extra: bytes

    tag = TagPlus(ESCROW_REF.id, ESCROW_REF.idx, b"riding along")
    tx = _refund_tx(deployment, outputs=[out(SUBMITTER, VALUE, tag)])
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Refund(0))).ok


def test_refund_output_carrying_a_reference_script_fails(deployment) -> None:  # type: ignore[no-untyped-def]
    """A stranger refunding after the deadline parks a script on the submitter's refund."""
    tx = _refund_tx(deployment, outputs=[_with_reference_script(_refund_output())])
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Refund(0))).ok


def test_refund_next_to_a_batch_withdrawal_fails(deployment) -> None:  # type: ignore[no-untyped-def]
    tx = _refund_tx(deployment, withdrawals={L.ScriptCredential(deployment.batch_hash.payload): 0})
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Refund(0))).ok


@pytest.mark.parametrize("credential", ["another-version-batch", "any-script"])
def test_refund_next_to_any_withdrawal_fails(deployment, credential) -> None:  # type: ignore[no-untyped-def]
    """A batch of another script version or deployment does not know this escrow and could
    count its refund output as one of its own escrows' remainders: no withdrawal at all."""
    tx = _refund_tx(deployment, withdrawals={L.ScriptCredential(h28(credential)): 0})
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Refund(0))).ok


def test_refund_reads_only_the_fields_it_needs(deployment) -> None:  # type: ignore[no-untyped-def]
    # A datum with garbage in every field Refund does not read stays refundable.
    d = _datum(deployment, budget=-5, config_policy=b"", job="x")
    d.ntx_policy = b"junk"
    tx = _refund_tx(deployment, datum=d)
    assert evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Refund(0))).ok


def test_refund_keeps_working_with_hundreds_of_junk_tokens(deployment) -> None:  # type: ignore[no-untyped-def]
    junk = {h28(f"junk{i}"): {b"dust": 1} for i in range(150)}
    junk[ref("x").id[:28]] = {b"NTX": 100}
    value = with_tokens(3_000_000, junk)
    tx = _refund_tx(deployment, value=value, outputs=[_refund_output(value=value)])
    assert evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Refund(0))).ok


# --- Cancel ---------------------------------------------------------------------------


def _cancel_tx(deployment, oracles, admins, *, signers, **kw) -> Tx:  # type: ignore[no-untyped-def]
    cfg = T.OracleConfigDatum(oracles, 2, admins, 2, deployment.batch_hash.payload)
    params = dict(
        upper=DEADLINE - 500_000,
        outputs=[_refund_output()],
        reference_inputs=[config_input(deployment, cfg)],
        signatories=signers,
    )
    params.update(kw)
    return _tx(deployment, **params)


def test_cancel_with_submitter_and_oracle_quorum(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    tx = _cancel_tx(deployment, oracles, admins, signers=[SUB, *oracles[:2]])
    result = evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Cancel(0, 0)))
    assert result.ok, result.logs


@pytest.mark.parametrize("who", ["no-submitter", "one-oracle", "admins-not-oracles"])
def test_cancel_needs_both_consents(deployment, oracles, admins, who) -> None:  # type: ignore[no-untyped-def]
    signers = {
        "no-submitter": oracles[:3],
        "one-oracle": [SUB, oracles[0]],
        "admins-not-oracles": [SUB, *admins],
    }[who]
    tx = _cancel_tx(deployment, oracles, admins, signers=signers)
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Cancel(0, 0))).ok


def test_cancel_after_an_oracle_rotation_fails(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    """The admins rotate the authentic config to a set they control: its quorum and the
    submitter cannot cancel an escrow locked under the old set (it refunds later)."""
    rotated = [h28("admin-oracle")]
    cfg = T.OracleConfigDatum(rotated, 1, admins, 2, deployment.batch_hash.payload)
    tx = _cancel_tx(
        deployment,
        oracles,
        admins,
        signers=[SUB, *rotated],
        reference_inputs=[config_input(deployment, cfg)],
    )
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Cancel(0, 0))).ok
    # Honest twin: the same cancel of an escrow that pinned the rotated set.
    pinned = _datum(deployment, oracle_set=oracle_set_hash(rotated, 1))
    tx = _cancel_tx(
        deployment,
        oracles,
        admins,
        signers=[SUB, *rotated],
        reference_inputs=[config_input(deployment, cfg)],
        datum=pinned,
    )
    assert evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Cancel(0, 0))).ok


def test_cancel_with_forged_config_fails(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    forged_cfg = T.OracleConfigDatum([h28("mallory")], 1, admins, 2, deployment.batch_hash.payload)
    fake = config_input(deployment, forged_cfg, policy=h28("fake-policy"))
    tx = _cancel_tx(
        deployment, oracles, admins, signers=[SUB, h28("mallory")], reference_inputs=[fake]
    )
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Cancel(0, 0))).ok


def test_cancel_output_carrying_a_reference_script_fails(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    tx = _cancel_tx(
        deployment,
        oracles,
        admins,
        signers=[SUB, *oracles[:2]],
        outputs=[_with_reference_script(_refund_output())],
    )
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Cancel(0, 0))).ok


@pytest.mark.parametrize("where", ["key wallet", "other script"])
def test_cancel_with_the_config_nft_outside_the_config_script_fails(  # type: ignore[no-untyped-def]
    deployment, oracles, admins, where
) -> None:
    """The real NFT (right policy and name) at any address but the oracle-config script's
    is not the config: mallory's quorum there cannot cancel."""
    at = key_address(h28("mallory")) if where == "key wallet" else script_address(h28("other"))
    forged_cfg = T.OracleConfigDatum([h28("mallory")], 1, admins, 2, deployment.batch_hash.payload)
    stray = config_input(deployment, forged_cfg, at=at)
    tx = _cancel_tx(
        deployment, oracles, admins, signers=[SUB, h28("mallory")], reference_inputs=[stray]
    )
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Cancel(0, 0))).ok


def test_cancel_after_cancel_window_fails(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    d = _datum(deployment, cancel_until=DEADLINE - 600_000)
    tx = _cancel_tx(deployment, oracles, admins, signers=[SUB, *oracles[:2]], datum=d)
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Cancel(0, 0))).ok
    tx.upper = DEADLINE - 700_000
    assert evaluate(deployment.escrow, tx.spend(ESCROW_REF, T.Cancel(0, 0))).ok


def test_unknown_redeemer_constructor_fails(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import dataclass

    @dataclass
    class Bogus(L.PlutusData):
        CONSTR_ID = 3
        a: int
        b: int

    tx = _cancel_tx(deployment, oracles, admins, signers=[SUB, *oracles[:2]])
    assert tx.reference_inputs[0].out_ref == CONFIG_REF
    assert not evaluate(deployment.escrow, tx.spend(ESCROW_REF, Bogus(0, 0))).ok
