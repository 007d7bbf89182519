"""The CBOR reader keeps order, duplicates and byte spans, and finds item ends exactly."""

from __future__ import annotations

from typing import Any

import cbor2
import pytest

from chain.devnet.cbor_items import (
    CborMap,
    CborTag,
    TxDecodeError,
    cbor_array_entries,
    cbor_array_spans,
    cbor_item_end,
    cbor_loads,
    cbor_map_entries,
)

# An indefinite-length map holding an indefinite byte string and an indefinite array.
_INDEFINITE = bytes.fromhex("bf" + "01" + "5f42aabb41ccff" + "02" + "9f0102ff" + "ff")


@pytest.mark.parametrize(
    "item",
    [0, 23, 24, 2**64 - 1, -(2**64), 2**70, b"", b"x" * 300, "text", 1.5, True, None,
     [1, [2, [3]]], {1: {2: b"a"}}, cbor2.CBORTag(24, b"\x01"), cbor2.CBORTag(258, [1, 2])],
)  # fmt: skip
def test_item_end_is_the_encoded_length(item: Any) -> None:
    encoded = cbor2.dumps(item)
    assert cbor_item_end(encoded + b"\x00trailing", 0) == len(encoded)


def test_indefinite_lengths_are_read_and_skipped() -> None:
    assert cbor_item_end(_INDEFINITE + b"\x01", 0) == len(_INDEFINITE)
    assert cbor_loads(_INDEFINITE) == CborMap(((1, b"\xaa\xbb\xcc"), (2, [1, 2])))


def test_map_entries_keep_order_duplicates_and_value_spans() -> None:
    data = bytes.fromhex("a3") + cbor2.dumps(2) + cbor2.dumps([1, 2])
    data += cbor2.dumps(1) + cbor2.dumps(b"a") + cbor2.dumps(2) + cbor2.dumps(None)
    entries, end = cbor_map_entries(data, 0)
    assert end == len(data)
    assert [(k, v) for k, v, _, _ in entries] == [(2, [1, 2]), (1, b"a"), (2, None)]
    assert [data[s:e] for _, _, s, e in entries] == [
        cbor2.dumps([1, 2]),
        cbor2.dumps(b"a"),
        cbor2.dumps(None),
    ]
    assert cbor_loads(data).get(2) == [1, 2]  # the first of duplicate keys, as read


def test_array_entries_read_through_the_set_tag() -> None:
    tagged = cbor2.dumps(cbor2.CBORTag(258, [b"a", [1]]))
    entries, end = cbor_array_entries(tagged, 0)
    assert end == len(tagged)
    assert [(item, tagged[s:e]) for item, s, e in entries] == [
        (b"a", cbor2.dumps(b"a")),
        ([1], cbor2.dumps([1])),
    ]
    assert cbor_loads(tagged) == [b"a", [1]]
    assert cbor_loads(cbor2.dumps(cbor2.CBORTag(24, b"\x01"))) == CborTag(24, b"\x01")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (bytes.fromhex("82 01"), "truncated"),
        (bytes.fromhex("5a 00000010 00"), "truncated"),
        (bytes.fromhex("a1 01"), "truncated"),
        (bytes.fromhex("1f"), "indefinite length not allowed"),
    ],
)
def test_bad_cbor_is_a_clear_error(data: bytes, reason: str) -> None:
    with pytest.raises(TxDecodeError, match=reason):
        cbor_item_end(data, 0)
    with pytest.raises(TxDecodeError):
        cbor_loads(data)


def test_array_spans_refuse_trailing_bytes() -> None:
    assert cbor_array_spans(cbor2.dumps([1, b"ab"])) == [(1, 2), (2, 5)]
    with pytest.raises(TxDecodeError, match="1 trailing bytes"):
        cbor_array_spans(cbor2.dumps([1]) + b"\x00")
    with pytest.raises(TxDecodeError, match="expected a CBOR array"):
        cbor_array_spans(cbor2.dumps({}))
    with pytest.raises(TxDecodeError, match="expected a CBOR map"):
        cbor_map_entries(cbor2.dumps([1]), 0)
