"""The compiled batch-settlement stake validator on ledger-shaped contexts."""

from __future__ import annotations

import copy

import pytest
from contracts_harness import (
    CONFIG_REF,
    DEADLINE,
    config_input,
    evaluate,
    h28,
    key_address,
    make_batch,
    ntx_value,
    out,
    ref,
    script_address,
    txin,
    with_tokens,
)

from chain.contracts import ledger as L
from chain.contracts import types as T


@pytest.fixture()
def batch(deployment, oracles, admins):  # type: ignore[no-untyped-def]
    return make_batch(deployment, oracles, admins, 3)


def _run(deployment, batch, entries=None):  # type: ignore[no-untyped-def]
    return evaluate(deployment.batch_settle, batch.context(entries))


def test_batch_of_three_settles(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    result = _run(deployment, batch)
    assert result.ok, result.logs


def test_missing_oracle_quorum_fails(deployment, batch, oracles) -> None:  # type: ignore[no-untyped-def]
    batch.tx.signatories = oracles[:1]
    assert not _run(deployment, batch).ok


def test_escrow_input_left_out_of_the_indexer_fails(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    assert not _run(deployment, batch, batch.entries[:2]).ok


def test_repeated_index_fails(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    e = batch.entries
    repeated = [e[0], e[0], e[2]]
    assert not _run(deployment, batch, repeated).ok


def test_out_of_order_indices_fail(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    e = batch.entries
    assert not _run(deployment, batch, [e[1], e[0], e[2]]).ok


def test_entry_naming_a_non_escrow_input_fails(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    batch.tx.inputs.append(txin(ref("zzzz-wallet"), out(key_address(h28("w")), ntx_value(5, 100))))
    bogus = copy.deepcopy(batch.entries)
    bogus[2].input_index = batch.tx.input_index(ref("zzzz-wallet"))
    assert bogus[2].input_index > bogus[1].input_index
    assert not _run(deployment, batch, bogus).ok


def test_one_output_paying_two_escrows_fails(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    b = make_batch(deployment, oracles, admins, 2)
    e = copy.deepcopy(b.entries)
    # Both escrows owe the same amount: point both at one payout output.
    e[1].payouts[0] = e[0].payouts[0]
    assert not _run(deployment, b, e).ok


def test_swapped_payouts_fail(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    e = copy.deepcopy(batch.entries)
    e[0].payouts, e[1].payouts = e[1].payouts, e[0].payouts
    assert not _run(deployment, batch, e).ok


def test_payout_output_short_of_its_amount_fails(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    """The redeemer names only the payout output; what it pays is its NTX quantity. An
    output paying less than the remainder accounts for leaves the remainder short; one
    paying more than the budget allows is over budget."""
    idx = batch.entries[0].payouts[0]
    o = batch.tx.outputs[idx]
    batch.tx.outputs[idx] = out(o.address, ntx_value(1_200_000, 39))
    assert not _run(deployment, batch).ok
    batch.tx.outputs[idx] = out(o.address, ntx_value(1_200_000, 101))
    assert not _run(deployment, batch).ok
    # A payout output without the NTX unit as its first token pays nothing: refused.
    batch.tx.outputs[idx] = out(o.address, ntx_value(1_200_000, 0))
    assert not _run(deployment, batch).ok
    batch.tx.outputs[idx] = o
    assert _run(deployment, batch).ok


def test_payout_address_is_the_quorums_choice(deployment, oracles, batch) -> None:  # type: ignore[no-untyped-def]
    """The redeemer names no payout address: the signing oracle quorum chooses the outputs
    (a redeemer copy of the address would be written by the same signers). With the quorum
    the script accepts any payee; without it, none. Auditors and co-signers check payees
    against the attestations (tests/oracle, auditor.audit)."""
    idx = batch.entries[0].payouts[0]
    o = batch.tx.outputs[idx]
    batch.tx.outputs[idx] = out(key_address(h28("mallory")), o.value)
    assert _run(deployment, batch).ok
    batch.tx.signatories = oracles[:1]
    assert not _run(deployment, batch).ok


def test_payouts_over_budget_fail(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    b = make_batch(deployment, oracles, admins, 1, budget=100, pay=100)
    assert _run(deployment, b).ok
    # The escrow holds more NTX than its budget: payouts are still capped by the budget.
    b2 = make_batch(deployment, oracles, admins, 1, budget=100, pay=100)
    d = b2.escrows[0][1]
    d.budget = 99
    b2.tx.inputs[0].resolved.datum = L.SomeOutputDatum(d)
    assert not _run(deployment, b2).ok


def test_remainder_with_attacker_stake_credential_fails(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    idx = batch.entries[0].refund_index
    o = batch.tx.outputs[idx]
    pkh = o.address.payment_credential.credential_hash
    batch.tx.outputs[idx] = out(key_address(pkh, h28("attacker")), o.value)
    assert not _run(deployment, batch).ok


def test_short_remainder_fails(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    idx = batch.entries[0].refund_index
    o = batch.tx.outputs[idx]
    batch.tx.outputs[idx] = out(o.address, ntx_value(1_800_000, 39))
    assert not _run(deployment, batch).ok
    batch.tx.outputs[idx] = out(o.address, ntx_value(1_000_000, 40))
    assert not _run(deployment, batch).ok


@pytest.mark.parametrize("upper", [DEADLINE + 1, None])
def test_settlement_after_deadline_or_unbounded_fails(deployment, batch, upper) -> None:  # type: ignore[no-untyped-def]
    batch.tx.upper = upper
    assert not _run(deployment, batch).ok


def test_fake_config_reference_input_fails(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    cfg = T.OracleConfigDatum([h28("mallory")], 1, [h28("mallory")], 1, batch.batch_hash)
    batch.tx.reference_inputs = [config_input(deployment, cfg, policy=h28("fake"))]
    batch.tx.signatories = [h28("mallory")]
    assert not _run(deployment, batch).ok


def test_config_nft_outside_the_config_script_fails(deployment, batch, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    cfg = T.OracleConfigDatum(oracles, 2, admins, 2, batch.batch_hash)
    nft = {deployment.config_policy.payload: {T.CONFIG_NFT_NAME: 1}}
    batch.tx.reference_inputs = [
        txin(CONFIG_REF, out(key_address(h28("somewhere")), with_tokens(2_000_000, nft), cfg))
    ]
    assert not _run(deployment, batch).ok


def test_escrow_trusting_another_batch_script_fails(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    d = batch.escrows[0][1]
    d.batch_credential = h28("another-batch")
    r = batch.escrows[0][0]
    for i in batch.tx.inputs:
        if i.out_ref == r:
            i.resolved.datum = L.SomeOutputDatum(d)
    assert not _run(deployment, batch).ok


def test_escrow_with_junk_tokens_is_refused(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    r = batch.escrows[0][0]
    for i in batch.tx.inputs:
        if i.out_ref == r:
            v = i.resolved.value
            v[h28("junk")] = {b"dust": 1}
    assert not _run(deployment, batch).ok


# --- foreign script inputs (no output serves two obligations across versions) ----------


def _tag_at(batch, position: str) -> str:  # type: ignore[no-untyped-def]
    """A tag whose out-ref sorts before, between or after the batch's escrow inputs."""
    ids = sorted(r.id for r, _ in batch.escrows)
    placed = {
        "first": lambda x: x < ids[0],
        "between": lambda x: ids[0] < x < ids[-1],
        "last": lambda x: x > ids[-1],
    }[position]
    return next(f"{position}{i}" for i in range(10_000) if placed(ref(f"{position}{i}").id))


def _reindexed(batch) -> list[T.SettleEntry]:  # type: ignore[no-untyped-def]
    """The entries with their input indices recomputed after inputs were added."""
    entries = copy.deepcopy(batch.entries)
    ordered = sorted((r for r, _ in batch.escrows), key=lambda r: (r.id, r.idx))
    for entry, r in zip(entries, ordered, strict=True):
        entry.input_index = batch.tx.input_index(r)
    return entries


@pytest.mark.parametrize("position", ["first", "between", "last"])
def test_script_input_the_batch_does_not_settle_fails(deployment, batch, position) -> None:  # type: ignore[no-untyped-def]
    """One output paying an old-version escrow's refund and a new escrow's remainder needs
    the old escrow (another script hash) spent beside the batch: the batch refuses any
    script input it does not settle, wherever it sits. Honest twin: a key input there."""
    r = ref(_tag_at(batch, position))
    old_escrow = out(script_address(h28("escrow-v1")), ntx_value(3_000_000, 100))
    batch.tx.inputs.append(txin(r, old_escrow))
    assert not _run(deployment, batch, _reindexed(batch)).ok
    batch.tx.inputs[-1] = txin(r, out(key_address(h28("fees")), ntx_value(5_000_000, 1)))
    assert _run(deployment, batch, _reindexed(batch)).ok


def test_another_deployments_escrow_beside_the_batch_fails(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    """Two batch scripts sharing one remainder output: the other batch's escrow (this
    escrow script, another deployment's batch in its datum) is not settled here."""
    other = copy.deepcopy(batch.escrows[0][1])
    other.batch_credential = h28("another-deployments-batch")
    escrow_at = script_address(deployment.escrow_hash.payload)
    r = ref(_tag_at(batch, "last"))
    batch.tx.inputs.append(txin(r, out(escrow_at, ntx_value(3_000_000, 100), other)))
    assert not _run(deployment, batch, _reindexed(batch)).ok


# --- oracle set pinned at lock time (no admin action moves escrows locked before it) -----


def test_rotated_oracle_set_cannot_settle_escrows_locked_before(deployment, batch, admins) -> None:  # type: ignore[no-untyped-def]
    """The admins rewrite the authentic config to name themselves the oracles and sign the
    batch: the escrows pinned the old set, so the batch refuses them."""
    cfg = T.OracleConfigDatum(admins[:1], 1, admins, 2, batch.batch_hash)
    batch.tx.reference_inputs = [config_input(deployment, cfg)]
    batch.tx.signatories = admins[:1]
    assert not _run(deployment, batch).ok


@pytest.mark.parametrize("change", ["threshold", "one-key-more"])
def test_any_change_of_the_oracle_set_unpins(deployment, batch, oracles, admins, change) -> None:  # type: ignore[no-untyped-def]
    keys, threshold = (oracles, 3) if change == "threshold" else (sorted([*oracles, h28("x")]), 2)
    cfg = T.OracleConfigDatum(keys, threshold, admins, 2, batch.batch_hash)
    batch.tx.reference_inputs = [config_input(deployment, cfg)]
    batch.tx.signatories = oracles
    assert not _run(deployment, batch).ok


def test_admins_may_change_without_unpinning(deployment, batch, oracles) -> None:  # type: ignore[no-untyped-def]
    """Only oracles and threshold are pinned: an admin-key rotation leaves escrows payable."""
    new_admins = sorted(h28(f"new-admin{i}") for i in range(2))
    cfg = T.OracleConfigDatum(oracles, 2, new_admins, 1, batch.batch_hash)
    batch.tx.reference_inputs = [config_input(deployment, cfg)]
    assert _run(deployment, batch).ok


def test_wrong_merkle_root_length_fails(deployment, batch) -> None:  # type: ignore[no-untyped-def]
    red = batch.redeemer()
    red.merkle_root = b"short"
    assert not evaluate(deployment.batch_settle, batch.tx.withdraw(batch.batch_hash, red)).ok


def test_withdrawal_with_admin_redeemer_fails(deployment, batch, admins) -> None:  # type: ignore[no-untyped-def]
    batch.tx.signatories = admins
    ctx = batch.tx.withdraw(batch.batch_hash, T.BatchAdmin(0))
    assert not evaluate(deployment.batch_settle, ctx).ok


# --- certificates -----------------------------------------------------------------------


def _cert_ctx(deployment, oracles, admins, cert, redeemer, signers):  # type: ignore[no-untyped-def]
    b = make_batch(deployment, oracles, admins, 0)
    b.tx.certificates = [cert]
    b.tx.signatories = signers
    return b.tx.certify(0, redeemer)


def test_anyone_may_register_the_credential(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    cred = L.ScriptCredential(deployment.batch_hash.payload)
    cert = L.TxCertRegStaking(cred, L.SomeDatum(2_000_000))
    ctx = _cert_ctx(deployment, oracles, admins, cert, T.BatchAdmin(0), [])
    assert evaluate(deployment.batch_settle, ctx).ok


@pytest.mark.parametrize("kind", ["unreg", "deleg"])
def test_deregistration_and_delegation_need_admin_quorum(deployment, oracles, admins, kind) -> None:  # type: ignore[no-untyped-def]
    cred = L.ScriptCredential(deployment.batch_hash.payload)
    cert = (
        L.TxCertUnRegStaking(cred, L.SomeDatum(2_000_000))
        if kind == "unreg"
        else L.TxCertDelegStaking(cred, L.NoDatum())
    )
    assert not evaluate(
        deployment.batch_settle,
        _cert_ctx(deployment, oracles, admins, cert, T.BatchAdmin(0), oracles),
    ).ok
    assert not evaluate(
        deployment.batch_settle,
        _cert_ctx(deployment, oracles, admins, cert, T.BatchAdmin(0), admins[:1]),
    ).ok
    assert evaluate(
        deployment.batch_settle,
        _cert_ctx(deployment, oracles, admins, cert, T.BatchAdmin(0), admins[:2]),
    ).ok


def test_certificate_with_the_config_nft_outside_the_config_script_fails(  # type: ignore[no-untyped-def]
    deployment, oracles, admins
) -> None:
    """Mallory's admins, in a config NFT held by a key wallet, cannot deregister the batch
    credential: the certificate path reads only the config at the config script."""
    cred = L.ScriptCredential(deployment.batch_hash.payload)
    cert = L.TxCertUnRegStaking(cred, L.SomeDatum(2_000_000))
    mallory = [h28("mallory")]
    b = make_batch(deployment, oracles, admins, 0)
    forged = T.OracleConfigDatum(oracles, 2, mallory, 1, deployment.batch_hash.payload)
    b.tx.reference_inputs = [config_input(deployment, forged, at=key_address(mallory[0]))]
    b.tx.certificates = [cert]
    b.tx.signatories = mallory
    assert not evaluate(deployment.batch_settle, b.tx.certify(0, T.BatchAdmin(0))).ok
    b.tx.reference_inputs = [config_input(deployment, forged)]
    assert evaluate(deployment.batch_settle, b.tx.certify(0, T.BatchAdmin(0))).ok
