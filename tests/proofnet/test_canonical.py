"""Canonical JSON: RFC 8785 output for integer-only documents, and strict parsing."""

from __future__ import annotations

import pytest

from proofnet.messages.canonical import CanonicalJSONError, canonical_json, parse_canonical_json


def test_sorted_keys_no_whitespace_utf8() -> None:
    assert (
        canonical_json({"b": 1, "a": [True, None, "é"]}) == '{"a":[true,null,"é"],"b":1}'.encode()
    )


def test_rfc8785_string_escapes() -> None:
    # RFC 8785 3.2.2.2: short escapes for \b \f \n \r \t, \u00xx (lowercase) for other controls,
    # everything else verbatim, including U+2028 and non-ASCII.
    assert canonical_json('\b\f\n\r\t\x01\x1f"\\/\u2028€') == (
        '"\\b\\f\\n\\r\\t\\u0001\\u001f\\"\\\\/\u2028€"'.encode()
    )


def test_keys_sorted_by_utf16_code_units() -> None:
    # U+1F600 is D83D DE00 in UTF-16, which sorts before U+E000; code-point order is reversed.
    doc = {"\ue000": 1, "\U0001f600": 2}
    assert canonical_json(doc) == '{"\U0001f600":2,"\ue000":1}'.encode()


def test_floats_and_huge_ints_refused() -> None:
    with pytest.raises(CanonicalJSONError, match="floats"):
        canonical_json({"x": 1.0})
    with pytest.raises(CanonicalJSONError, match="outside"):
        canonical_json(2**64)
    assert canonical_json(2**64 - 1) == b"18446744073709551615"
    with pytest.raises(CanonicalJSONError):
        canonical_json({1: "non-string key"})
    with pytest.raises(CanonicalJSONError):
        canonical_json(b"bytes")
    with pytest.raises(CanonicalJSONError, match="Unicode"):
        canonical_json("\ud800")


def test_parse_insists_on_canonical_form() -> None:
    assert parse_canonical_json(b'{"a":1,"b":[2]}') == {"a": 1, "b": [2]}
    for bad in (
        b'{"b":1,"a":2}',  # unsorted
        b'{"a": 1}',  # whitespace
        b'{"a":1,"a":1}',  # duplicate key
        b'{"a":1.5}',  # float
        b'{"a":"\\u0041"}',  # escape where none is needed
        b"\xff",  # not UTF-8
        b"{",  # not JSON
        b'{"a":NaN}',
    ):
        with pytest.raises(CanonicalJSONError):
            parse_canonical_json(bad)


def test_depth_is_bounded() -> None:
    doc: object = 1
    for _ in range(40):
        doc = [doc]
    with pytest.raises(CanonicalJSONError, match="deeper"):
        canonical_json(doc)
