"""Oracle-config script (the config NFT's one-shot policy and the validator holding it),
test-NTX policy."""

from __future__ import annotations

import pytest
from contracts_harness import (
    Tx,
    evaluate,
    h28,
    key_address,
    out,
    ref,
    script_address,
    txin,
    value,
    with_tokens,
)
from pycardano import VerificationKeyHash

from chain.contracts import ledger as L
from chain.contracts import types as T
from chain.offchain import scripts as S

CFG_REF = ref("config-utxo")


def _cfg(oracle_keys, admin_keys, deployment, **kw):  # type: ignore[no-untyped-def]
    c = T.OracleConfigDatum(oracle_keys, 2, admin_keys, 2, deployment.batch_hash.payload)
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def _nft(deployment) -> dict[bytes, dict[bytes, int]]:  # type: ignore[no-untyped-def]
    return with_tokens(2_000_000, {deployment.config_policy.payload: {T.CONFIG_NFT_NAME: 1}})


def _update_tx(deployment, oracles, admins, new, *, signers, to=None, nft=True) -> Tx:  # type: ignore[no-untyped-def]
    addr = script_address(deployment.oracle_config_hash.payload)
    current = _cfg(oracles, admins, deployment)
    return Tx(
        inputs=[txin(CFG_REF, out(addr, _nft(deployment), current))],
        outputs=[out(to or addr, _nft(deployment) if nft else value(2_000_000), new)],
        signatories=signers,
    )


