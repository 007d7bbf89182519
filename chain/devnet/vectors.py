"""Ledger conformance vectors: does our V3 ScriptContext equal the Haskell ledger's?

Format: `shared/fixtures/ledger/README.md`. Each vector's context is rebuilt from its raw
transaction and resolved inputs, then compared node by node (map entries in order).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chain.devnet.plutus_data import (
    PlutusData,
    PlutusDataError,
    data_from_json,
    first_difference,
    node_at,
)
from chain.devnet.plutus_tx import TxDecodeError, decode_tx, outputs_by_input
from chain.devnet.script_context import ContextBuilder, ScriptContextError, SlotConfig

# Vector tags use the Plutus purpose names; the devnet uses the ledger's redeemer tags.
_VECTOR_TAGS = {"spend": 0, "mint": 1, "publish": 2, "withdraw": 3, "vote": 4, "propose": 5}


@dataclass(frozen=True)
class VectorResult:
    """Outcome of one vector. When not ok, `path` names the first differing node
    (e.g. `fields[0].fields[3]`) and `expected`/`actual` show it as detailed JSON;
    a vector that cannot be evaluated at all has `error` set."""

    name: str
    ok: bool
    path: str | None = None
    expected: str | None = None
    actual: str | None = None
    error: str | None = None

    def describe(self) -> str:
        if self.ok:
            return f"{self.name}: ok"
        if self.error is not None:
            return f"{self.name}: error: {self.error}"
        return f"{self.name}: differs at {self.path}: expected {self.expected}, got {self.actual}"


def check_vector_file(path: str | Path) -> VectorResult:
    path = Path(path)
    try:
        vector = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        return VectorResult(path.stem, False, error=f"cannot read vector: {err}")
    return check_vector(vector, default_name=path.stem)


def check_vectors_dir(directory: str | Path) -> list[VectorResult]:
    """Check every `*.json` vector in `directory` (sorted by file name)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise NotADirectoryError(f"{directory} is not a directory")
    files = sorted(directory.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no *.json vectors in {directory}")
    return [check_vector_file(f) for f in files]


def check_vector(vector: Any, default_name: str = "vector") -> VectorResult:
    name = vector.get("name", default_name) if isinstance(vector, dict) else default_name
    try:
        return _check(vector, name)
    except (KeyError, TypeError, ValueError) as err:
        # TxDecodeError, PlutusDataError and ScriptContextError are ValueErrors.
        kind = type(err).__name__
        return VectorResult(name, False, error=f"{kind}: {err}")


def _check(vector: dict[str, Any], name: str) -> VectorResult:
    if vector.get("plutus_version") != "V3":
        raise ValueError(f"unsupported plutus_version {vector.get('plutus_version')!r}")
    slot = SlotConfig(**{k: int(v) for k, v in vector["slot_config"].items()})
    tx = decode_tx(bytes.fromhex(vector["transaction_cbor"]))
    resolved = outputs_by_input(
        bytes.fromhex(vector["resolved_inputs"]["inputs_cbor"]),
        bytes.fromhex(vector["resolved_inputs"]["outputs_cbor"]),
    )
    builder = ContextBuilder(tx, {k: out for k, (out, _) in resolved.items()}, slot)
    tag = _VECTOR_TAGS[vector["redeemer"]["tag"]]
    index = int(vector["redeemer"]["index"])

    redeemer = builder.redeemer(tag, index)
    own_redeemer = builder._data(redeemer.data, "redeemer")
    diff = _compare("redeemer.data", data_from_json(vector["redeemer"]["data"]), own_redeemer)
    if diff is not None:
        return _mismatch(name, *diff)
    if tag == 0:
        own_datum = builder.datum_for_spend(index)
        want = vector.get("datum")
        if (want is None) != (own_datum is None):
            return VectorResult(name, False, "datum", json.dumps(want), _json(own_datum))
        if want is not None and own_datum is not None:
            diff = _compare("datum", data_from_json(want), own_datum)
            if diff is not None:
                return _mismatch(name, *diff)

    actual = builder.script_context(tag, index)
    expected = data_from_json(vector["expected_script_context"])
    diff = _compare("", expected, actual)
    if diff is not None:
        return _mismatch(name, *diff)
    return VectorResult(name, True)


def _compare(
    prefix: str, expected: PlutusData, actual: PlutusData
) -> tuple[str, PlutusData | None, PlutusData | None] | None:
    path = first_difference(expected, actual)
    if path is None:
        return None
    full = path if not prefix else (prefix if path == "$" else f"{prefix}.{path}")
    return full, node_at(expected, path), node_at(actual, path)


def _mismatch(
    name: str, path: str, expected: PlutusData | None, actual: PlutusData | None
) -> VectorResult:
    return VectorResult(name, False, path, _json(expected), _json(actual))


def _json(node: PlutusData | None) -> str:
    if node is None:
        return "(absent)"
    return json.dumps(node.to_json())


__all__ = [
    "VectorResult",
    "check_vector",
    "check_vector_file",
    "check_vectors_dir",
    "PlutusDataError",
    "ScriptContextError",
    "TxDecodeError",
]
