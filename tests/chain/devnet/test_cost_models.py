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


def test_v3_model_is_the_protocol_10_list_in_ledger_order() -> None:
    values, names = cm.plutus_v3_cost_model(), cm.plutus_v3_cost_model_names()
    assert len(values) == len(names) == 297
    assert len(set(names)) == 297
    assert names[0] == "addInteger-cpu-arguments-intercept"
    assert names[-1] == "ripemd_160-memory-arguments"
    assert dict(zip(names, values, strict=True)) == latest_network_config()["PlutusV3"]
    assert list(latest_network_config()["PlutusV3"]) == names


def test_v1_v2_models_use_the_ledger_parameter_names() -> None:
    assert len(cm.plutus_v1_cost_model()) == 166
    assert len(cm.plutus_v2_cost_model()) == 175
    assert "cekApplyCost-exBudgetMemory" in cm.plutus_v1_cost_model_names()
    assert "cekApplyCost-exBudgetMem" not in cm.plutus_v1_cost_model_names()
    defaults = cm.default_cost_models()
    assert list(defaults) == ["PlutusV1", "PlutusV2", "PlutusV3"]
    assert defaults["PlutusV2"] == cm.plutus_v2_cost_model()


def test_named_model_keeps_ledger_order_and_rejects_short_lists() -> None:
    named = cm.named_cost_model("PlutusV3", cm.plutus_v3_cost_model())
    assert list(named) == cm.plutus_v3_cost_model_names()
    with pytest.raises(cm.CostModelError, match="296 parameters"):
        cm.named_cost_model("PlutusV3", cm.plutus_v3_cost_model()[:-1])
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
    names = cm.plutus_v3_cost_model_names()
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
    changed[cm.plutus_v3_cost_model_names().index("addInteger-cpu-arguments-intercept")] += 1000
    more = evaluate_script(
        _flat(ADD_SCRIPT), [PlutusInteger(0)], "PlutusV3", changed, (10**6, 10**9)
    )
    assert base.ok and more.ok
    assert more.steps - base.steps == 1000
    assert more.mem == base.mem


def test_builtins_missing_from_a_language_model_fail_the_script() -> None:
    models = cm.evaluator_cost_models("PlutusV1", cm.plutus_v1_cost_model())
    with pytest.raises(RuntimeError, match="not available in PlutusV1"):
        models.builtin.cpu[BuiltInFun.SerialiseData].cost(1)
    v2 = cm.evaluator_cost_models("PlutusV2", cm.plutus_v2_cost_model())
    assert v2.builtin.cpu[BuiltInFun.SerialiseData].cost(1) > 0
