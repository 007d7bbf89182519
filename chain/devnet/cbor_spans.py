"""Byte spans of CBOR items, so rules can hash and measure what was actually submitted.

Re-encoding a decoded transaction can change its bytes (set tags, definite vs indefinite
lengths, key order), and the ledger hashes and sizes the ORIGINAL bytes: the body for the
transaction id, the witness-set redeemers and datums for the script-data hash, each output
for min-ADA. These helpers find where an item starts and ends without decoding it.
"""

from __future__ import annotations


class CborSpanError(ValueError):
    """The bytes are not well-formed CBOR."""


_SET_TAG = 258


def head(data: bytes, pos: int) -> tuple[int, int, int]:
    """(major type, argument, position after the head); argument -1 means indefinite length."""
    try:
        initial = data[pos]
    except IndexError:
        raise CborSpanError(f"truncated CBOR at byte {pos}") from None
    major = initial >> 5
    info = initial & 0x1F
    pos += 1
    if info < 24:
        return major, info, pos
    if info == 31:
        if major in (0, 1, 6):
            raise CborSpanError(f"indefinite length not allowed for major type {major}")
        return major, -1, pos
    if info > 27:
        raise CborSpanError(f"reserved additional information {info} at byte {pos - 1}")
    width = 1 << (info - 24)
    if pos + width > len(data):
        raise CborSpanError(f"truncated CBOR at byte {pos}")
    return major, int.from_bytes(data[pos : pos + width], "big"), pos + width


def skip(data: bytes, pos: int) -> int:
    """Position just after the CBOR item that starts at `pos`."""
    major, arg, pos = head(data, pos)
    if major in (0, 1):
        return pos
    if major in (2, 3):
        if arg >= 0:
            end = pos + arg
            if end > len(data):
                raise CborSpanError(f"truncated string at byte {pos}")
            return end
        while True:
            if pos >= len(data):
                raise CborSpanError("unterminated indefinite string")
            if data[pos] == 0xFF:
                return pos + 1
            pos = skip(data, pos)
    if major in (4, 5):
        per_entry = 1 if major == 4 else 2
        if arg >= 0:
            for _ in range(arg * per_entry):
                pos = skip(data, pos)
            return pos
        while True:
            if pos >= len(data):
                raise CborSpanError("unterminated indefinite container")
            if data[pos] == 0xFF:
                return pos + 1
            pos = skip(data, pos)
    if major == 6:
        return skip(data, pos)
    # major 7: simple values and floats; the argument already covered their bytes
    return pos


def array_items(data: bytes, start: int, allow_set_tag: bool = False) -> list[tuple[int, int]]:
    """Spans of the items of the array at `start` (optionally wrapped in the set tag 258)."""
    major, arg, pos = head(data, start)
    if major == 6 and allow_set_tag:
        if arg != _SET_TAG:
            raise CborSpanError(f"expected tag 258 or an array, found tag {arg}")
        major, arg, pos = head(data, pos)
    if major != 4:
        raise CborSpanError(f"expected an array, found major type {major}")
    spans: list[tuple[int, int]] = []
    if arg >= 0:
        for _ in range(arg):
            end = skip(data, pos)
            spans.append((pos, end))
            pos = end
        return spans
    while True:
        if pos >= len(data):
            raise CborSpanError("unterminated indefinite array")
        if data[pos] == 0xFF:
            return spans
        end = skip(data, pos)
        spans.append((pos, end))
        pos = end


def map_entries(data: bytes, start: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(key span, value span) of each entry of the map at `start`, in encoded order."""
    major, arg, pos = head(data, start)
    if major != 5:
        raise CborSpanError(f"expected a map, found major type {major}")
    entries: list[tuple[tuple[int, int], tuple[int, int]]] = []
    count = 0
    while True:
        if arg >= 0:
            if count == arg:
                return entries
        else:
            if pos >= len(data):
                raise CborSpanError("unterminated indefinite map")
            if data[pos] == 0xFF:
                return entries
        key_end = skip(data, pos)
        value_end = skip(data, key_end)
        entries.append(((pos, key_end), (key_end, value_end)))
        pos = value_end
        count += 1


def uint_at(data: bytes, start: int) -> int:
    """The unsigned integer encoded at `start`."""
    major, arg, _ = head(data, start)
    if major != 0:
        raise CborSpanError(f"expected an unsigned integer, found major type {major}")
    return arg
