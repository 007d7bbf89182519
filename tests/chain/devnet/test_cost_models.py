"""The devnet's Plutus cost models and the evaluator costs built from them."""

from __future__ import annotations

import cbor2
import pytest
from uplc.ast import BuiltInFun, PlutusInteger
from uplc.cost_model import CekOp, latest_network_config

from chain.devnet import cost_models as cm
from chain.devnet.phase2 import evaluate_script

ADD_SCRIPT = "(program 1.1.0 (lam ctx [(lam x (con unit ())) [(builtin addInteger) (con integer 1) (con integer 2)]]))"


def _flat(source: str) -> bytes:
    from uplc.tools import flatten, parse

    return bytes(flatten(parse(source)))


def test_default_models_are_protocol_11_lists_in_ledger_order() -> None:
    defaults = cm.default_cost_models()
    assert list(defaults) == ["PlutusV1", "PlutusV2", "PlutusV3"]
    assert [len(defaults[lang]) for lang in cm.LANGUAGES] == [332, 332, 350]
    for lang in cm.LANGUAGES:
        names = cm.cost_model_names(lang)
        assert len(names) == len(set(names)) == len(defaults[lang])
    v3 = cm.cost_model_names("PlutusV3")
    assert v3[0] == "addInteger-cpu-arguments-intercept"
    assert v3[296] == "ripemd_160-memory-arguments"
    assert v3[-1] == "scaleValue-memory-arguments-slope"


def test_protocol_10_lists_are_named_by_the_prefix_of_the_ledger_names() -> None:
    old = cm.pv10_cost_models()
    assert [len(old[lang]) for lang in cm.LANGUAGES] == [166, 175, 297]
    assert "cekApplyCost-exBudgetMemory" in cm.cost_model_names("PlutusV1", 166)
    # uplc's file spells the V3 protocol-10 model as the evaluator reads it; respelled, the
    # ledger's names give back exactly uplc's table (same values, same parameters).
    v3 = cm.named_cost_model("PlutusV3", old["PlutusV3"])
    assert list(v3) == cm.cost_model_names("PlutusV3", 297)
    assert cm._evaluator_names("PlutusV3", v3) == latest_network_config()["PlutusV3"]


def test_protocol_11_recosts_division_and_equals_bytestring_only() -> None:
    old, new = cm.pv10_cost_models()["PlutusV3"], cm.van_rossem_cost_models()["PlutusV3"]
    names = cm.cost_model_names("PlutusV3")
    changed = {names[i] for i in range(len(old)) if old[i] != new[i]}
    assert changed == {
        "divideInteger-cpu-arguments-model-arguments-c11",
        "modInteger-cpu-arguments-model-arguments-c11",
        "quotientInteger-cpu-arguments-model-arguments-c11",
        "remainderInteger-cpu-arguments-model-arguments-c11",
        "equalsByteString-cpu-arguments-constant",
        "equalsByteString-cpu-arguments-intercept",
        "equalsByteString-cpu-arguments-slope",
    }


def test_named_model_keeps_ledger_order_and_rejects_short_lists() -> None:
    values = cm.plutus_v3_cost_model()
    named = cm.named_cost_model("PlutusV3", values)
    assert list(named) == cm.cost_model_names("PlutusV3")
    with pytest.raises(cm.CostModelError, match="296 parameters"):
        cm.named_cost_model("PlutusV3", values[:296])
    with pytest.raises(cm.CostModelError, match="unknown Plutus language"):
        cm.cost_model_names("PlutusV4")


def test_cost_models_cbor_is_the_ledger_map_of_language_ids() -> None:
    decoded = cbor2.loads(cm.cost_models_cbor(cm.default_cost_models()))
    assert list(decoded) == [0, 1, 2]
    assert decoded[2] == cm.plutus_v3_cost_model()
    with pytest.raises(cm.CostModelError):
        cm.cost_models_cbor({"PlutusV9": [1]})


