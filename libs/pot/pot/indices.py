"""The data indices of one segment, as bytes that are both the file and what is hashed.

magic b"proofnet-indices/v1\\n", then per step: u64 step, u32 count, count x i64
(all little-endian)
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import numpy as np

from pot.manifest import INDICES_MAGIC, ProofError


class SegmentIndices:
    """Accumulates one segment's indices, hashing as it goes."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = [INDICES_MAGIC]
        self._hash = hashlib.sha256(INDICES_MAGIC)

    def add(self, step: int, indices: np.ndarray) -> None:
        array = np.ascontiguousarray(indices, dtype="<i8").ravel()
        header = struct.pack("<QI", step, array.size)
        data = array.tobytes()
        self._hash.update(header)
        self._hash.update(data)
        self._chunks.append(header)
        self._chunks.append(data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()

    def write(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.writelines(self._chunks)
        tmp.replace(path)


def read_segment_indices(path: Path) -> tuple[list[tuple[int, np.ndarray]], str]:
    """Parse an indices file: ([(step, indices), ...], SHA-256 of the file)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ProofError(f"cannot read {path}: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if not data.startswith(INDICES_MAGIC):
        raise ProofError(f"{path}: not a proofnet indices file")
    pos = len(INDICES_MAGIC)
    steps: list[tuple[int, np.ndarray]] = []
    while pos < len(data):
        if pos + 12 > len(data):
            raise ProofError(f"{path}: truncated step header")
        step, count = struct.unpack_from("<QI", data, pos)
        pos += 12
        end = pos + 8 * count
        if end > len(data):
            raise ProofError(f"{path}: truncated indices for step {step}")
        steps.append((step, np.frombuffer(data, dtype="<i8", count=count, offset=pos).copy()))
        pos = end
    return steps, digest
