"""The Plutus cost models of the devnet, and the evaluator cost models built from them.

The parameter lists are in ledger order (the order of the protocol parameter `costModels`)
and their names are the ones Blockfrost returns in `/epochs/latest/parameters`. The same
lists feed the Python evaluator, the independent Aiken evaluator and the script-data hash,
so the evaluator's builtin and machine costs are rebuilt from these numbers and never from
a library's implicit defaults.

Values: the protocol-10 (Conway, Plomin) models as shipped with uplc 1.3.3
(`cost_model_files/2024-07-30`), with its V1 typo `cekApplyCost-exBudgetMem` spelled as the
ledger spells it.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from uplc import cost_model as ucm
from uplc.ast import BuiltInFun

from chain.devnet.cost_model_tables import PV10_PLUTUSV1 as _PLUTUSV1
from chain.devnet.cost_model_tables import PV10_PLUTUSV2 as _PLUTUSV2
from chain.devnet.cost_model_tables import PV10_PLUTUSV3 as _PLUTUSV3

LANGUAGES: tuple[str, ...] = ("PlutusV1", "PlutusV2", "PlutusV3")
# Ledger language ids, used as keys of the CBOR cost-model map and in the script-data hash.
LANGUAGE_IDS: dict[str, int] = {"PlutusV1": 0, "PlutusV2": 1, "PlutusV3": 2}


class CostModelError(ValueError):
    """A cost model is unknown, too short or cannot drive the evaluator."""


def plutus_v1_cost_model() -> list[int]:
    return [v for _, v in _PLUTUSV1]


def plutus_v1_cost_model_names() -> list[str]:
    return [k for k, _ in _PLUTUSV1]


def plutus_v2_cost_model() -> list[int]:
    return [v for _, v in _PLUTUSV2]


def plutus_v2_cost_model_names() -> list[str]:
    return [k for k, _ in _PLUTUSV2]


def plutus_v3_cost_model() -> list[int]:
    return [v for _, v in _PLUTUSV3]


def plutus_v3_cost_model_names() -> list[str]:
    return [k for k, _ in _PLUTUSV3]


def cost_model_names(language: str) -> list[str]:
    """Parameter names of `language` ("PlutusV1" | "PlutusV2" | "PlutusV3"), ledger order."""
    return [k for k, _ in _table(language)]


def default_cost_models() -> dict[str, list[int]]:
    return {lang: [v for _, v in _table(lang)] for lang in LANGUAGES}


def named_cost_model(language: str, values: Sequence[int]) -> dict[str, int]:
    """`values` keyed by parameter name, in ledger order (the shape Blockfrost returns).

    Parameters beyond the known names are dropped, as the ledger's evaluator ignores them.
    """
    names = cost_model_names(language)
    _check_length(language, values, len(names))
    return dict(zip(names, (int(v) for v in values), strict=False))


def cost_models_cbor(cost_models: Mapping[str, Sequence[int]]) -> bytes:
    """The ledger's CBOR of a cost-model map: {language id: [int, ...]} (as in the params)."""
    import cbor2

    encoded: dict[int, list[int]] = {}
    for language, values in cost_models.items():
        if language not in LANGUAGE_IDS:
            raise CostModelError(f"unknown Plutus language {language!r}")
        encoded[LANGUAGE_IDS[language]] = [int(v) for v in values]
    return bytes(cbor2.dumps(dict(sorted(encoded.items()))))


@dataclass(frozen=True)
class EvaluatorCostModels:
    """What `uplc.machine.Machine` needs, built from one ledger parameter list."""

    language: str
    builtin: ucm.BuiltinCostModel
    machine: ucm.CekMachineCostModel


def evaluator_cost_models(language: str, values: Sequence[int]) -> EvaluatorCostModels:
    """Builtin and CEK machine cost models for `language`, computed from `values` only.

    Every parameter the evaluator reads must be present; a builtin the language's model has
    no parameters for is unavailable to that language and fails the script when called.
    """
    return _evaluator_cost_models(language, tuple(int(v) for v in values))


