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


_PLUTUSV1: tuple[tuple[str, int], ...] = (
    ("addInteger-cpu-arguments-intercept", 100788),
    ("addInteger-cpu-arguments-slope", 420),
    ("addInteger-memory-arguments-intercept", 1),
    ("addInteger-memory-arguments-slope", 1),
    ("appendByteString-cpu-arguments-intercept", 1000),
    ("appendByteString-cpu-arguments-slope", 173),
    ("appendByteString-memory-arguments-intercept", 0),
    ("appendByteString-memory-arguments-slope", 1),
    ("appendString-cpu-arguments-intercept", 1000),
    ("appendString-cpu-arguments-slope", 59957),
    ("appendString-memory-arguments-intercept", 4),
    ("appendString-memory-arguments-slope", 1),
    ("bData-cpu-arguments", 11183),
    ("bData-memory-arguments", 32),
    ("blake2b_256-cpu-arguments-intercept", 201305),
    ("blake2b_256-cpu-arguments-slope", 8356),
    ("blake2b_256-memory-arguments", 4),
    ("cekApplyCost-exBudgetCPU", 16000),
    ("cekApplyCost-exBudgetMemory", 100),
    ("cekBuiltinCost-exBudgetCPU", 16000),
    ("cekBuiltinCost-exBudgetMemory", 100),
    ("cekConstCost-exBudgetCPU", 16000),
    ("cekConstCost-exBudgetMemory", 100),
    ("cekDelayCost-exBudgetCPU", 16000),
    ("cekDelayCost-exBudgetMemory", 100),
    ("cekForceCost-exBudgetCPU", 16000),
    ("cekForceCost-exBudgetMemory", 100),
    ("cekLamCost-exBudgetCPU", 16000),
    ("cekLamCost-exBudgetMemory", 100),
    ("cekStartupCost-exBudgetCPU", 100),
    ("cekStartupCost-exBudgetMemory", 100),
    ("cekVarCost-exBudgetCPU", 16000),
    ("cekVarCost-exBudgetMemory", 100),
    ("chooseData-cpu-arguments", 94375),
    ("chooseData-memory-arguments", 32),
    ("chooseList-cpu-arguments", 132994),
    ("chooseList-memory-arguments", 32),
    ("chooseUnit-cpu-arguments", 61462),
    ("chooseUnit-memory-arguments", 4),
    ("consByteString-cpu-arguments-intercept", 72010),
    ("consByteString-cpu-arguments-slope", 178),
    ("consByteString-memory-arguments-intercept", 0),
    ("consByteString-memory-arguments-slope", 1),
    ("constrData-cpu-arguments", 22151),
    ("constrData-memory-arguments", 32),
    ("decodeUtf8-cpu-arguments-intercept", 91189),
    ("decodeUtf8-cpu-arguments-slope", 769),
    ("decodeUtf8-memory-arguments-intercept", 4),
    ("decodeUtf8-memory-arguments-slope", 2),
    ("divideInteger-cpu-arguments-constant", 85848),
    ("divideInteger-cpu-arguments-model-arguments-intercept", 228465),
    ("divideInteger-cpu-arguments-model-arguments-slope", 122),
    ("divideInteger-memory-arguments-intercept", 0),
    ("divideInteger-memory-arguments-minimum", 1),
    ("divideInteger-memory-arguments-slope", 1),
    ("encodeUtf8-cpu-arguments-intercept", 1000),
    ("encodeUtf8-cpu-arguments-slope", 42921),
    ("encodeUtf8-memory-arguments-intercept", 4),
    ("encodeUtf8-memory-arguments-slope", 2),
    ("equalsByteString-cpu-arguments-constant", 24548),
    ("equalsByteString-cpu-arguments-intercept", 29498),
    ("equalsByteString-cpu-arguments-slope", 38),
    ("equalsByteString-memory-arguments", 1),
    ("equalsData-cpu-arguments-intercept", 898148),
    ("equalsData-cpu-arguments-slope", 27279),
    ("equalsData-memory-arguments", 1),
    ("equalsInteger-cpu-arguments-intercept", 51775),
    ("equalsInteger-cpu-arguments-slope", 558),
    ("equalsInteger-memory-arguments", 1),
    ("equalsString-cpu-arguments-constant", 39184),
    ("equalsString-cpu-arguments-intercept", 1000),
    ("equalsString-cpu-arguments-slope", 60594),
    ("equalsString-memory-arguments", 1),
    ("fstPair-cpu-arguments", 141895),
    ("fstPair-memory-arguments", 32),
    ("headList-cpu-arguments", 83150),
    ("headList-memory-arguments", 32),
    ("iData-cpu-arguments", 15299),
    ("iData-memory-arguments", 32),
    ("ifThenElse-cpu-arguments", 76049),
    ("ifThenElse-memory-arguments", 1),
    ("indexByteString-cpu-arguments", 13169),
    ("indexByteString-memory-arguments", 4),
    ("lengthOfByteString-cpu-arguments", 22100),
    ("lengthOfByteString-memory-arguments", 10),
    ("lessThanByteString-cpu-arguments-intercept", 28999),
    ("lessThanByteString-cpu-arguments-slope", 74),
    ("lessThanByteString-memory-arguments", 1),
    ("lessThanEqualsByteString-cpu-arguments-intercept", 28999),
    ("lessThanEqualsByteString-cpu-arguments-slope", 74),
    ("lessThanEqualsByteString-memory-arguments", 1),
    ("lessThanEqualsInteger-cpu-arguments-intercept", 43285),
    ("lessThanEqualsInteger-cpu-arguments-slope", 552),
    ("lessThanEqualsInteger-memory-arguments", 1),
    ("lessThanInteger-cpu-arguments-intercept", 44749),
    ("lessThanInteger-cpu-arguments-slope", 541),
    ("lessThanInteger-memory-arguments", 1),
    ("listData-cpu-arguments", 33852),
    ("listData-memory-arguments", 32),
    ("mapData-cpu-arguments", 68246),
    ("mapData-memory-arguments", 32),
    ("mkCons-cpu-arguments", 72362),
    ("mkCons-memory-arguments", 32),
    ("mkNilData-cpu-arguments", 7243),
    ("mkNilData-memory-arguments", 32),
    ("mkNilPairData-cpu-arguments", 7391),
    ("mkNilPairData-memory-arguments", 32),
    ("mkPairData-cpu-arguments", 11546),
    ("mkPairData-memory-arguments", 32),
    ("modInteger-cpu-arguments-constant", 85848),
    ("modInteger-cpu-arguments-model-arguments-intercept", 228465),
    ("modInteger-cpu-arguments-model-arguments-slope", 122),
    ("modInteger-memory-arguments-intercept", 0),
    ("modInteger-memory-arguments-minimum", 1),
    ("modInteger-memory-arguments-slope", 1),
    ("multiplyInteger-cpu-arguments-intercept", 90434),
    ("multiplyInteger-cpu-arguments-slope", 519),
    ("multiplyInteger-memory-arguments-intercept", 0),
    ("multiplyInteger-memory-arguments-slope", 1),
    ("nullList-cpu-arguments", 74433),
    ("nullList-memory-arguments", 32),
    ("quotientInteger-cpu-arguments-constant", 85848),
    ("quotientInteger-cpu-arguments-model-arguments-intercept", 228465),
    ("quotientInteger-cpu-arguments-model-arguments-slope", 122),
    ("quotientInteger-memory-arguments-intercept", 0),
    ("quotientInteger-memory-arguments-minimum", 1),
    ("quotientInteger-memory-arguments-slope", 1),
    ("remainderInteger-cpu-arguments-constant", 85848),
    ("remainderInteger-cpu-arguments-model-arguments-intercept", 228465),
    ("remainderInteger-cpu-arguments-model-arguments-slope", 122),
    ("remainderInteger-memory-arguments-intercept", 0),
    ("remainderInteger-memory-arguments-minimum", 1),
    ("remainderInteger-memory-arguments-slope", 1),
    ("sha2_256-cpu-arguments-intercept", 270652),
    ("sha2_256-cpu-arguments-slope", 22588),
    ("sha2_256-memory-arguments", 4),
    ("sha3_256-cpu-arguments-intercept", 1457325),
    ("sha3_256-cpu-arguments-slope", 64566),
    ("sha3_256-memory-arguments", 4),
    ("sliceByteString-cpu-arguments-intercept", 20467),
    ("sliceByteString-cpu-arguments-slope", 1),
    ("sliceByteString-memory-arguments-intercept", 4),
    ("sliceByteString-memory-arguments-slope", 0),
    ("sndPair-cpu-arguments", 141992),
    ("sndPair-memory-arguments", 32),
    ("subtractInteger-cpu-arguments-intercept", 100788),
    ("subtractInteger-cpu-arguments-slope", 420),
    ("subtractInteger-memory-arguments-intercept", 1),
    ("subtractInteger-memory-arguments-slope", 1),
    ("tailList-cpu-arguments", 81663),
    ("tailList-memory-arguments", 32),
    ("trace-cpu-arguments", 59498),
    ("trace-memory-arguments", 32),
    ("unBData-cpu-arguments", 20142),
    ("unBData-memory-arguments", 32),
    ("unConstrData-cpu-arguments", 24588),
    ("unConstrData-memory-arguments", 32),
    ("unIData-cpu-arguments", 20744),
    ("unIData-memory-arguments", 32),
    ("unListData-cpu-arguments", 25933),
    ("unListData-memory-arguments", 32),
    ("unMapData-cpu-arguments", 24623),
    ("unMapData-memory-arguments", 32),
    ("verifyEd25519Signature-cpu-arguments-intercept", 53384111),
    ("verifyEd25519Signature-cpu-arguments-slope", 14333),
    ("verifyEd25519Signature-memory-arguments", 10),
)

