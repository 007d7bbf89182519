"""Phase-2 evaluation of Plutus V3 redeemers with the devnet's cost models."""

from __future__ import annotations

import pytest
from plutus_fixtures import (
    ALWAYS_FAILS_UPLC,
    ALWAYS_SUCCEEDS_UPLC,
    BUSY_UPLC,
    RETURNS_NON_UNIT_UPLC,
    SLOT_CONFIG,
    TxSpec,
    key_hash,
    lock_datum,
    opshin_script,
    script_address,
    signing_key,
    tx_input,
    uplc_script,
    wallet_address,
)
from pycardano import PlutusV2Script, PlutusV3Script, RedeemerTag, TransactionOutput
from uplc.ast import PlutusInteger

from chain.devnet.cost_models import default_cost_models, plutus_v3_cost_model
from chain.devnet.phase2 import evaluate_redeemers, evaluate_script
from chain.devnet.plutus_data import data_from_json
from chain.devnet.purposes import needed_scripts
from chain.devnet.script_context import build_script_context

DECLARED = (1_000_000, 500_000_000)
OWNER, PAYER = signing_key(11), signing_key(12)


@pytest.fixture(scope="module")
def validator(tmp_path_factory: pytest.TempPathFactory) -> PlutusV3Script:
    return opshin_script(str(tmp_path_factory.mktemp("opshin")))


def _spend(script, datum=None, redeemer=0, units=DECLARED, signers=(OWNER, PAYER)):
    locked = (tx_input(21, 1), TransactionOutput(script_address(script), 4_000_000, datum=datum))
    wallet = (tx_input(22), TransactionOutput(wallet_address(PAYER), 30_000_000))
    return TxSpec(
        script_inputs=[locked],
        wallet_inputs=[wallet],
        outputs=[TransactionOutput(wallet_address(PAYER), 33_000_000)],
        scripts=[script],
        redeemers=[(RedeemerTag.SPEND, locked[0], redeemer, units)],
        signers=list(signers),
    ).build()


def _evaluate(ptx, budget=None):
    return evaluate_redeemers(
        ptx.cbor,
        ptx.resolved,
        slot_config=SLOT_CONFIG,
        cost_models=default_cost_models(),
        budget=budget,
    )


def test_always_true_v3_script_succeeds_with_startup_cost_counted() -> None:
    ptx = _spend(uplc_script(ALWAYS_SUCCEEDS_UPLC))
    (result,) = _evaluate(ptx)
    assert result.ok and result.error is None
    assert (result.tag, result.index) == ("spend", ptx.tx.transaction_witness_set.redeemer[0].index)
    # startup (100 steps/100 mem) + apply, lambda, context constant, unit constant.
    assert (result.mem, result.steps) == (100 + 4 * 100, 100 + 4 * 16_000)


def test_always_false_v3_script_fails() -> None:
    (result,) = _evaluate(_spend(uplc_script(ALWAYS_FAILS_UPLC)))
    assert not result.ok
    assert "Error" in (result.error or "")


def test_v3_script_must_return_unit() -> None:
    (result,) = _evaluate(_spend(uplc_script(RETURNS_NON_UNIT_UPLC)))
    assert not result.ok
    assert "unit" in (result.error or "")


def test_declared_units_bound_the_run_and_a_budget_overrides_them() -> None:
    script = uplc_script(BUSY_UPLC)
    (full,) = _evaluate(_spend(script), budget=(14_000_000, 10_000_000_000))
    assert full.ok
    (short,) = _evaluate(_spend(script, units=(full.mem, full.steps - 1)))
    assert not short.ok and "out of budget" in (short.error or "")
    (exact,) = _evaluate(_spend(script, units=(full.mem, full.steps)))
    assert exact.ok and (exact.mem, exact.steps) == (full.mem, full.steps)


def test_opshin_validator_checks_its_datum_and_signature(validator: PlutusV3Script) -> None:
    datum = lock_datum(key_hash(OWNER).payload, 42)
    (good,) = _evaluate(_spend(validator, datum=datum, redeemer=42))
    assert good.ok, good.error
    assert 0 < good.mem < DECLARED[0] and 0 < good.steps < DECLARED[1]

    (wrong_secret,) = _evaluate(_spend(validator, datum=datum, redeemer=41))
    assert not wrong_secret.ok
    assert any("wrong secret" in log for log in wrong_secret.logs)

    (unsigned,) = _evaluate(_spend(validator, datum=datum, redeemer=42, signers=(PAYER,)))
    assert not unsigned.ok
    assert any("owner did not sign" in log for log in unsigned.logs)


def test_script_context_built_directly_drives_the_validator(validator: PlutusV3Script) -> None:
    datum = lock_datum(key_hash(OWNER).payload, 7)
    ptx = _spend(validator, datum=datum, redeemer=7)
    (purpose,) = needed_scripts(ptx.tx.transaction_body, ptx.resolved)
    ctx = build_script_context(ptx.cbor, ptx.resolved, purpose, None, SLOT_CONFIG)
    ok = evaluate_script(bytes(validator), [ctx], "PlutusV3", plutus_v3_cost_model(), DECLARED)
    assert ok.ok, ok.error
    other = build_script_context(
        ptx.cbor, ptx.resolved, purpose, data_from_json({"int": 8}), SLOT_CONFIG
    )
    bad = evaluate_script(bytes(validator), [other], "PlutusV3", plutus_v3_cost_model(), DECLARED)
    assert not bad.ok


def test_redeemer_without_a_script_item_and_unsupported_languages() -> None:
    ptx = _spend(uplc_script(ALWAYS_SUCCEEDS_UPLC))
    redeemer = ptx.tx.transaction_witness_set.redeemer[0]
    redeemer.index = 1 - redeemer.index  # now points at the wallet input
    (result,) = _evaluate(ptx)
    assert not result.ok and "nothing locked by a script" in (result.error or "")

    v3 = uplc_script(ALWAYS_SUCCEEDS_UPLC)
    v2 = PlutusV2Script(bytes(uplc_script("(program 1.0.0 (lam d (lam r (lam c (con unit ())))))")))
    ptx = _spend(v2)
    (result,) = _evaluate(ptx)
    assert not result.ok and "PlutusV2 scripts are not supported" in (result.error or "")

    ptx = _spend(v3)
    (result,) = evaluate_redeemers(
        ptx.cbor, ptx.resolved, slot_config=SLOT_CONFIG, cost_models={"PlutusV2": [0]}
    )
    assert not result.ok and "no PlutusV3 cost model" in (result.error or "")


def test_bad_flat_and_wrong_version_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="not a valid flat"):
        evaluate_script(b"\x43\x01\x02\x03", [], "PlutusV3", plutus_v3_cost_model(), DECLARED)
    newer = bytes(uplc_script("(program 1.1.0 (lam c (con unit ())))"))
    with pytest.raises(ValueError, match="not allowed in PlutusV2"):
        evaluate_script(
            newer, [PlutusInteger(0)], "PlutusV2", default_cost_models()["PlutusV2"], DECLARED
        )


def test_evaluation_is_fast_enough_for_the_submit_path(validator: PlutusV3Script) -> None:
    import time

    datum = lock_datum(key_hash(OWNER).payload, 42)
    ptx = _spend(validator, datum=datum, redeemer=42)
    _evaluate(ptx)  # warm the program cache
    start = time.perf_counter()
    for _ in range(5):
        (result,) = _evaluate(ptx)
    per_tx = (time.perf_counter() - start) / 5
    assert result.ok
    assert per_tx < 1.0, f"{per_tx:.3f}s per transaction"