def test_admin_quorum_updates_config(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    new = _cfg(oracles, admins, deployment, threshold=3)
    tx = _update_tx(deployment, oracles, admins, new, signers=admins[:2])
    assert evaluate(deployment.oracle_config, tx.spend(CFG_REF, T.UpdateConfig(0))).ok


def test_update_without_admin_quorum_fails(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    new = _cfg(oracles, admins, deployment)
    tx = _update_tx(deployment, oracles, admins, new, signers=[admins[0], *oracles])
    assert not evaluate(deployment.oracle_config, tx.spend(CFG_REF, T.UpdateConfig(0))).ok


@pytest.mark.parametrize(
    "change",
    [
        {"threshold": 0},
        {"threshold": 4},
        {"oracles": "dup"},
        {"oracles": "unsorted"},
        {"admin_threshold": 0},
        {"batch_credential": b"short"},
    ],
)
def test_invalid_new_config_fails(deployment, oracles, admins, change) -> None:  # type: ignore[no-untyped-def]
    kw = dict(change)
    if kw.get("oracles") == "dup":
        kw["oracles"] = [oracles[0], oracles[0], oracles[1]]
    elif kw.get("oracles") == "unsorted":
        kw["oracles"] = list(reversed(oracles))
    new = _cfg(oracles, admins, deployment, **kw)
    tx = _update_tx(deployment, oracles, admins, new, signers=admins[:2])
    assert not evaluate(deployment.oracle_config, tx.spend(CFG_REF, T.UpdateConfig(0))).ok


def test_config_nft_must_stay_at_the_script(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    new = _cfg(oracles, admins, deployment)
    away = _update_tx(deployment, oracles, admins, new, signers=admins, to=key_address(admins[0]))
    assert not evaluate(deployment.oracle_config, away.spend(CFG_REF, T.UpdateConfig(0))).ok
    dropped = _update_tx(deployment, oracles, admins, new, signers=admins, nft=False)
    assert not evaluate(deployment.oracle_config, dropped.spend(CFG_REF, T.UpdateConfig(0))).ok


def test_stray_utxo_needs_the_nft_spent_alongside(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    addr = script_address(deployment.oracle_config_hash.payload)
    stray_ref = ref("stray")
    stray = txin(stray_ref, out(addr, value(5_000_000), T.NoPosixTime()))
    alone = Tx(inputs=[stray], outputs=[out(key_address(h28("x")), value(5_000_000))])
    assert not evaluate(deployment.oracle_config, alone.spend(stray_ref, T.UpdateConfig(0))).ok
    new = _cfg(oracles, admins, deployment)
    together = _update_tx(deployment, oracles, admins, new, signers=admins[:2])
    together.inputs.append(stray)
    assert evaluate(deployment.oracle_config, together.spend(stray_ref, T.UpdateConfig(0))).ok


# --- config NFT ---------------------------------------------------------------------------


def _mint_tx(deployment, oracles, admins, *, mint, seed_spent=True, cfg=None, to=None) -> Tx:  # type: ignore[no-untyped-def]
    seed = S.out_ref(deployment.seed)
    seed_ref = L.TxOutRef(seed.id, seed.idx)
    spent = seed_ref if seed_spent else ref("not-the-seed")
    addr = to or script_address(deployment.oracle_config_hash.payload)
    return Tx(
        inputs=[txin(spent, out(key_address(admins[0]), value(10_000_000)))],
        outputs=[out(addr, _nft(deployment), cfg or _cfg(oracles, admins, deployment))],
        mint={deployment.config_policy.payload: mint},
    )


def test_config_nft_mints_once(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    tx = _mint_tx(deployment, oracles, admins, mint={T.CONFIG_NFT_NAME: 1})
    ctx = tx.mint_with(deployment.config_policy.payload, T.MintConfigNft(0))
    assert evaluate(deployment.oracle_config, ctx).ok


@pytest.mark.parametrize(
    "mint",
    [{T.CONFIG_NFT_NAME: 2}, {T.CONFIG_NFT_NAME: 1, b"extra": 1}, {b"other": 1}],
)
def test_config_nft_refuses_extra_tokens(deployment, oracles, admins, mint) -> None:  # type: ignore[no-untyped-def]
    tx = _mint_tx(deployment, oracles, admins, mint=mint)
    ctx = tx.mint_with(deployment.config_policy.payload, T.MintConfigNft(0))
    assert not evaluate(deployment.oracle_config, ctx).ok


def test_config_nft_needs_the_seed(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    tx = _mint_tx(deployment, oracles, admins, mint={T.CONFIG_NFT_NAME: 1}, seed_spent=False)
    ctx = tx.mint_with(deployment.config_policy.payload, T.MintConfigNft(0))
    assert not evaluate(deployment.oracle_config, ctx).ok


def test_config_nft_policy_is_the_config_script(deployment) -> None:  # type: ignore[no-untyped-def]
    assert deployment.config_policy == deployment.oracle_config_hash


@pytest.mark.parametrize("where", ["key wallet", "other script", "key payment, script stake"])
def test_config_nft_minted_anywhere_but_the_config_script_fails(  # type: ignore[no-untyped-def]
    deployment, oracles, admins, where
) -> None:
    """The attack: mint the one config NFT (seed spent, valid datum) into an address the
    attacker controls, which readers that trust the NFT alone would take for the config."""
    config_hash = deployment.oracle_config_hash.payload
    to = {
        "key wallet": key_address(admins[0]),
        "other script": script_address(h28("another script")),
        "key payment, script stake": L.Address(
            L.PubKeyCredential(admins[0]),
            L.SomeStakingCredential(L.StakingHash(L.ScriptCredential(config_hash))),
        ),
    }[where]
    tx = _mint_tx(deployment, oracles, admins, mint={T.CONFIG_NFT_NAME: 1}, to=to)
    ctx = tx.mint_with(deployment.config_policy.payload, T.MintConfigNft(0))
    assert not evaluate(deployment.oracle_config, ctx).ok


def test_config_nft_needs_a_valid_config(deployment, oracles, admins) -> None:  # type: ignore[no-untyped-def]
    bad = _cfg(oracles, admins, deployment, threshold=0)
    tx = _mint_tx(deployment, oracles, admins, mint={T.CONFIG_NFT_NAME: 1}, cfg=bad)
    ctx = tx.mint_with(deployment.config_policy.payload, T.MintConfigNft(0))
    assert not evaluate(deployment.oracle_config, ctx).ok


# --- test NTX -------------------------------------------------------------------------


def test_test_ntx_admin_mints_anyone_burns() -> None:
    admin = h28("ntx-admin")
    policy_script = S.ntx_test_policy(VerificationKeyHash(admin))
    policy = S.script_hash(policy_script).payload
    mint = Tx(mint={policy: {b"NTX": 1_000_000}}, signatories=[admin])
    assert evaluate(policy_script, mint.mint_with(policy, T.MintTestNtx())).ok
    mint.signatories = [h28("someone")]
    assert not evaluate(policy_script, mint.mint_with(policy, T.MintTestNtx())).ok
    burn = Tx(mint={policy: {b"NTX": -5}}, signatories=[])
    assert evaluate(policy_script, burn.mint_with(policy, T.MintTestNtx())).ok