_PLUTUSV2: tuple[tuple[str, int], ...] = (
    ("addInteger-cpu-arguments-intercept", 100788),
    ("addInteger-cpu-arguments-slope", 420),
    ("addInteger-memory-arguments-intercept", 1),
    ("addInteger-memory-arguments-slope", 1),
    ("appendByteString-cpu-arguments-intercept", 1000),
    ("appendByteString-cpu-arguments-slope", 173),
    ("appendByteString-memory-arguments-intercept", 0),
    ("appendByteString-memory-arguments-slope", 1),
    ("appendString-cpu-arguments-intercept", 1000),
    ("appendString-cpu-arguments-slope", 59957),
    ("appendString-memory-arguments-intercept", 4),
    ("appendString-memory-arguments-slope", 1),
    ("bData-cpu-arguments", 11183),
    ("bData-memory-arguments", 32),
    ("blake2b_256-cpu-arguments-intercept", 201305),
    ("blake2b_256-cpu-arguments-slope", 8356),
    ("blake2b_256-memory-arguments", 4),
    ("cekApplyCost-exBudgetCPU", 16000),
    ("cekApplyCost-exBudgetMemory", 100),
    ("cekBuiltinCost-exBudgetCPU", 16000),
    ("cekBuiltinCost-exBudgetMemory", 100),
    ("cekConstCost-exBudgetCPU", 16000),
    ("cekConstCost-exBudgetMemory", 100),
    ("cekDelayCost-exBudgetCPU", 16000),
    ("cekDelayCost-exBudgetMemory", 100),
    ("cekForceCost-exBudgetCPU", 16000),
    ("cekForceCost-exBudgetMemory", 100),
    ("cekLamCost-exBudgetCPU", 16000),
    ("cekLamCost-exBudgetMemory", 100),
    ("cekStartupCost-exBudgetCPU", 100),
    ("cekStartupCost-exBudgetMemory", 100),
    ("cekVarCost-exBudgetCPU", 16000),
    ("cekVarCost-exBudgetMemory", 100),
    ("chooseData-cpu-arguments", 94375),
    ("chooseData-memory-arguments", 32),
    ("chooseList-cpu-arguments", 132994),
    ("chooseList-memory-arguments", 32),
    ("chooseUnit-cpu-arguments", 61462),
    ("chooseUnit-memory-arguments", 4),
    ("consByteString-cpu-arguments-intercept", 72010),
    ("consByteString-cpu-arguments-slope", 178),
    ("consByteString-memory-arguments-intercept", 0),
    ("consByteString-memory-arguments-slope", 1),
    ("constrData-cpu-arguments", 22151),
    ("constrData-memory-arguments", 32),
    ("decodeUtf8-cpu-arguments-intercept", 91189),
    ("decodeUtf8-cpu-arguments-slope", 769),
    ("decodeUtf8-memory-arguments-intercept", 4),
    ("decodeUtf8-memory-arguments-slope", 2),
    ("divideInteger-cpu-arguments-constant", 85848),
    ("divideInteger-cpu-arguments-model-arguments-intercept", 228465),
    ("divideInteger-cpu-arguments-model-arguments-slope", 122),
    ("divideInteger-memory-arguments-intercept", 0),
    ("divideInteger-memory-arguments-minimum", 1),
    ("divideInteger-memory-arguments-slope", 1),
    ("encodeUtf8-cpu-arguments-intercept", 1000),
    ("encodeUtf8-cpu-arguments-slope", 42921),
    ("encodeUtf8-memory-arguments-intercept", 4),
    ("encodeUtf8-memory-arguments-slope", 2),
    ("equalsByteString-cpu-arguments-constant", 24548),
    ("equalsByteString-cpu-arguments-intercept", 29498),
    ("equalsByteString-cpu-arguments-slope", 38),
    ("equalsByteString-memory-arguments", 1),
    ("equalsData-cpu-arguments-intercept", 898148),
    ("equalsData-cpu-arguments-slope", 27279),
    ("equalsData-memory-arguments", 1),
    ("equalsInteger-cpu-arguments-intercept", 51775),
    ("equalsInteger-cpu-arguments-slope", 558),
    ("equalsInteger-memory-arguments", 1),
    ("equalsString-cpu-arguments-constant", 39184),
    ("equalsString-cpu-arguments-intercept", 1000),
    ("equalsString-cpu-arguments-slope", 60594),
    ("equalsString-memory-arguments", 1),
    ("fstPair-cpu-arguments", 141895),
    ("fstPair-memory-arguments", 32),
    ("headList-cpu-arguments", 83150),
    ("headList-memory-arguments", 32),
    ("iData-cpu-arguments", 15299),
    ("iData-memory-arguments", 32),
    ("ifThenElse-cpu-arguments", 76049),
    ("ifThenElse-memory-arguments", 1),
    ("indexByteString-cpu-arguments", 13169),
    ("indexByteString-memory-arguments", 4),
    ("lengthOfByteString-cpu-arguments", 22100),
    ("lengthOfByteString-memory-arguments", 10),
    ("lessThanByteString-cpu-arguments-intercept", 28999),
    ("lessThanByteString-cpu-arguments-slope", 74),
    ("lessThanByteString-memory-arguments", 1),
    ("lessThanEqualsByteString-cpu-arguments-intercept", 28999),
    ("lessThanEqualsByteString-cpu-arguments-slope", 74),
    ("lessThanEqualsByteString-memory-arguments", 1),
    ("lessThanEqualsInteger-cpu-arguments-intercept", 43285),
    ("lessThanEqualsInteger-cpu-arguments-slope", 552),
    ("lessThanEqualsInteger-memory-arguments", 1),
    ("lessThanInteger-cpu-arguments-intercept", 44749),
    ("lessThanInteger-cpu-arguments-slope", 541),
    ("lessThanInteger-memory-arguments", 1),
    ("listData-cpu-arguments", 33852),
    ("listData-memory-arguments", 32),
    ("mapData-cpu-arguments", 68246),
    ("mapData-memory-arguments", 32),
    ("mkCons-cpu-arguments", 72362),
    ("mkCons-memory-arguments", 32),
    ("mkNilData-cpu-arguments", 7243),
    ("mkNilData-memory-arguments", 32),
    ("mkNilPairData-cpu-arguments", 7391),
    ("mkNilPairData-memory-arguments", 32),
    ("mkPairData-cpu-arguments", 11546),
    ("mkPairData-memory-arguments", 32),
    ("modInteger-cpu-arguments-constant", 85848),
    ("modInteger-cpu-arguments-model-arguments-intercept", 228465),
    ("modInteger-cpu-arguments-model-arguments-slope", 122),
    ("modInteger-memory-arguments-intercept", 0),
    ("modInteger-memory-arguments-minimum", 1),
    ("modInteger-memory-arguments-slope", 1),
    ("multiplyInteger-cpu-arguments-intercept", 90434),
    ("multiplyInteger-cpu-arguments-slope", 519),
    ("multiplyInteger-memory-arguments-intercept", 0),
    ("multiplyInteger-memory-arguments-slope", 1),
    ("nullList-cpu-arguments", 74433),
    ("nullList-memory-arguments", 32),
    ("quotientInteger-cpu-arguments-constant", 85848),
    ("quotientInteger-cpu-arguments-model-arguments-intercept", 228465),
    ("quotientInteger-cpu-arguments-model-arguments-slope", 122),
    ("quotientInteger-memory-arguments-intercept", 0),
    ("quotientInteger-memory-arguments-minimum", 1),
    ("quotientInteger-memory-arguments-slope", 1),
    ("remainderInteger-cpu-arguments-constant", 85848),
    ("remainderInteger-cpu-arguments-model-arguments-intercept", 228465),
    ("remainderInteger-cpu-arguments-model-arguments-slope", 122),
    ("remainderInteger-memory-arguments-intercept", 0),
    ("remainderInteger-memory-arguments-minimum", 1),
    ("remainderInteger-memory-arguments-slope", 1),
    ("serialiseData-cpu-arguments-intercept", 955506),
    ("serialiseData-cpu-arguments-slope", 213312),
    ("serialiseData-memory-arguments-intercept", 0),
    ("serialiseData-memory-arguments-slope", 2),
    ("sha2_256-cpu-arguments-intercept", 270652),
    ("sha2_256-cpu-arguments-slope", 22588),
    ("sha2_256-memory-arguments", 4),
    ("sha3_256-cpu-arguments-intercept", 1457325),
    ("sha3_256-cpu-arguments-slope", 64566),
    ("sha3_256-memory-arguments", 4),
    ("sliceByteString-cpu-arguments-intercept", 20467),
    ("sliceByteString-cpu-arguments-slope", 1),
    ("sliceByteString-memory-arguments-intercept", 4),
    ("sliceByteString-memory-arguments-slope", 0),
    ("sndPair-cpu-arguments", 141992),
    ("sndPair-memory-arguments", 32),
    ("subtractInteger-cpu-arguments-intercept", 100788),
    ("subtractInteger-cpu-arguments-slope", 420),
    ("subtractInteger-memory-arguments-intercept", 1),
    ("subtractInteger-memory-arguments-slope", 1),
    ("tailList-cpu-arguments", 81663),
    ("tailList-memory-arguments", 32),
    ("trace-cpu-arguments", 59498),
    ("trace-memory-arguments", 32),
    ("unBData-cpu-arguments", 20142),
    ("unBData-memory-arguments", 32),
    ("unConstrData-cpu-arguments", 24588),
    ("unConstrData-memory-arguments", 32),
    ("unIData-cpu-arguments", 20744),
    ("unIData-memory-arguments", 32),
    ("unListData-cpu-arguments", 25933),
    ("unListData-memory-arguments", 32),
    ("unMapData-cpu-arguments", 24623),
    ("unMapData-memory-arguments", 32),
    ("verifyEcdsaSecp256k1Signature-cpu-arguments", 43053543),
    ("verifyEcdsaSecp256k1Signature-memory-arguments", 10),
    ("verifyEd25519Signature-cpu-arguments-intercept", 53384111),
    ("verifyEd25519Signature-cpu-arguments-slope", 14333),
    ("verifyEd25519Signature-memory-arguments", 10),
    ("verifySchnorrSecp256k1Signature-cpu-arguments-intercept", 43574283),
    ("verifySchnorrSecp256k1Signature-cpu-arguments-slope", 26308),
    ("verifySchnorrSecp256k1Signature-memory-arguments", 10),
)

