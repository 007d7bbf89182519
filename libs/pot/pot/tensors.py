"""Canonical byte serialisation of named arrays, and distances between sets of them.

The serialisation is both the checkpoint file format and what is hashed, so a verifier
checks a checkpoint file against its commitment with one SHA-256 over the file, without
parsing it first. Layout (all integers little-endian):

    magic  b"proofnet-tensors/v1\\n"
    u32    number of arrays
    per array, sorted by name (UTF-8 bytes):
      u16 name length, name (UTF-8)
      u8  dtype length, dtype (numpy `dtype.str`, little-endian, e.g. "<f4", "|u1")
      u8  ndim, then ndim x u64 shape
      u64 byte length, then the C-order bytes

Standard library + numpy only: this runs inside job containers.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import BinaryIO

import numpy as np

MAGIC = b"proofnet-tensors/v1\n"
_ALLOWED_KINDS = "fiub"
# Refuse absurd headers before allocating anything.
_MAX_ARRAYS = 1_000_000
_MAX_NDIM = 32


class TensorFormatError(ValueError):
    """Arrays cannot be serialised, or a file is not a valid tensor bundle."""


def _normalise(name: str, array: np.ndarray) -> np.ndarray:
    if isinstance(array, np.generic):  # numpy scalars are 0-d arrays for our purposes
        array = np.asarray(array)
    if not isinstance(array, np.ndarray):
        raise TensorFormatError(f"{name}: expected a numpy array, got {type(array).__name__}")
    if array.dtype.kind not in _ALLOWED_KINDS:
        raise TensorFormatError(f"{name}: dtype {array.dtype} is not int, uint, float or bool")
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    # Not np.ascontiguousarray: it turns 0-d arrays into 1-d ones, changing the shape.
    return array if array.flags.c_contiguous else array.copy(order="C")


def check_arrays(arrays: Mapping[str, np.ndarray]) -> None:
    """Raise now what serialising later would (names, types, dtypes)."""
    _ordered(
        {
            name: np.empty(0, a.dtype) if isinstance(a, np.ndarray) else a
            for name, a in arrays.items()
        }
    )


def _ordered(arrays: Mapping[str, np.ndarray]) -> list[tuple[bytes, np.ndarray]]:
    items = []
    for name, array in arrays.items():
        if not isinstance(name, str) or not name:
            raise TensorFormatError(f"array names must be non-empty strings, got {name!r}")
        raw = name.encode("utf-8")
        if len(raw) > 0xFFFF:
            raise TensorFormatError(f"array name too long: {name[:40]}...")
        items.append((raw, _normalise(name, array)))
    items.sort(key=lambda item: item[0])
    return items


def _chunks(arrays: Mapping[str, np.ndarray]) -> list[bytes | memoryview]:
    items = _ordered(arrays)
    out: list[bytes | memoryview] = [MAGIC, struct.pack("<I", len(items))]
    for raw_name, array in items:
        dtype = array.dtype.str.encode("ascii")
        out.append(
            struct.pack("<H", len(raw_name))
            + raw_name
            + struct.pack("<B", len(dtype))
            + dtype
            + struct.pack("<B", array.ndim)
            + struct.pack(f"<{array.ndim}Q", *array.shape)
            + struct.pack("<Q", array.nbytes)
        )
        out.append(array.reshape(-1).view(np.uint8).data if array.nbytes else b"")
    return out


def tensors_hash(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA-256 (hex) of the canonical serialisation, without writing anything."""
    h = hashlib.sha256()
    for chunk in _chunks(arrays):
        h.update(chunk)
    return h.hexdigest()


