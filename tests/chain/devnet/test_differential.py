"""The devnet evaluator against Aiken's, on real Plutus V3 transactions built with pycardano.

Identical execution units for every redeemer mean both built the same script context and
costed it with the same cost model. Needs Node and `npm ci` at the repo root.
"""

from __future__ import annotations

import pytest
from plutus_fixtures import (
    ALWAYS_FAILS_UPLC,
    ALWAYS_SUCCEEDS_UPLC,
    SLOT_CONFIG,
    PlutusTx,
    TxSpec,
    key_hash,
    lock_datum,
    ntx_mint,
    opshin_script,
    reward_account,
    script_address,
    signing_key,
    tx_input,
    uplc_script,
    value_with,
    wallet_address,
)
from pycardano import PlutusV3Script, RedeemerTag, TransactionOutput, plutus_script_hash

from chain.devnet.cost_models import default_cost_models
from chain.devnet.differential import AikenEvaluationError, aiken_evaluate
from chain.devnet.phase2 import evaluate_redeemers

pytestmark = pytest.mark.node

UNITS = (2_000_000, 800_000_000)
BUDGET = (14_000_000, 10_000_000_000)
OWNER, PAYER = signing_key(31), signing_key(32)


@pytest.fixture(scope="module")
def validator(tmp_path_factory: pytest.TempPathFactory) -> PlutusV3Script:
    return opshin_script(str(tmp_path_factory.mktemp("opshin")))


def _wallet(n: int = 40) -> tuple:
    return (tx_input(n), TransactionOutput(wallet_address(PAYER), 40_000_000))


def _assert_same_units(ptx: PlutusTx) -> list:
    ours = evaluate_redeemers(
        ptx.cbor, ptx.resolved, slot_config=SLOT_CONFIG, cost_models=default_cost_models()
    )
    theirs = aiken_evaluate(
        ptx.cbor,
        ptx.resolved_cbor_pairs(),
        cost_models=default_cost_models(),
        slot_config=SLOT_CONFIG,
        budget=BUDGET,
    )
    assert all(r.ok for r in ours), [r.error for r in ours]
    assert [(r.tag, r.index, r.mem, r.steps) for r in ours] == [
        (r.tag, r.index, r.mem, r.steps) for r in theirs
    ]
    return ours


def test_always_succeeds_spend() -> None:
    script = uplc_script(ALWAYS_SUCCEEDS_UPLC)
    locked = (tx_input(41), TransactionOutput(script_address(script), 5_000_000))
    ptx = TxSpec(
        script_inputs=[locked],
        wallet_inputs=[_wallet()],
        outputs=[TransactionOutput(wallet_address(PAYER), 44_000_000)],
        scripts=[script],
        redeemers=[(RedeemerTag.SPEND, locked[0], 0, UNITS)],
    ).build()
    (result,) = _assert_same_units(ptx)
    assert result.tag == "spend"


def test_spend_with_datum_and_signature_check(validator: PlutusV3Script) -> None:
    datum = lock_datum(key_hash(OWNER).payload, 99)
    locked = (tx_input(42, 2), TransactionOutput(script_address(validator), 6_000_000, datum=datum))
    ptx = TxSpec(
        script_inputs=[locked],
        wallet_inputs=[_wallet()],
        outputs=[TransactionOutput(wallet_address(OWNER), 45_000_000)],
        scripts=[validator],
        redeemers=[(RedeemerTag.SPEND, locked[0], 99, UNITS)],
        signers=[OWNER, PAYER],
        ttl=5_000,
        validity_start=1_000,
    ).build()
    _assert_same_units(ptx)


def test_mint_policy(validator: PlutusV3Script) -> None:
    policy = plutus_script_hash(validator)
    ptx = TxSpec(
        wallet_inputs=[_wallet()],
        outputs=[
            TransactionOutput(wallet_address(PAYER), value_with(39_000_000, ntx_mint(policy, 500)))
        ],
        mint=ntx_mint(policy, 500),
        scripts=[validator],
        redeemers=[(RedeemerTag.MINT, policy, 500, UNITS)],
        signers=[PAYER],
    ).build()
    (result,) = _assert_same_units(ptx)
    assert result.tag == "mint"


