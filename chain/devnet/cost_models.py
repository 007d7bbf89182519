"""The Plutus cost models of the devnet, and the evaluator cost models built from them.

The parameter lists are in ledger order (the order of the protocol parameter `costModels`)
and their names are the ledger's (`plutus-ledger-api`'s `ParamName`), the ones Blockfrost
returns in `/epochs/latest/parameters`. A list of n entries is named by the first n names,
as the ledger names it. The same lists feed the Python evaluator, the independent Aiken
evaluator and the script-data hash, so the evaluator's builtin and machine costs are rebuilt
from these numbers and never from a library's implicit defaults.

Which lists a devnet runs is its parameter profile's choice (`chain.devnet.profiles`):
protocol 11's 332/332/350 (`VAN_ROSSEM_*`) or protocol 10's 166/175/297 (`PV10_*`), both in
`cost_model_tables` with their sources.

The Python evaluator (uplc 1.3.3, the newest on PyPI) implements the builtins up to
`ripemd_160`; the protocol-11 additions (`expModInteger` ... `scaleValue`, flat tags 87-100)
are priced by the protocol-11 lists but cannot run here: a script that uses one is refused by
`phase2` with that reason instead of being given a guessed result.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from uplc import cost_model as ucm
from uplc.ast import BuiltInFun

from chain.devnet import cost_model_tables as tables

LANGUAGES: tuple[str, ...] = ("PlutusV1", "PlutusV2", "PlutusV3")
# Ledger language ids, used as keys of the CBOR cost-model map and in the script-data hash.
LANGUAGE_IDS: dict[str, int] = {"PlutusV1": 0, "PlutusV2": 1, "PlutusV3": 2}

# Parameter names per language, ledger order (the longest list the devnet knows).
_LEDGER_NAMES: dict[str, tuple[str, ...]] = {
    "PlutusV1": tables.LEDGER_NAMES_PLUTUSV1,
    "PlutusV2": tables.LEDGER_NAMES_PLUTUSV2,
    "PlutusV3": tables.LEDGER_NAMES_PLUTUSV3,
}
# Fewest entries a usable list has: protocol 10's, which the evaluator needs in full.
_MIN_LENGTH: dict[str, int] = {
    "PlutusV1": len(tables.PV10_PLUTUSV1),
    "PlutusV2": len(tables.PV10_PLUTUSV2),
    "PlutusV3": len(tables.PV10_PLUTUSV3),
}
# Builtins protocol 11 adds (flat tags 87-100) that uplc 1.3.3 cannot evaluate.
UNSUPPORTED_BUILTINS: dict[int, str] = {
    87: "expModInteger",
    88: "dropList",
    89: "lengthOfArray",
    90: "listToArray",
    91: "indexArray",
    92: "bls12_381_G1_multiScalarMul",
    93: "bls12_381_G2_multiScalarMul",
    94: "insertCoin",
    95: "lookupCoin",
    96: "unionValue",
    97: "valueContains",
    98: "valueData",
    99: "unValueData",
    100: "scaleValue",
}


class CostModelError(ValueError):
    """A cost model is unknown, too short or cannot drive the evaluator."""


def van_rossem_cost_models() -> dict[str, list[int]]:
    """Protocol 11's lists (332/332/350), as mainnet and preprod run them."""
    return {
        "PlutusV1": list(tables.VAN_ROSSEM_PLUTUSV1),
        "PlutusV2": list(tables.VAN_ROSSEM_PLUTUSV2),
        "PlutusV3": list(tables.VAN_ROSSEM_PLUTUSV3),
    }


def pv10_cost_models() -> dict[str, list[int]]:
    """Protocol 10's lists (166/175/297)."""
    return {
        "PlutusV1": [v for _, v in tables.PV10_PLUTUSV1],
        "PlutusV2": [v for _, v in tables.PV10_PLUTUSV2],
        "PlutusV3": [v for _, v in tables.PV10_PLUTUSV3],
    }


def default_cost_models() -> dict[str, list[int]]:
    """The default profile's lists (today's mainnet: protocol 11)."""
    return van_rossem_cost_models()


def plutus_v3_cost_model() -> list[int]:
    return default_cost_models()["PlutusV3"]


def cost_model_names(language: str, count: int | None = None) -> list[str]:
    """Names of the first `count` parameters of `language` (all known ones by default)."""
    if language not in _LEDGER_NAMES:
        raise CostModelError(f"unknown Plutus language {language!r}; expected one of {LANGUAGES}")
    names = _LEDGER_NAMES[language]
    return list(names if count is None else names[:count])


def named_cost_model(language: str, values: Sequence[int]) -> dict[str, int]:
    """`values` keyed by parameter name, in ledger order (the shape Blockfrost returns).

    Parameters beyond the known names are dropped, as the ledger's evaluator ignores them.
    """
    names = cost_model_names(language)
    _check_length(language, values, _MIN_LENGTH[language])
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
    params = _StrictParams(_evaluator_names(language, named_cost_model(language, values)), language)
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
    unused = {p for p in set(params) - params.used if p.split("-")[0] not in _UNSUPPORTED_NAMES}
    if unused:
        raise CostModelError(f"{language} parameters the evaluator does not use: {sorted(unused)}")
    return EvaluatorCostModels(language, builtin, machine)


_UNSUPPORTED_NAMES = frozenset(UNSUPPORTED_BUILTINS.values())
_V3_DIVISIONS = ("divideInteger", "modInteger", "quotientInteger", "remainderInteger")


def _evaluator_names(language: str, named: Mapping[str, int]) -> dict[str, int]:
    """Ledger names respelled as uplc's updater reads them (values untouched).

    uplc names builtins after its `BuiltInFun` members (`bls12_381_G1_Add` for the ledger's
    `bls12_381_G1_add`) and reads V3's quadratic division model without the ledger's
    `-model-arguments` segment.
    """
    spelling = {name.lower(): name for name in _UPLC_BUILTIN_NAMES}
    out: dict[str, int] = {}
    for name, value in named.items():
        builtin, _, rest = name.partition("-")
        builtin = spelling.get(builtin.lower(), builtin)
        if language == "PlutusV3" and builtin in _V3_DIVISIONS:
            rest = rest.replace("cpu-arguments-model-arguments-", "cpu-arguments-")
        out[f"{builtin}-{rest}"] = value
    return out


_UPLC_BUILTIN_NAMES = tuple(f"{f.name[:1].lower()}{f.name[1:]}" for f in BuiltInFun)


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
