"""The GPU challenge the API runs against each registered GPU, and its one exact check.

An interactive round in four signed worker requests (`api/routes/gpu_challenges.py`):

1. `POST /api/v1/worker/gpu-challenges` {gpu_uuid}: the API draws a fresh seed; the answer
   names (seed, n, dtype). The worker derives A and B (`challenge_matrices`) untimed: that
   is host CPU work, the same on any GPU.
2. `POST .../{id}/start`: the API starts its clock and reveals a sign vector d (entries +-1,
   `column_signs` of the answer's `signs_key`). The product to compute is C = (A diag(d)) B:
   unknown until now (no precomputation: C depends on d through all n rank-one terms), and
   as exact as A @ B.
3. `POST .../{id}/commit` {commitment}: the Merkle root over C's rows (leaves `row_bytes`).
   The API stops its clock here and only now draws the rows to reveal, so no row can be
   computed after the fact.
4. `POST .../{id}/reveal` {rows}: those rows with their inclusion proofs; the API checks them
   with `check_revealed_rows` (Freivalds over the revealed rows, exact integer arithmetic).

Entries of A and B lie in [-8, 8], so every entry of C is an integer below n * 64: computed
exactly in float32 or float64 whatever order a GPU sums in, and checked with no tolerance.
numpy is the only dependency; nothing here does I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Final, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from proofnet.messages.merkle import InclusionProof, verify_inclusion
from proofnet.messages.registration import RevealedRowReport

GPU_CHALLENGES_PATH: Final = "/api/v1/worker/gpu-challenges"
WORKER_GPUS_PATH: Final = "/api/v1/worker/gpus"

ENTRY_BOUND: Final = 8  # entries of A and B are integers in [-ENTRY_BOUND, ENTRY_BOUND]
MIN_N: Final = 2
MAX_N: Final = 16384
MAX_REVEALED_ROWS: Final = 16
_FREIVALDS_R_BITS: Final = 16
_FREIVALDS_DOMAIN: Final = b"proofnet/gpu-challenge-freivalds/v1"
_SIGNS_DOMAIN: Final = b"proofnet/gpu-challenge-signs/v1"
_BLOCK_ROWS: Final = 512

ChallengeStatus = Literal["issued", "started", "committed", "passed", "failed"]


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GpuChallengeRequest(_Message):
    gpu_uuid: str = Field(min_length=1, max_length=128)


class GpuChallengeCommit(_Message):
    commitment: str = Field(pattern=r"^[0-9a-f]{64}$")  # Merkle root over the rows of C


class GpuChallengeReveal(_Message):
    rows: list[RevealedRowReport] = Field(min_length=1, max_length=MAX_REVEALED_ROWS)


class GpuChallengeState(BaseModel):
    """The API's answer at every step: what to compute (seed, n, dtype), which rows to reveal
    (after the commitment), and the verdict with its reason. Extra fields are ignored so the
    API can add to it without breaking workers."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: int
    gpu_uuid: str
    gpu_model: str
    seed: int = Field(ge=0, lt=2**63)
    n: int = Field(ge=MIN_N, le=MAX_N)
    dtype: Literal["float32", "float64"]
    status: ChallengeStatus
    reason: str = ""
    issued_at: datetime
    # Once started: the key of the sign vector d (`column_signs`); the clock runs from here.
    signs_key: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    started_at: datetime | None = None
    # The API's own clock, start to commitment: what the plausibility check judges.
    elapsed_s: float | None = None
    measured_tflops: float | None = None
    reveal: list[int] = Field(default_factory=list, max_length=MAX_REVEALED_ROWS)


