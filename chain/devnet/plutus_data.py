"""Plutus data as uplc's AST: from raw CBOR items, to and from CBOR bytes and detailed JSON.

The detailed JSON schema is the one `cardano-cli` uses (`{"constructor": n, "fields": []}`,
`{"int": n}`, `{"bytes": "hex"}`, `{"list": []}`, `{"map": [{"k": .., "v": ..}]}`).
uplc keeps map entries in a dict, so a data map with duplicate keys keeps its last entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from uplc.ast import (
    PlutusByteString,
    PlutusConstr,
    PlutusData,
    PlutusInteger,
    PlutusList,
    PlutusMap,
    plutus_cbor_dumps,
)

from chain.devnet.cbor_items import CborMap, CborTag, TxDecodeError, cbor_loads

__all__ = [
    "PlutusData",
    "PlutusDataError",
    "bytestring",
    "constr",
    "data_from_cbor",
    "data_from_json",
    "data_from_raw",
    "data_to_cbor",
    "data_to_json",
    "integer",
    "just",
    "nothing",
    "plist",
    "pmap",
    "unit",
    "boolean",
]


class PlutusDataError(ValueError):
    """Bytes or JSON that are not Plutus data."""


def constr(tag: int, *fields: PlutusData) -> PlutusConstr:
    return PlutusConstr(tag, list(fields))


def integer(n: int) -> PlutusInteger:
    return PlutusInteger(n)


def bytestring(b: bytes) -> PlutusByteString:
    return PlutusByteString(bytes(b))


def plist(items: Iterable[PlutusData]) -> PlutusList:
    return PlutusList(list(items))


def pmap(pairs: Iterable[tuple[PlutusData, PlutusData]]) -> PlutusMap:
    return PlutusMap(dict(pairs))


def just(x: PlutusData) -> PlutusConstr:
    return PlutusConstr(0, [x])


def nothing() -> PlutusConstr:
    return PlutusConstr(1, [])


def unit() -> PlutusConstr:
    return PlutusConstr(0, [])


def boolean(b: bool) -> PlutusConstr:
    return PlutusConstr(1 if b else 0, [])


def data_from_raw(item: Any) -> PlutusData:
    """Convert a raw CBOR item (from `cbor_items.cbor_loads`) to Plutus data."""
    if isinstance(item, bool) or item is None:
        raise PlutusDataError(f"{item!r} is not Plutus data")
    if isinstance(item, int):
        return PlutusInteger(item)
    if isinstance(item, bytes):
        return PlutusByteString(item)
    if isinstance(item, list | tuple):
        return PlutusList([data_from_raw(i) for i in item])
    if isinstance(item, CborMap):
        return PlutusMap({data_from_raw(k): data_from_raw(v) for k, v in item.pairs})
    if isinstance(item, CborTag):
        if 121 <= item.tag <= 127:
            return PlutusConstr(item.tag - 121, _fields(item.value))
        if 1280 <= item.tag <= 1400:
            return PlutusConstr(item.tag - 1280 + 7, _fields(item.value))
        if item.tag == 102:
            value = item.value
            if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], int)):
                raise PlutusDataError("tag 102 must hold [constructor, fields]")
            if value[0] < 0 or value[0] >= 2**64:
                raise PlutusDataError("constructor index out of range")
            return PlutusConstr(value[0], _fields(value[1]))
        raise PlutusDataError(f"CBOR tag {item.tag} is not Plutus data")
    raise PlutusDataError(f"{type(item).__name__} is not Plutus data")


def _fields(value: Any) -> list[PlutusData]:
    if not isinstance(value, list):
        raise PlutusDataError("constructor fields must be an array")
    return [data_from_raw(v) for v in value]


def data_from_cbor(data: bytes) -> PlutusData:
    try:
        return data_from_raw(cbor_loads(data))
    except TxDecodeError as err:
        raise PlutusDataError(f"invalid CBOR: {err}") from err


def data_to_cbor(data: PlutusData) -> bytes:
    return bytes(plutus_cbor_dumps(data))


def data_from_json(obj: Any) -> PlutusData:
    """Parse the detailed JSON schema strictly (the path of a bad node is in the error)."""
    return _from_json(obj, "$")


def _from_json(obj: Any, path: str) -> PlutusData:
    if not isinstance(obj, dict):
        raise PlutusDataError(f"{path}: expected an object, got {type(obj).__name__}")
    keys = set(obj)
    if keys == {"constructor", "fields"}:
        tag, fields = obj["constructor"], obj["fields"]
        if not isinstance(tag, int) or isinstance(tag, bool) or tag < 0:
            raise PlutusDataError(f"{path}.constructor: expected a natural number")
        if not isinstance(fields, list):
            raise PlutusDataError(f"{path}.fields: expected a list")
        return PlutusConstr(
            tag, [_from_json(f, f"{path}.fields[{i}]") for i, f in enumerate(fields)]
        )
    if keys == {"int"}:
        if not isinstance(obj["int"], int) or isinstance(obj["int"], bool):
            raise PlutusDataError(f"{path}.int: expected an integer")
        return PlutusInteger(obj["int"])
    if keys == {"bytes"}:
        try:
            return PlutusByteString(bytes.fromhex(obj["bytes"]))
        except (TypeError, ValueError) as err:
            raise PlutusDataError(f"{path}.bytes: expected hex") from err
    if keys == {"list"}:
        if not isinstance(obj["list"], list):
            raise PlutusDataError(f"{path}.list: expected a list")
        return PlutusList([_from_json(x, f"{path}.list[{i}]") for i, x in enumerate(obj["list"])])
    if keys == {"map"}:
        entries = obj["map"]
        if not isinstance(entries, list):
            raise PlutusDataError(f"{path}.map: expected a list")
        pairs = {}
        for i, entry in enumerate(entries):
            if not (isinstance(entry, dict) and set(entry) == {"k", "v"}):
                raise PlutusDataError(f"{path}.map[{i}]: expected {{'k': .., 'v': ..}}")
            pairs[_from_json(entry["k"], f"{path}.map[{i}].k")] = _from_json(
                entry["v"], f"{path}.map[{i}].v"
            )
        return PlutusMap(pairs)
    raise PlutusDataError(f"{path}: unknown Plutus data JSON with keys {sorted(keys)}")


def data_to_json(data: PlutusData) -> dict[str, Any]:
    return data.to_json()  # type: ignore[no-any-return]


def first_difference(expected: PlutusData, actual: PlutusData, path: str = "") -> str | None:
    """Path of the first node where `actual` differs from `expected` (None if equal).

    Map entries are compared in order: the ledger's map order is part of what a script sees.
    Paths read like `fields[0].fields[3].map[1].v`.
    """
    if type(expected) is not type(actual):
        return path or "$"
    if isinstance(expected, PlutusConstr):
        assert isinstance(actual, PlutusConstr)
        if expected.constructor != actual.constructor:
            return _join(path, "constructor")
        return _seq_difference(expected.fields, actual.fields, path, "fields")
    if isinstance(expected, PlutusList):
        assert isinstance(actual, PlutusList)
        return _seq_difference(expected.value, actual.value, path, "list")
    if isinstance(expected, PlutusMap):
        assert isinstance(actual, PlutusMap)
        exp_items = list(expected.value.items())
        act_items = list(actual.value.items())
        for i, ((ek, ev), (ak, av)) in enumerate(zip(exp_items, act_items, strict=False)):
            diff = first_difference(ek, ak, _join(path, f"map[{i}].k"))
            if diff is None:
                diff = first_difference(ev, av, _join(path, f"map[{i}].v"))
            if diff is not None:
                return diff
        if len(exp_items) != len(act_items):
            return _join(path, f"map[{min(len(exp_items), len(act_items))}]")
        return None
    if expected.value != actual.value:  # type: ignore[attr-defined]
        return path or "$"
    return None


def _seq_difference(
    expected: Sequence[PlutusData], actual: Sequence[PlutusData], path: str, name: str
) -> str | None:
    for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
        diff = first_difference(e, a, _join(path, f"{name}[{i}]"))
        if diff is not None:
            return diff
    if len(expected) != len(actual):
        return _join(path, f"{name}[{min(len(expected), len(actual))}]")
    return None


def _join(path: str, part: str) -> str:
    return f"{path}.{part}" if path else part


def node_at(data: PlutusData, path: str) -> PlutusData | None:
    """The node at a path produced by `first_difference` (None when it does not exist)."""
    if path in ("", "$"):
        return data
    node: Any = data
    for part in path.split("."):
        if part == "constructor":
            return node
        name, _, rest = part.partition("[")
        index = int(rest.split("]")[0]) if rest else None
        suffix = rest.split("]")[1] if rest else ""
        try:
            if name == "fields":
                node = node.fields[index]
            elif name == "list":
                node = node.value[index]
            elif name == "map":
                k, v = list(node.value.items())[index]  # type: ignore[index]
                node = (k, v)
            elif name in ("k", "v"):
                node = node[0] if name == "k" else node[1]
            else:
                return None
        except (IndexError, AttributeError, TypeError):
            return None
        del suffix
    return node if isinstance(node, PlutusData) else None
