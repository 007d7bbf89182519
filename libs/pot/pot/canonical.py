"""Canonical JSON for everything that is hashed or signed (RFC 8785 restricted to integers).

Hashed documents only hold objects, arrays, strings, integers, booleans and null. RFC 8785
serialises numbers as IEEE doubles; by refusing floats altogether every number is an integer
written as plain decimal digits, which is what RFC 8785 produces for integers up to 2**53 and
the only sensible extension past it (token quantities reach 2**64 - 1). Keys are sorted by
their UTF-16 code units as RFC 8785 requires (it differs from code-point order only for
characters outside the Basic Multilingual Plane).

Standard library only: the proof-of-training recorder runs inside job containers. Where
orjson is installed, `parse_canonical_json` uses it to confirm bytes are canonical faster
(see `_canonical_fast`); without it the result is the same, only slower.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

try:  # optional: a faster encoder for the canonicality check of received bytes
    import orjson as _orjson
except ImportError:  # pragma: no cover - the job containers' recorder has no orjson
    _orjson = None  # type: ignore[assignment]

# Cardano quantities are at most unsigned 64-bit; negative metrics stay within int64.
MIN_INT = -(2**63)
MAX_INT = 2**64 - 1
# Bound recursion so a hostile document cannot exhaust the stack.
MAX_DEPTH = 32


class CanonicalJSONError(ValueError):
    """The value cannot be encoded (or the bytes are not) canonical JSON."""


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _check(value: Any, depth: int, path: str) -> Any:
    """Validate and normalise to plain dict/list so `json.dumps` can do the escaping."""
    if depth > MAX_DEPTH:
        raise CanonicalJSONError(f"{path}: nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not MIN_INT <= value <= MAX_INT:
            raise CanonicalJSONError(f"{path}: integer {value} outside [-2**63, 2**64-1]")
        return int(value)
    if isinstance(value, float):
        raise CanonicalJSONError(
            f"{path}: floats are not allowed in hashed data; use an integer or a decimal string"
        )
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in sorted(value, key=lambda k: _utf16_key(k) if isinstance(k, str) else b""):
            if not isinstance(key, str):
                raise CanonicalJSONError(f"{path}: object key {key!r} is not a string")
            out[key] = _check(value[key], depth + 1, f"{path}.{key}")
        return out
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [_check(v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value)]
    raise CanonicalJSONError(f"{path}: {type(value).__name__} is not a JSON value")


def canonical_json(value: Any) -> bytes:
    """Encode `value` as canonical JSON bytes (sorted keys, no whitespace, UTF-8)."""
    normalised = _check(value, 0, "$")
    # json.dumps keeps insertion order when sort_keys=False: _check already sorted by UTF-16.
    text = json.dumps(normalised, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates cannot be UTF-8
        raise CanonicalJSONError(f"string is not valid Unicode: {exc.reason}") from exc


def parse_canonical_json(data: bytes) -> Any:
    """Parse bytes and insist they are exactly the canonical encoding of what they hold.

    Rejecting non-canonical input (whitespace, duplicate keys, unsorted keys, floats, escapes
    written differently) means one document has one byte string, so its hash is its identity.
    """
    try:
        text = data.decode("utf-8")
        value = json.loads(text, parse_float=_reject_float, parse_constant=_reject_float)
    except CanonicalJSONError:
        raise
    except RecursionError as exc:  # nesting past the interpreter's stack: never canonical
        raise CanonicalJSONError(f"not JSON: nested deeper than {MAX_DEPTH} levels") from exc
    except ValueError as exc:  # malformed, or an integer of more digits than Python converts
        raise CanonicalJSONError(f"not JSON: {exc}") from exc
    if _canonical_fast(value, data):
        return value
    if canonical_json(value) != data:
        raise CanonicalJSONError("JSON is not in canonical form")
    return value


def _reject_float(token: str) -> Any:
    raise CanonicalJSONError(f"floats are not allowed in hashed data (found {token})")


def _canonical_fast(value: Any, data: bytes) -> bool:
    """True only if `canonical_json(value) == data`, decided without `canonical_json`'s
    Python-level walk; False means "not shown here" and the caller runs the full check.

    `value` is what `json.loads` made of `data` with floats refused: dicts with str keys,
    lists, str, int, bool, None. For such values, when `data` is ASCII and holds at most
    MAX_DEPTH containers, orjson's compact, key-sorted encoding is byte for byte
    `canonical_json`'s: the same escapes for every ASCII character (control characters as
    lowercase \\u00xx, the short forms for \\b \\t \\n \\f \\r " \\), non-ASCII characters
    written raw (so any would make the encoding differ from ASCII `data`), keys of ASCII text
    sorted alike by code point and by UTF-16 unit, and integers in plain decimal with
    orjson refusing exactly what canonical_json refuses (outside [-2**63, 2**64-1]); lone
    surrogates are refused by both. Counting brackets bounds the nesting depth.
    """
    if _orjson is None or not data.isascii():
        return False
    if data.count(b"{") + data.count(b"[") > MAX_DEPTH:
        return False
    try:
        encoded: bytes = _orjson.dumps(value, option=_orjson.OPT_SORT_KEYS)
    except _orjson.JSONEncodeError:
        return False
    return encoded == data