def test_evaluator_reads_every_parameter_from_the_list() -> None:
    values = cm.plutus_v3_cost_model()
    names = cm.cost_model_names("PlutusV3")
    models = cm.evaluator_cost_models("PlutusV3", values)
    assert (
        models.machine.cpu[CekOp.Startup].constant
        == values[names.index("cekStartupCost-exBudgetCPU")]
    )
    # uplc's own updater ignores these two (it keeps its base file's numbers).
    changed = list(values)
    changed[names.index("integerToByteString-memory-arguments-intercept")] = 7
    changed[names.index("integerToByteString-memory-arguments-slope")] = 3
    itb = cm.evaluator_cost_models("PlutusV3", changed).builtin.memory[
        BuiltInFun.IntegerToByteString
    ]
    assert (itb.intercept, itb.slope) == (7, 3)


def test_changing_a_parameter_changes_the_measured_cost() -> None:
    values = cm.plutus_v3_cost_model()
    base = evaluate_script(
        _flat(ADD_SCRIPT), [PlutusInteger(0)], "PlutusV3", values, (10**6, 10**9)
    )
    changed = list(values)
    changed[cm.cost_model_names("PlutusV3").index("addInteger-cpu-arguments-intercept")] += 1000
    more = evaluate_script(
        _flat(ADD_SCRIPT), [PlutusInteger(0)], "PlutusV3", changed, (10**6, 10**9)
    )
    assert base.ok and more.ok
    assert more.steps - base.steps == 1000
    assert more.mem == base.mem


def test_builtins_missing_from_a_language_model_fail_the_script() -> None:
    # Protocol 10's V1 model has no serialiseData; protocol 11 gives V1 every builtin.
    models = cm.evaluator_cost_models("PlutusV1", cm.pv10_cost_models()["PlutusV1"])
    with pytest.raises(RuntimeError, match="not available in PlutusV1"):
        models.builtin.cpu[BuiltInFun.SerialiseData].cost(1)
    v1 = cm.evaluator_cost_models("PlutusV1", cm.van_rossem_cost_models()["PlutusV1"])
    assert v1.builtin.cpu[BuiltInFun.SerialiseData].cost(1) > 0


def test_protocol_11_recost_changes_the_measured_cost_of_equals_bytestring() -> None:
    script = _flat(
        "(program 1.1.0 (lam ctx [(lam x (con unit ())) "
        "[(builtin equalsByteString) (con bytestring #00) (con bytestring #00)]]))"
    )
    runs = [
        evaluate_script(script, [PlutusInteger(0)], "PlutusV3", models["PlutusV3"], (10**6, 10**9))
        for models in (cm.pv10_cost_models(), cm.van_rossem_cost_models())
    ]
    assert all(run.ok for run in runs)
    # equalsByteString cpu is linear on the diagonal (equal sizes, here one word each):
    # intercept + slope = 29498 + 38 under protocol 10, 28755 + 75 under protocol 11.
    assert runs[1].steps - runs[0].steps == (28755 + 75) - (29498 + 38)
    # Off the diagonal it is the constant, 24548 -> 30623.
    assert (
        cm.van_rossem_cost_models()["PlutusV3"][
            cm.cost_model_names("PlutusV3").index("equalsByteString-cpu-arguments-constant")
        ]
        == 30623
    )


def test_protocol_11_builtins_are_refused_with_the_reason() -> None:
    from types import SimpleNamespace

    from uplc.tools import flatten, parse

    program = parse("(program 1.1.0 (lam ctx (builtin ripemd_160)))")
    program.term.term.builtin = SimpleNamespace(value=87, name="ExpModInteger")  # type: ignore[attr-defined]
    script = bytes(flatten(program))
    result = None
    with pytest.raises(ValueError, match="expModInteger .*uplc 1.3.3.* does not implement"):
        result = evaluate_script(
            script, [PlutusInteger(0)], "PlutusV3", cm.plutus_v3_cost_model(), (10**6, 10**9)
        )
    assert result is None