_PLUTUSV3: tuple[tuple[str, int], ...] = (
    ("addInteger-cpu-arguments-intercept", 100788),
    ("addInteger-cpu-arguments-slope", 420),
    ("addInteger-memory-arguments-intercept", 1),
    ("addInteger-memory-arguments-slope", 1),
    ("appendByteString-cpu-arguments-intercept", 1000),
    ("appendByteString-cpu-arguments-slope", 173),
    ("appendByteString-memory-arguments-intercept", 0),
    ("appendByteString-memory-arguments-slope", 1),
    ("appendString-cpu-arguments-intercept", 1000),
    ("appendString-cpu-arguments-slope", 59957),
    ("appendString-memory-arguments-intercept", 4),
    ("appendString-memory-arguments-slope", 1),
    ("bData-cpu-arguments", 11183),
    ("bData-memory-arguments", 32),
    ("blake2b_256-cpu-arguments-intercept", 201305),
    ("blake2b_256-cpu-arguments-slope", 8356),
    ("blake2b_256-memory-arguments", 4),
    ("cekApplyCost-exBudgetCPU", 16000),
    ("cekApplyCost-exBudgetMemory", 100),
    ("cekBuiltinCost-exBudgetCPU", 16000),
    ("cekBuiltinCost-exBudgetMemory", 100),
    ("cekConstCost-exBudgetCPU", 16000),
    ("cekConstCost-exBudgetMemory", 100),
    ("cekDelayCost-exBudgetCPU", 16000),
    ("cekDelayCost-exBudgetMemory", 100),
    ("cekForceCost-exBudgetCPU", 16000),
    ("cekForceCost-exBudgetMemory", 100),
    ("cekLamCost-exBudgetCPU", 16000),
    ("cekLamCost-exBudgetMemory", 100),
    ("cekStartupCost-exBudgetCPU", 100),
    ("cekStartupCost-exBudgetMemory", 100),
    ("cekVarCost-exBudgetCPU", 16000),
    ("cekVarCost-exBudgetMemory", 100),
    ("chooseData-cpu-arguments", 94375),
    ("chooseData-memory-arguments", 32),
    ("chooseList-cpu-arguments", 132994),
    ("chooseList-memory-arguments", 32),
    ("chooseUnit-cpu-arguments", 61462),
    ("chooseUnit-memory-arguments", 4),
    ("consByteString-cpu-arguments-intercept", 72010),
    ("consByteString-cpu-arguments-slope", 178),
    ("consByteString-memory-arguments-intercept", 0),
    ("consByteString-memory-arguments-slope", 1),
    ("constrData-cpu-arguments", 22151),
    ("constrData-memory-arguments", 32),
    ("decodeUtf8-cpu-arguments-intercept", 91189),
    ("decodeUtf8-cpu-arguments-slope", 769),
    ("decodeUtf8-memory-arguments-intercept", 4),
    ("decodeUtf8-memory-arguments-slope", 2),
    ("divideInteger-cpu-arguments-constant", 85848),
    ("divideInteger-cpu-arguments-c00", 123203),
    ("divideInteger-cpu-arguments-c01", 7305),
    ("divideInteger-cpu-arguments-c02", -900),
    ("divideInteger-cpu-arguments-c10", 1716),
    ("divideInteger-cpu-arguments-c11", 549),
    ("divideInteger-cpu-arguments-c20", 57),
    ("divideInteger-cpu-arguments-minimum", 85848),
    ("divideInteger-memory-arguments-intercept", 0),
    ("divideInteger-memory-arguments-minimum", 1),
    ("divideInteger-memory-arguments-slope", 1),
    ("encodeUtf8-cpu-arguments-intercept", 1000),
    ("encodeUtf8-cpu-arguments-slope", 42921),
    ("encodeUtf8-memory-arguments-intercept", 4),
    ("encodeUtf8-memory-arguments-slope", 2),
    ("equalsByteString-cpu-arguments-constant", 24548),
    ("equalsByteString-cpu-arguments-intercept", 29498),
    ("equalsByteString-cpu-arguments-slope", 38),
    ("equalsByteString-memory-arguments", 1),
    ("equalsData-cpu-arguments-intercept", 898148),
    ("equalsData-cpu-arguments-slope", 27279),
    ("equalsData-memory-arguments", 1),
    ("equalsInteger-cpu-arguments-intercept", 51775),
    ("equalsInteger-cpu-arguments-slope", 558),
    ("equalsInteger-memory-arguments", 1),
    ("equalsString-cpu-arguments-constant", 39184),
    ("equalsString-cpu-arguments-intercept", 1000),
    ("equalsString-cpu-arguments-slope", 60594),
    ("equalsString-memory-arguments", 1),
    ("fstPair-cpu-arguments", 141895),
    ("fstPair-memory-arguments", 32),
    ("headList-cpu-arguments", 83150),
    ("headList-memory-arguments", 32),
    ("iData-cpu-arguments", 15299),
    ("iData-memory-arguments", 32),
    ("ifThenElse-cpu-arguments", 76049),
    ("ifThenElse-memory-arguments", 1),
    ("indexByteString-cpu-arguments", 13169),
    ("indexByteString-memory-arguments", 4),
    ("lengthOfByteString-cpu-arguments", 22100),
    ("lengthOfByteString-memory-arguments", 10),
    ("lessThanByteString-cpu-arguments-intercept", 28999),
    ("lessThanByteString-cpu-arguments-slope", 74),
    ("lessThanByteString-memory-arguments", 1),
    ("lessThanEqualsByteString-cpu-arguments-intercept", 28999),
    ("lessThanEqualsByteString-cpu-arguments-slope", 74),
    ("lessThanEqualsByteString-memory-arguments", 1),
    ("lessThanEqualsInteger-cpu-arguments-intercept", 43285),
    ("lessThanEqualsInteger-cpu-arguments-slope", 552),
    ("lessThanEqualsInteger-memory-arguments", 1),
    ("lessThanInteger-cpu-arguments-intercept", 44749),
    ("lessThanInteger-cpu-arguments-slope", 541),
    ("lessThanInteger-memory-arguments", 1),
    ("listData-cpu-arguments", 33852),
    ("listData-memory-arguments", 32),
    ("mapData-cpu-arguments", 68246),
    ("mapData-memory-arguments", 32),
    ("mkCons-cpu-arguments", 72362),
    ("mkCons-memory-arguments", 32),
    ("mkNilData-cpu-arguments", 7243),
    ("mkNilData-memory-arguments", 32),
    ("mkNilPairData-cpu-arguments", 7391),
    ("mkNilPairData-memory-arguments", 32),
    ("mkPairData-cpu-arguments", 11546),
    ("mkPairData-memory-arguments", 32),
    ("modInteger-cpu-arguments-constant", 85848),
    ("modInteger-cpu-arguments-c00", 123203),
    ("modInteger-cpu-arguments-c01", 7305),
    ("modInteger-cpu-arguments-c02", -900),
    ("modInteger-cpu-arguments-c10", 1716),
    ("modInteger-cpu-arguments-c11", 549),
    ("modInteger-cpu-arguments-c20", 57),
    ("modInteger-cpu-arguments-minimum", 85848),
    ("modInteger-memory-arguments-intercept", 0),
    ("modInteger-memory-arguments-slope", 1),
    ("multiplyInteger-cpu-arguments-intercept", 90434),
    ("multiplyInteger-cpu-arguments-slope", 519),
    ("multiplyInteger-memory-arguments-intercept", 0),
    ("multiplyInteger-memory-arguments-slope", 1),
    ("nullList-cpu-arguments", 74433),
    ("nullList-memory-arguments", 32),
    ("quotientInteger-cpu-arguments-constant", 85848),
    ("quotientInteger-cpu-arguments-c00", 123203),
    ("quotientInteger-cpu-arguments-c01", 7305),
    ("quotientInteger-cpu-arguments-c02", -900),
    ("quotientInteger-cpu-arguments-c10", 1716),
    ("quotientInteger-cpu-arguments-c11", 549),
    ("quotientInteger-cpu-arguments-c20", 57),
    ("quotientInteger-cpu-arguments-minimum", 85848),
    ("quotientInteger-memory-arguments-intercept", 0),
    ("quotientInteger-memory-arguments-minimum", 1),
    ("quotientInteger-memory-arguments-slope", 1),
    ("remainderInteger-cpu-arguments-constant", 85848),
    ("remainderInteger-cpu-arguments-c00", 123203),
    ("remainderInteger-cpu-arguments-c01", 7305),
    ("remainderInteger-cpu-arguments-c02", -900),
    ("remainderInteger-cpu-arguments-c10", 1716),
    ("remainderInteger-cpu-arguments-c11", 549),
    ("remainderInteger-cpu-arguments-c20", 57),
    ("remainderInteger-cpu-arguments-minimum", 85848),
    ("remainderInteger-memory-arguments-intercept", 0),
    ("remainderInteger-memory-arguments-slope", 1),
    ("serialiseData-cpu-arguments-intercept", 955506),
    ("serialiseData-cpu-arguments-slope", 213312),
    ("serialiseData-memory-arguments-intercept", 0),
    ("serialiseData-memory-arguments-slope", 2),
    ("sha2_256-cpu-arguments-intercept", 270652),
    ("sha2_256-cpu-arguments-slope", 22588),
    ("sha2_256-memory-arguments", 4),
    ("sha3_256-cpu-arguments-intercept", 1457325),
    ("sha3_256-cpu-arguments-slope", 64566),
    ("sha3_256-memory-arguments", 4),
    ("sliceByteString-cpu-arguments-intercept", 20467),
    ("sliceByteString-cpu-arguments-slope", 1),
    ("sliceByteString-memory-arguments-intercept", 4),
    ("sliceByteString-memory-arguments-slope", 0),
    ("sndPair-cpu-arguments", 141992),
    ("sndPair-memory-arguments", 32),
    ("subtractInteger-cpu-arguments-intercept", 100788),
    ("subtractInteger-cpu-arguments-slope", 420),
    ("subtractInteger-memory-arguments-intercept", 1),
    ("subtractInteger-memory-arguments-slope", 1),
    ("tailList-cpu-arguments", 81663),
    ("tailList-memory-arguments", 32),
    ("trace-cpu-arguments", 59498),
    ("trace-memory-arguments", 32),
    ("unBData-cpu-arguments", 20142),
    ("unBData-memory-arguments", 32),
    ("unConstrData-cpu-arguments", 24588),
    ("unConstrData-memory-arguments", 32),
    ("unIData-cpu-arguments", 20744),
    ("unIData-memory-arguments", 32),
    ("unListData-cpu-arguments", 25933),
    ("unListData-memory-arguments", 32),
    ("unMapData-cpu-arguments", 24623),
    ("unMapData-memory-arguments", 32),
    ("verifyEcdsaSecp256k1Signature-cpu-arguments", 43053543),
    ("verifyEcdsaSecp256k1Signature-memory-arguments", 10),
    ("verifyEd25519Signature-cpu-arguments-intercept", 53384111),
    ("verifyEd25519Signature-cpu-arguments-slope", 14333),
    ("verifyEd25519Signature-memory-arguments", 10),
    ("verifySchnorrSecp256k1Signature-cpu-arguments-intercept", 43574283),
    ("verifySchnorrSecp256k1Signature-cpu-arguments-slope", 26308),
    ("verifySchnorrSecp256k1Signature-memory-arguments", 10),
    ("cekConstrCost-exBudgetCPU", 16000),
    ("cekConstrCost-exBudgetMemory", 100),
    ("cekCaseCost-exBudgetCPU", 16000),
    ("cekCaseCost-exBudgetMemory", 100),
    ("bls12_381_G1_Add-cpu-arguments", 962335),
    ("bls12_381_G1_Add-memory-arguments", 18),
    ("bls12_381_G1_Compress-cpu-arguments", 2780678),
    ("bls12_381_G1_Compress-memory-arguments", 6),
    ("bls12_381_G1_Equal-cpu-arguments", 442008),
    ("bls12_381_G1_Equal-memory-arguments", 1),
    ("bls12_381_G1_HashToGroup-cpu-arguments-intercept", 52538055),
    ("bls12_381_G1_HashToGroup-cpu-arguments-slope", 3756),
    ("bls12_381_G1_HashToGroup-memory-arguments", 18),
    ("bls12_381_G1_Neg-cpu-arguments", 267929),
    ("bls12_381_G1_Neg-memory-arguments", 18),
    ("bls12_381_G1_ScalarMul-cpu-arguments-intercept", 76433006),
    ("bls12_381_G1_ScalarMul-cpu-arguments-slope", 8868),
    ("bls12_381_G1_ScalarMul-memory-arguments", 18),
    ("bls12_381_G1_Uncompress-cpu-arguments", 52948122),
    ("bls12_381_G1_Uncompress-memory-arguments", 18),
    ("bls12_381_G2_Add-cpu-arguments", 1995836),
    ("bls12_381_G2_Add-memory-arguments", 36),
    ("bls12_381_G2_Compress-cpu-arguments", 3227919),
    ("bls12_381_G2_Compress-memory-arguments", 12),
    ("bls12_381_G2_Equal-cpu-arguments", 901022),
    ("bls12_381_G2_Equal-memory-arguments", 1),
    ("bls12_381_G2_HashToGroup-cpu-arguments-intercept", 166917843),
    ("bls12_381_G2_HashToGroup-cpu-arguments-slope", 4307),
    ("bls12_381_G2_HashToGroup-memory-arguments", 36),
    ("bls12_381_G2_Neg-cpu-arguments", 284546),
    ("bls12_381_G2_Neg-memory-arguments", 36),
    ("bls12_381_G2_ScalarMul-cpu-arguments-intercept", 158221314),
    ("bls12_381_G2_ScalarMul-cpu-arguments-slope", 26549),
    ("bls12_381_G2_ScalarMul-memory-arguments", 36),
    ("bls12_381_G2_Uncompress-cpu-arguments", 74698472),
    ("bls12_381_G2_Uncompress-memory-arguments", 36),
    ("bls12_381_FinalVerify-cpu-arguments", 333849714),
    ("bls12_381_FinalVerify-memory-arguments", 1),
    ("bls12_381_MillerLoop-cpu-arguments", 254006273),
    ("bls12_381_MillerLoop-memory-arguments", 72),
    ("bls12_381_MulMlResult-cpu-arguments", 2174038),
    ("bls12_381_MulMlResult-memory-arguments", 72),
    ("keccak_256-cpu-arguments-intercept", 2261318),
    ("keccak_256-cpu-arguments-slope", 64571),
    ("keccak_256-memory-arguments", 4),
    ("blake2b_224-cpu-arguments-intercept", 207616),
    ("blake2b_224-cpu-arguments-slope", 8310),
    ("blake2b_224-memory-arguments", 4),
    ("integerToByteString-cpu-arguments-c0", 1293828),
    ("integerToByteString-cpu-arguments-c1", 28716),
    ("integerToByteString-cpu-arguments-c2", 63),
    ("integerToByteString-memory-arguments-intercept", 0),
    ("integerToByteString-memory-arguments-slope", 1),
    ("byteStringToInteger-cpu-arguments-c0", 1006041),
    ("byteStringToInteger-cpu-arguments-c1", 43623),
    ("byteStringToInteger-cpu-arguments-c2", 251),
    ("byteStringToInteger-memory-arguments-intercept", 0),
    ("byteStringToInteger-memory-arguments-slope", 1),
    ("andByteString-cpu-arguments-intercept", 100181),
    ("andByteString-cpu-arguments-slope1", 726),
    ("andByteString-cpu-arguments-slope2", 719),
    ("andByteString-memory-arguments-intercept", 0),
    ("andByteString-memory-arguments-slope", 1),
    ("orByteString-cpu-arguments-intercept", 100181),
    ("orByteString-cpu-arguments-slope1", 726),
    ("orByteString-cpu-arguments-slope2", 719),
    ("orByteString-memory-arguments-intercept", 0),
    ("orByteString-memory-arguments-slope", 1),
    ("xorByteString-cpu-arguments-intercept", 100181),
    ("xorByteString-cpu-arguments-slope1", 726),
    ("xorByteString-cpu-arguments-slope2", 719),
    ("xorByteString-memory-arguments-intercept", 0),
    ("xorByteString-memory-arguments-slope", 1),
    ("complementByteString-cpu-arguments-intercept", 107878),
    ("complementByteString-cpu-arguments-slope", 680),
    ("complementByteString-memory-arguments-intercept", 0),
    ("complementByteString-memory-arguments-slope", 1),
    ("readBit-cpu-arguments", 95336),
    ("readBit-memory-arguments", 1),
    ("writeBits-cpu-arguments-intercept", 281145),
    ("writeBits-cpu-arguments-slope", 18848),
    ("writeBits-memory-arguments-intercept", 0),
    ("writeBits-memory-arguments-slope", 1),
    ("replicateByte-cpu-arguments-intercept", 180194),
    ("replicateByte-cpu-arguments-slope", 159),
    ("replicateByte-memory-arguments-intercept", 1),
    ("replicateByte-memory-arguments-slope", 1),
    ("shiftByteString-cpu-arguments-intercept", 158519),
    ("shiftByteString-cpu-arguments-slope", 8942),
    ("shiftByteString-memory-arguments-intercept", 0),
    ("shiftByteString-memory-arguments-slope", 1),
    ("rotateByteString-cpu-arguments-intercept", 159378),
    ("rotateByteString-cpu-arguments-slope", 8813),
    ("rotateByteString-memory-arguments-intercept", 0),
    ("rotateByteString-memory-arguments-slope", 1),
    ("countSetBits-cpu-arguments-intercept", 107490),
    ("countSetBits-cpu-arguments-slope", 3298),
    ("countSetBits-memory-arguments", 1),
    ("findFirstSetBit-cpu-arguments-intercept", 106057),
    ("findFirstSetBit-cpu-arguments-slope", 655),
    ("findFirstSetBit-memory-arguments", 1),
    ("ripemd_160-cpu-arguments-intercept", 1964219),
    ("ripemd_160-cpu-arguments-slope", 24520),
    ("ripemd_160-memory-arguments", 3),
)