@functools.lru_cache(maxsize=16)
def _evaluator_cost_models(language: str, values: tuple[int, ...]) -> EvaluatorCostModels:
    params = _StrictParams(named_cost_model(language, values), language)
    builtin = copy.deepcopy(ucm.default_builtin_cost_model_base())
    if language in ("PlutusV1", "PlutusV2"):
        _use_v1_v2_shapes(builtin)
    for mode, funs in (("cpu", builtin.cpu), ("memory", builtin.memory)):
        for fun, costing in list(funs.items()):
            prefix = f"{fun.name[:1].lower()}{fun.name[1:]}-{mode}"
            if not any(name.startswith(prefix + "-") for name in params):
                funs[fun] = _Unavailable(fun.name, language)
            elif isinstance(costing, ucm.LiteralInYOrLinearInZ):
                # uplc's updater for this shape writes unused fields and keeps the base
                # numbers; read intercept and slope explicitly.
                costing.intercept = params.get(f"{prefix}-arguments-intercept")
                costing.slope = params.get(f"{prefix}-arguments-slope")
            else:
                costing.update_from_network_config(params, prefix)
    machine = copy.deepcopy(ucm.default_cek_machine_cost_model_base())
    for op in ucm.CekOp:
        name = f"cek{op.name}Cost"
        if not any(p.startswith(name + "-") for p in params):
            # Constr and Case do not exist before V3 (program version 1.1.0).
            machine.cpu[op] = _Unavailable(op.name, language)
            machine.memory[op] = _Unavailable(op.name, language)
            continue
        machine.cpu[op] = ucm.ConstantCost(params.get(f"{name}-exBudgetCPU"))
        machine.memory[op] = ucm.ConstantCost(params.get(f"{name}-exBudgetMemory"))
    unused = set(params) - params.used
    if unused:
        raise CostModelError(f"{language} parameters the evaluator does not use: {sorted(unused)}")
    return EvaluatorCostModels(language, builtin, machine)


def _table(language: str) -> tuple[tuple[str, int], ...]:
    tables = {"PlutusV1": _PLUTUSV1, "PlutusV2": _PLUTUSV2, "PlutusV3": _PLUTUSV3}
    if language not in tables:
        raise CostModelError(f"unknown Plutus language {language!r}; expected one of {LANGUAGES}")
    return tables[language]


def _check_length(language: str, values: Sequence[int], expected: int) -> None:
    if len(values) < expected:
        raise CostModelError(
            f"{language} cost model has {len(values)} parameters, the evaluator needs {expected}"
        )


class _StrictParams(dict[str, int]):
    """Parameter lookup that refuses to invent a value (uplc falls back to 3e10)."""

    def __init__(self, values: Mapping[str, int], language: str) -> None:
        super().__init__(values)
        self.language = language
        self.used: set[str] = set()

    def get(self, key: str, default: Any = None) -> int:  # type: ignore[override]
        if key not in self:
            raise CostModelError(f"{self.language} cost model lacks parameter {key!r}")
        self.used.add(key)
        return self[key]


class _Unavailable(ucm.CostingFun):
    """Costing of an operation the language does not have: calling it fails the script."""

    def __init__(self, what: str, language: str) -> None:
        self.what = what
        self.language = language

    def cost(self, *memories: int, values: Any = ()) -> int:
        # RuntimeError is what the uplc machine treats as an evaluation failure.
        raise RuntimeError(f"{self.what} is not available in {self.language}")


def _use_v1_v2_shapes(builtin: ucm.BuiltinCostModel) -> None:
    # V1/V2 (cost models A/B) cost integer division with a linear model above the diagonal
    # and mod/rem memory by subtracted sizes; uplc's base file holds the V3 (C) shapes.
    for fun in (
        BuiltInFun.DivideInteger,
        BuiltInFun.ModInteger,
        BuiltInFun.QuotientInteger,
        BuiltInFun.RemainderInteger,
    ):
        builtin.cpu[fun] = ucm.ConstAboveDiagonal(
            ucm.MultipliedSizes(ucm.LinearCost(0, 0)), ucm.ConstantCost(0)
        )
    for fun in (BuiltInFun.ModInteger, BuiltInFun.RemainderInteger):
        builtin.memory[fun] = ucm.SubtractedSizes(ucm.LinearCost(0, 0), 0)
