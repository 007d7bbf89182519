"""A CBOR reader that keeps what the ledger needs and general decoders drop.

Map entries stay in encoded order with duplicates kept (`CborMap`), and the entry helpers
return each item's byte span, so callers can hash and measure the bytes as submitted (the
tx id, the script-data hash and min-ADA are all over original bytes, and re-encoding can
change them: set tags, definite vs indefinite lengths, key order).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any


class TxDecodeError(ValueError):
    """The bytes are not a well-formed (Conway) transaction or component."""


@dataclass(frozen=True)
class CborMap:
    """A CBOR map with its entries in encoded order (duplicates kept)."""

    pairs: tuple[tuple[Any, Any], ...]

    def get(self, key: Any, default: Any = None) -> Any:
        for k, v in self.pairs:
            if k == key:
                return v
        return default

    def keys(self) -> list[Any]:
        return [k for k, _ in self.pairs]


@dataclass(frozen=True)
class CborTag:
    tag: int
    value: Any


@dataclass(frozen=True)
class CborSimple:
    value: int


# The set tag (258) is an encoding choice of Conway; the ledger reads the same set either way.
_SET_TAG = 258


def cbor_loads(data: bytes) -> Any:
    """Decode one complete CBOR item (trailing bytes are an error)."""
    item, end = cbor_decode_item(data, 0)
    if end != len(data):
        raise TxDecodeError(f"{len(data) - end} trailing bytes after CBOR item")
    return item


def cbor_decode_item(data: bytes, pos: int) -> tuple[Any, int]:
    """Decode the CBOR item starting at `pos`; returns it and the offset just after it."""
    try:
        return _decode(data, pos)
    except IndexError:
        raise TxDecodeError("truncated CBOR") from None
    except RecursionError:
        raise TxDecodeError("CBOR nested too deeply") from None


def cbor_array_spans(data: bytes) -> list[tuple[int, int]]:
    """Byte spans of the elements of the top-level CBOR array in `data`."""
    if not data:
        raise TxDecodeError("empty CBOR")
    major, info = data[0] >> 5, data[0] & 0x1F
    if major != 4:
        raise TxDecodeError("expected a CBOR array")
    spans: list[tuple[int, int]] = []
    if info == 31:
        pos = 1
        while True:
            if pos >= len(data):
                raise TxDecodeError("truncated CBOR")
            if data[pos] == 0xFF:
                pos += 1
                break
            end = cbor_item_end(data, pos)
            spans.append((pos, end))
            pos = end
    else:
        count, pos = _read_arg(data, 0, info)
        for _ in range(count):
            end = cbor_item_end(data, pos)
            spans.append((pos, end))
            pos = end
    if pos != len(data):
        raise TxDecodeError(f"{len(data) - pos} trailing bytes after CBOR array")
    return spans


def _read_arg(data: bytes, pos: int, info: int) -> tuple[int, int]:
    if info < 24:
        return info, pos + 1
    if info == 24:
        return data[pos + 1], pos + 2
    if info == 25:
        return int.from_bytes(data[pos + 1 : pos + 3], "big"), pos + 3
    if info == 26:
        return int.from_bytes(data[pos + 1 : pos + 5], "big"), pos + 5
    if info == 27:
        if pos + 9 > len(data):
            raise IndexError
        return int.from_bytes(data[pos + 1 : pos + 9], "big"), pos + 9
    raise TxDecodeError(f"invalid CBOR additional info {info}")


def _decode(data: bytes, pos: int) -> tuple[Any, int]:
    initial = data[pos]
    major, info = initial >> 5, initial & 0x1F
    if major == 7:
        return _decode_simple(data, pos, info)
    if info == 31:
        return _decode_indefinite(data, pos, major)
    arg, pos = _read_arg(data, pos, info)
    if major == 0:
        return arg, pos
    if major == 1:
        return -1 - arg, pos
    if major in (2, 3):
        end = pos + arg
        if end > len(data):
            raise IndexError
        chunk = data[pos:end]
        return (bytes(chunk) if major == 2 else chunk.decode("utf-8")), end
    if major == 4:
        items = []
        for _ in range(arg):
            item, pos = _decode(data, pos)
            items.append(item)
        return items, pos
    if major == 5:
        pairs = []
        for _ in range(arg):
            key, pos = _decode(data, pos)
            value, pos = _decode(data, pos)
            pairs.append((_hashable(key), value))
        return CborMap(tuple(pairs)), pos
    # major 6: tag
    value, pos = _decode(data, pos)
    if arg in (2, 3):
        if not isinstance(value, bytes):
            raise TxDecodeError("bignum tag must wrap a byte string")
        n = int.from_bytes(value, "big")
        return (n if arg == 2 else -1 - n), pos
    if arg == _SET_TAG:
        if not isinstance(value, list):
            raise TxDecodeError("set tag must wrap an array")
        return value, pos
    return CborTag(arg, value), pos


def _decode_indefinite(data: bytes, pos: int, major: int) -> tuple[Any, int]:
    pos += 1
    if major in (2, 3):
        chunks: list[Any] = []
        while data[pos] != 0xFF:
            if data[pos] >> 5 != major or data[pos] & 0x1F == 31:
                raise TxDecodeError("bad chunk in indefinite-length string")
            chunk, pos = _decode(data, pos)
            chunks.append(chunk)
        return (b"".join(chunks) if major == 2 else "".join(chunks)), pos + 1
    if major == 4:
        items = []
        while data[pos] != 0xFF:
            item, pos = _decode(data, pos)
            items.append(item)
        return items, pos + 1
    if major == 5:
        pairs = []
        while data[pos] != 0xFF:
            key, pos = _decode(data, pos)
            value, pos = _decode(data, pos)
            pairs.append((_hashable(key), value))
        return CborMap(tuple(pairs)), pos + 1
    raise TxDecodeError(f"indefinite length not allowed for major type {major}")


def _decode_simple(data: bytes, pos: int, info: int) -> tuple[Any, int]:
    if info == 20:
        return False, pos + 1
    if info == 21:
        return True, pos + 1
    if info in (22, 23):
        return None, pos + 1
    if info == 24:
        return CborSimple(data[pos + 1]), pos + 2
    if info == 25:
        return struct.unpack(">e", data[pos + 1 : pos + 3])[0], pos + 3
    if info == 26:
        return struct.unpack(">f", data[pos + 1 : pos + 5])[0], pos + 5
    if info == 27:
        return struct.unpack(">d", data[pos + 1 : pos + 9])[0], pos + 9
    if info < 20:
        return CborSimple(info), pos + 1
    raise TxDecodeError(f"unexpected CBOR simple value {info}")


def _hashable(key: Any) -> Any:
    if isinstance(key, list):
        return tuple(_hashable(k) for k in key)
    return key


def cbor_array_entries(data: bytes, pos: int) -> tuple[list[tuple[Any, int, int]], int]:
    """(item, start, end) of each element of the array at `pos` (a set tag in front is
    read through), decoded once; and the offset just after the array."""
    try:
        if data[pos : pos + 3] == b"\xd9\x01\x02":
            pos += 3
        major, info = data[pos] >> 5, data[pos] & 0x1F
        if major != 4:
            raise TxDecodeError("expected a CBOR array")
        entries: list[tuple[Any, int, int]] = []
        if info == 31:
            pos += 1
            while data[pos] != 0xFF:
                item, end = _decode(data, pos)
                entries.append((item, pos, end))
                pos = end
            return entries, pos + 1
        count, pos = _read_arg(data, pos, info)
        for _ in range(count):
            item, end = _decode(data, pos)
            entries.append((item, pos, end))
            pos = end
        return entries, pos
    except IndexError:
        raise TxDecodeError("truncated CBOR") from None
    except RecursionError:
        raise TxDecodeError("CBOR nested too deeply") from None


def cbor_map_entries(data: bytes, pos: int) -> tuple[list[tuple[Any, Any, int, int]], int]:
    """(key, value, value start, value end) of each entry of the map at `pos` in encoded
    order, decoded once; and the offset just after the map."""
    try:
        major, info = data[pos] >> 5, data[pos] & 0x1F
        if major != 5:
            raise TxDecodeError("expected a CBOR map")
        entries: list[tuple[Any, Any, int, int]] = []
        if info == 31:
            pos += 1
            while data[pos] != 0xFF:
                key, pos = _decode(data, pos)
                value, end = _decode(data, pos)
                entries.append((_hashable(key), value, pos, end))
                pos = end
            return entries, pos + 1
        count, pos = _read_arg(data, pos, info)
        for _ in range(count):
            key, pos = _decode(data, pos)
            value, end = _decode(data, pos)
            entries.append((_hashable(key), value, pos, end))
            pos = end
        return entries, pos
    except IndexError:
        raise TxDecodeError("truncated CBOR") from None
    except RecursionError:
        raise TxDecodeError("CBOR nested too deeply") from None


def cbor_item_end(data: bytes, pos: int) -> int:
    """Offset just after the CBOR item at `pos`, found without building it (callers decode
    the item later, which is where its contents are checked)."""
    try:
        return _skip(data, pos)
    except IndexError:
        raise TxDecodeError("truncated CBOR") from None
    except RecursionError:
        raise TxDecodeError("CBOR nested too deeply") from None


def _skip(data: bytes, pos: int) -> int:
    initial = data[pos]
    major, info = initial >> 5, initial & 0x1F
    if info == 31:
        if major in (0, 1, 6, 7):
            raise TxDecodeError(f"indefinite length not allowed for major type {major}")
        pos += 1
        while data[pos] != 0xFF:
            pos = _skip(data, pos)
        return pos + 1
    if major == 7:
        if info < 24:
            return pos + 1
        if info > 27:
            raise TxDecodeError(f"unexpected CBOR simple value {info}")
        end = pos + 1 + (1 << (info - 24))
        if end > len(data):
            raise IndexError
        return end
    arg, pos = _read_arg(data, pos, info)
    if major in (0, 1):
        return pos
    if major in (2, 3):
        if pos + arg > len(data):
            raise IndexError
        return pos + arg
    if major == 6:
        return _skip(data, pos)
    for _ in range(arg if major == 4 else 2 * arg):
        pos = _skip(data, pos)
    return pos