def write_tensors(path: Path, arrays: Mapping[str, np.ndarray]) -> str:
    """Write the canonical serialisation to `path`; return its SHA-256 (hex)."""
    h = hashlib.sha256()
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        for chunk in _chunks(arrays):
            h.update(chunk)
            f.write(chunk)
    tmp.replace(path)  # a crash never leaves a half-written checkpoint under the real name
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read_exact(f: BinaryIO, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise TensorFormatError("tensor file is truncated")
    return data


def read_tensors(path: Path) -> tuple[dict[str, np.ndarray], str]:
    """Parse a tensor bundle; return (arrays by name, SHA-256 of the file)."""
    data = Path(path).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if not data.startswith(MAGIC):
        raise TensorFormatError(f"{path}: not a proofnet tensor file")
    view = memoryview(data)
    pos = len(MAGIC)

    def take(n: int) -> memoryview:
        nonlocal pos
        if pos + n > len(view):
            raise TensorFormatError(f"{path}: truncated")
        chunk = view[pos : pos + n]
        pos += n
        return chunk

    (count,) = struct.unpack("<I", take(4))
    if count > _MAX_ARRAYS:
        raise TensorFormatError(f"{path}: {count} arrays is more than allowed")
    arrays: dict[str, np.ndarray] = {}
    previous = b""
    for _ in range(count):
        (name_len,) = struct.unpack("<H", take(2))
        raw_name = bytes(take(name_len))
        if raw_name <= previous and arrays:
            raise TensorFormatError(f"{path}: array names not strictly sorted")
        previous = raw_name
        (dtype_len,) = struct.unpack("<B", take(1))
        dtype_str = bytes(take(dtype_len)).decode("ascii", "replace")
        try:
            dtype = np.dtype(dtype_str)
        except TypeError as exc:
            raise TensorFormatError(f"{path}: bad dtype {dtype_str!r}") from exc
        if dtype.kind not in _ALLOWED_KINDS or dtype.byteorder == ">" or dtype.str != dtype_str:
            raise TensorFormatError(f"{path}: dtype {dtype_str!r} not allowed")
        (ndim,) = struct.unpack("<B", take(1))
        if ndim > _MAX_NDIM:
            raise TensorFormatError(f"{path}: {ndim} dimensions is more than allowed")
        shape = struct.unpack(f"<{ndim}Q", take(8 * ndim))
        (nbytes,) = struct.unpack("<Q", take(8))
        if nbytes != math.prod(shape) * dtype.itemsize:
            raise TensorFormatError(f"{path}: byte length does not match shape and dtype")
        array = np.frombuffer(take(nbytes), dtype=dtype).reshape(shape).copy()
        arrays[raw_name.decode("utf-8")] = array
    if pos != len(view):
        raise TensorFormatError(f"{path}: trailing bytes after the last array")
    return arrays, digest


def l2_norm_of_difference(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> float:
    """||a - b||_2 over all arrays taken together, in float64."""
    if a.keys() != b.keys():
        raise TensorFormatError(f"array names differ: {sorted(a.keys() ^ b.keys())[:5]}")
    total = 0.0
    for name in sorted(a):
        x, y = a[name], b[name]
        if x.shape != y.shape:
            raise TensorFormatError(f"{name}: shape {x.shape} != {y.shape}")
        d = np.subtract(x, y, dtype=np.float64).ravel()
        # einsum, not np.dot: dot goes to a multithreaded BLAS that competes with the job's
        # own threads; einsum's single-threaded loop is several times faster at this size.
        total += float(np.einsum("i,i->", d, d))
    return math.sqrt(total)


def l2_norm(a: Mapping[str, np.ndarray]) -> float:
    total = 0.0
    for name in sorted(a):
        x = a[name].astype(np.float64, copy=False).ravel()
        total += float(np.einsum("i,i->", x, x))
    return math.sqrt(total)


def relative_distance(
    replayed: Mapping[str, np.ndarray], committed: Mapping[str, np.ndarray]
) -> float:
    """||replayed - committed|| / ||committed|| over the floating-point arrays: the
    Proof-of-Learning comparison. Integer and boolean arrays (step counters, the states of
    random generators) must match exactly, else the distance is infinite: folded into the
    norm, a large integer state would make any change of the weights look negligible."""
    if replayed.keys() != committed.keys():
        raise TensorFormatError(
            f"array names differ: {sorted(replayed.keys() ^ committed.keys())[:5]}"
        )
    floats = [n for n in committed if committed[n].dtype.kind == "f"]
    for name in committed:
        if name not in floats and not np.array_equal(replayed[name], committed[name]):
            return math.inf
    diff = l2_norm_of_difference(
        {n: replayed[n] for n in floats}, {n: committed[n] for n in floats}
    )
    if diff == 0.0:
        return 0.0
    norm = l2_norm({n: committed[n] for n in floats})
    return diff / norm if norm > 0.0 else math.inf


def decimal_string(value: float) -> str:
    """A float as a plain decimal string: the shortest round-trip digits, no exponent.

    Non-finite values (a diverged loss) become "NaN", "Infinity" or "-Infinity", so an honest
    job whose training blew up can still be proven.
    """
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    text = format(Decimal(repr(value)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def parse_decimal(text: str) -> Decimal:
    """Inverse of `decimal_string` for comparisons (NaN sorts as the largest)."""
    if text == "NaN":
        return Decimal("Infinity")
    return Decimal(text)