def challenge_matrices(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A and B as int8 arrays, a pure function of (seed, n)."""
    if not 0 <= seed < 2**63 or not MIN_N <= n <= MAX_N:
        raise ValueError(f"bad challenge parameters seed={seed} n={n}")
    # Separate child streams for A and B: neither matrix is a prefix of the other's stream.
    seq_a, seq_b = np.random.SeedSequence(seed).spawn(2)
    a = np.random.Generator(np.random.PCG64(seq_a)).integers(
        -ENTRY_BOUND, ENTRY_BOUND + 1, size=(n, n), dtype=np.int8
    )
    b = np.random.Generator(np.random.PCG64(seq_b)).integers(
        -ENTRY_BOUND, ENTRY_BOUND + 1, size=(n, n), dtype=np.int8
    )
    return a, b


def column_signs(signs_key: str, n: int) -> np.ndarray:
    """The sign vector d (int8, entries +-1) the round's product scales A's columns by."""
    digest = hashlib.sha256(_SIGNS_DOMAIN + bytes.fromhex(signs_key)).digest()
    gen = np.random.Generator(np.random.PCG64(int.from_bytes(digest, "big")))
    return (gen.integers(0, 2, size=n, dtype=np.int8) * 2 - 1).astype(np.int8)


def signed_matrices(seed: int, n: int, signs_key: str) -> tuple[np.ndarray, np.ndarray]:
    """A diag(d) and B, as int8: the factors of the round's product C."""
    a, b = challenge_matrices(seed, n)
    return a * column_signs(signs_key, n), b


def row_bytes(row: np.ndarray) -> bytes:
    """One row of C as little-endian int64: the canonical byte form of a Merkle leaf."""
    return np.ascontiguousarray(row, dtype="<i8").tobytes()


def freivalds_vector(key: bytes, n: int, round_: int) -> np.ndarray:
    """The random vector r of one Freivalds round, entries in [0, 2**16), a pure function of
    the verifier's secret `key`: the verdict can be recomputed from the stored challenge."""
    digest = hashlib.sha256(_FREIVALDS_DOMAIN + key + round_.to_bytes(4, "big")).digest()
    gen = np.random.Generator(np.random.PCG64(int.from_bytes(digest, "big")))
    return gen.integers(0, 2**_FREIVALDS_R_BITS, size=n, dtype=np.int64)


def check_revealed_rows(
    seed: int,
    n: int,
    signs_key: str,
    commitment: str,
    asked: Sequence[int],
    rows: Sequence[RevealedRowReport],
    key: bytes,
    *,
    rounds: int = 2,
) -> str | None:
    """Why the revealed rows fail (None when they pass): exactly the rows `asked`, each in
    the tree committed to, and together equal to those rows of (A diag(d)) B by Freivalds.

    Freivalds over the k revealed rows R: A'[I] (B r) == R r (A' = A diag(d)) for `rounds` vectors r drawn
    from the verifier's key, O(n^2 + kn) per round instead of O(kn^2) for recomputing the
    rows. All in int64: |B r| <= n * 8 * 2**16 and |C| <= n * 64, so |R r| stays below
    n^2 * 2**22 <= 2**50 for n <= 16384: exact, no wrap-around. A wrong row passes a round
    with probability at most 2**-16."""
    if [r.index for r in rows] != list(asked):
        return f"revealed rows {[r.index for r in rows]} are not the rows asked {list(asked)}"
    try:
        root = bytes.fromhex(commitment)
    except ValueError:
        return "the commitment is not hex"
    bound = n * ENTRY_BOUND**2
    revealed = np.zeros((len(rows), n), dtype=np.int64)
    for k, row in enumerate(rows):
        if len(row.values) != n:
            return f"row {row.index} has {len(row.values)} entries, not {n}"
        if any(v > bound or v < -bound for v in row.values):
            return f"row {row.index} has entries outside the possible range"
        values = np.asarray(row.values, dtype=np.int64)
        try:
            path = tuple(bytes.fromhex(h) for h in row.proof.path)
        except ValueError:
            return f"row {row.index} carries a proof that is not hex"
        proof = InclusionProof(index=row.proof.index, size=row.proof.size, path=path)
        if proof.index != row.index or proof.size != n:
            return f"row {row.index} carries a proof for another position"
        if not verify_inclusion(row_bytes(values), proof, root):
            return f"row {row.index} is not in the committed C"
        revealed[k] = values
    a, b = signed_matrices(seed, n, signs_key)
    a_rows = a[list(asked)].astype(np.int64)
    r = np.stack([freivalds_vector(key, n, k) for k in range(rounds)], axis=1)  # n x rounds
    # B r for every round in one pass over B, a block of rows at a time: never an n x n
    # int64 copy of B (512 MiB at n = 8192).
    br = np.empty((n, rounds), dtype=np.int64)
    for start in range(0, n, _BLOCK_ROWS):
        br[start : start + _BLOCK_ROWS] = b[start : start + _BLOCK_ROWS].astype(np.int64) @ r
    left, right = a_rows @ br, revealed @ r
    for round_ in range(rounds):
        if not np.array_equal(left[:, round_], right[:, round_]):
            return f"Freivalds round {round_ + 1}: the revealed rows are not rows of the product"
    return None