def test_withdraw_zero_with_spend_and_mint_together(validator: PlutusV3Script) -> None:
    policy = plutus_script_hash(validator)
    datum = lock_datum(key_hash(OWNER).payload, 5)
    locked = (tx_input(43), TransactionOutput(script_address(validator), 7_000_000, datum=datum))
    always = uplc_script(ALWAYS_SUCCEEDS_UPLC)
    ptx = TxSpec(
        script_inputs=[locked],
        wallet_inputs=[_wallet()],
        outputs=[
            TransactionOutput(wallet_address(PAYER), value_with(46_000_000, ntx_mint(policy, 3)))
        ],
        mint=ntx_mint(policy, 3),
        withdrawals={reward_account(validator): 0, reward_account(always): 0},
        scripts=[validator, always],
        redeemers=[
            (RedeemerTag.SPEND, locked[0], 5, UNITS),
            (RedeemerTag.MINT, policy, 3, UNITS),
            (RedeemerTag.WITHDRAWAL, 0, 0, UNITS),
            (RedeemerTag.WITHDRAWAL, 1, 0, UNITS),
        ],
        signers=[OWNER],
    ).build()
    results = _assert_same_units(ptx)
    assert [r.tag for r in results] == ["spend", "mint", "reward", "reward"]


def test_failing_script_fails_in_both() -> None:
    script = uplc_script(ALWAYS_FAILS_UPLC)
    locked = (tx_input(44), TransactionOutput(script_address(script), 5_000_000))
    ptx = TxSpec(
        script_inputs=[locked],
        wallet_inputs=[_wallet()],
        outputs=[TransactionOutput(wallet_address(PAYER), 44_000_000)],
        scripts=[script],
        redeemers=[(RedeemerTag.SPEND, locked[0], 0, UNITS)],
    ).build()
    (ours,) = evaluate_redeemers(
        ptx.cbor, ptx.resolved, slot_config=SLOT_CONFIG, cost_models=default_cost_models()
    )
    assert not ours.ok
    with pytest.raises(AikenEvaluationError):
        aiken_evaluate(
            ptx.cbor,
            ptx.resolved_cbor_pairs(),
            cost_models=default_cost_models(),
            slot_config=SLOT_CONFIG,
        )


def test_wrong_secret_fails_in_both(validator: PlutusV3Script) -> None:
    datum = lock_datum(key_hash(OWNER).payload, 1)
    locked = (tx_input(45), TransactionOutput(script_address(validator), 6_000_000, datum=datum))
    ptx = TxSpec(
        script_inputs=[locked],
        wallet_inputs=[_wallet()],
        outputs=[TransactionOutput(wallet_address(OWNER), 45_000_000)],
        scripts=[validator],
        redeemers=[(RedeemerTag.SPEND, locked[0], 2, UNITS)],
        signers=[OWNER],
    ).build()
    (ours,) = evaluate_redeemers(
        ptx.cbor, ptx.resolved, slot_config=SLOT_CONFIG, cost_models=default_cost_models()
    )
    assert not ours.ok
    with pytest.raises(AikenEvaluationError, match="wrong secret"):
        aiken_evaluate(
            ptx.cbor,
            ptx.resolved_cbor_pairs(),
            cost_models=default_cost_models(),
            slot_config=SLOT_CONFIG,
        )


def test_script_withdrawal_sorts_before_a_key_withdrawal() -> None:
    # 0xf0.. (script) sorts after 0xe0.. (key) bytewise, but the ledger orders reward
    # accounts by credential with script hashes first: the script is reward index 0.
    script = uplc_script(ALWAYS_SUCCEEDS_UPLC)
    ptx = TxSpec(
        wallet_inputs=[_wallet()],
        outputs=[TransactionOutput(wallet_address(PAYER), 39_000_000)],
        withdrawals={bytes([0xE0]) + bytes(28): 0, reward_account(script): 0},
        scripts=[script],
        redeemers=[(RedeemerTag.WITHDRAWAL, 0, 0, UNITS)],
    ).build()
    (result,) = _assert_same_units(ptx)
    assert (result.tag, result.index) == ("reward", 0)
