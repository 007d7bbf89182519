"""The onboarding GPU challenge: a seeded matrix multiply, checked exactly with Freivalds.

The verifier issues (seed, n, dtype). Both sides derive the same small-integer matrices A and B
from the seed; the worker computes C = A @ B on its GPU in `dtype` and returns C (or rows of it)
with a commitment and its timing. Entries of A and B lie in [-8, 8], so every partial sum of
the product is an integer below n * 64 < 2**24: exactly representable in float32 (TF32
included, its inputs keep 10 mantissa bits) and float64, whatever order the GPU sums in. An
honest C is therefore bit-exact and verification needs no tolerance.

Verification is pure integer arithmetic: Freivalds (A(Br) == Cr for a random r, O(n^2) per
round, false accept at most 2**-16 per round) on a full C, or exact recomputation of a few
revealed rows tied to the row-digest commitment. numpy is the only import at module load;
torch or cupy are imported only when a GPU backend is asked for.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import numpy as np

# Defined once with the API's challenge round; re-exported for this module's callers.
from proofnet.messages.gpu_challenge import ENTRY_BOUND as ENTRY_BOUND
from proofnet.messages.gpu_challenge import challenge_matrices as challenge_matrices
from proofnet.messages.gpu_challenge import row_bytes as row_bytes
from proofnet.messages.merkle import InclusionProof, MerkleTree, leaf_hash, verify_inclusion

ChallengeDType = Literal["float32", "float64"]
Backend = Literal["auto", "torch", "cupy", "numpy"]

DTYPES: Final[tuple[str, ...]] = ("float32", "float64")
MIN_N: Final = 2
MAX_N: Final = 16384  # 2 GiB per float64 operand on the GPU; ample for a timing signal
SEED_BITS: Final = 63
_FREIVALDS_R_BITS: Final = 16
_REVEAL_DOMAIN: Final = b"proofnet/challenge-reveal/v1"
_GPU_SEED_DOMAIN: Final = b"proofnet/challenge-gpu/v1"
_NONCE_SEED_DOMAIN: Final = b"proofnet/challenge-seed/v1"


class ChallengeError(ValueError):
    """A challenge cannot be issued or computed as asked (bad parameters, backend missing)."""


@dataclass(frozen=True)
class ChallengeSpec:
    seed: int
    n: int
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ChallengeError("seed must be an integer")
        if not 0 <= self.seed < 2**SEED_BITS:
            raise ChallengeError(f"seed must be in [0, 2**{SEED_BITS})")
        if isinstance(self.n, bool) or not isinstance(self.n, int):
            raise ChallengeError("n must be an integer")
        if not MIN_N <= self.n <= MAX_N:
            raise ChallengeError(f"n must be in [{MIN_N}, {MAX_N}], got {self.n}")
        if self.dtype not in DTYPES:
            raise ChallengeError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")

    @property
    def flops(self) -> int:
        """Multiply-adds of one n x n x n product, counted as two operations each."""
        return 2 * self.n**3

    def for_gpu(self, index: int) -> ChallengeSpec:
        """The spec for GPU `index` of a multi-GPU worker: a distinct seed per GPU, so one
        GPU's answer cannot be replayed as another's. The verifier derives the same."""
        digest = hashlib.sha256(
            _GPU_SEED_DOMAIN + self.seed.to_bytes(8, "big") + index.to_bytes(4, "big")
        ).digest()
        seed = int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)
        return ChallengeSpec(seed=seed, n=self.n, dtype=self.dtype)


def seed_from_nonce(nonce: str) -> int:
    """The challenge seed for a registration nonce: unknowable to the worker before the API
    issues the nonce (no precomputed answers), and re-derivable by the API."""
    digest = hashlib.sha256(_NONCE_SEED_DOMAIN + nonce.encode()).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)


# --- commitment ---------------------------------------------------------------------------


def commitment_tree(c: np.ndarray) -> MerkleTree:
    """The RFC 6962 Merkle tree whose leaves are the rows of C, so any row can be revealed
    later with an O(log n) inclusion proof against the root."""
    c64 = np.ascontiguousarray(c, dtype="<i8")
    # Leaf hashes one row at a time: never a second n x n copy of C in memory.
    return MerkleTree.from_leaf_hashes([leaf_hash(c64[i].tobytes()) for i in range(c64.shape[0])])


def reveal_indices(commitment: str, nonce: str, n: int, k: int) -> tuple[int, ...]:
    """`k` distinct row indices fixed by the commitment and the verifier's nonce (Fiat-Shamir),
    so the rows checked are chosen only after C is committed to.

    Non-interactive selection can be ground (a worker may retry garbage rows until the chosen
    indices fall on rows it did compute), so revealed rows are evidence of a working GPU, not
    proof that all of C was computed; full Freivalds or verifier-chosen rows are that proof."""
    if not 0 < k <= n:
        raise ChallengeError(f"k must be in [1, n], got {k}")
    chosen: list[int] = []
    counter = 0
    while len(chosen) < k:
        h = hashlib.sha256(
            _REVEAL_DOMAIN + bytes.fromhex(commitment) + nonce.encode() + counter.to_bytes(4, "big")
        ).digest()
        counter += 1
        index = int.from_bytes(h[:8], "big") % n
        if index not in chosen:
            chosen.append(index)
    return tuple(chosen)


@dataclass(frozen=True)
class RevealedRow:
    index: int
    values: tuple[int, ...]
    proof: InclusionProof


# --- the worker's side ----------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ChallengeResult:
    spec: ChallengeSpec
    c: np.ndarray = field(repr=False)  # int64, n x n
    tree: MerkleTree = field(repr=False)
    elapsed_s: float  # best of the timed repeats, one product, device-synchronised
    backend: str  # "torch", "cupy" or "numpy"
    device: str  # what actually computed C, e.g. "cuda:0 NVIDIA H200" or "cpu"
    device_uuid: str | None = None

    @property
    def commitment(self) -> str:
        return self.tree.root.hex()

    @property
    def flops_per_s(self) -> float:
        return self.spec.flops / self.elapsed_s if self.elapsed_s > 0 else float("inf")

    def reveal(self, indices: Iterable[int]) -> tuple[RevealedRow, ...]:
        """Rows of C on demand, each with its inclusion proof against `commitment`."""
        out = []
        for i in indices:
            if not 0 <= i < self.spec.n:
                raise ChallengeError(f"row {i} out of range for n={self.spec.n}")
            values = tuple(int(v) for v in self.c[i])
            out.append(RevealedRow(index=i, values=values, proof=self.tree.proof(i)))
        return tuple(out)


def run_challenge(
    spec: ChallengeSpec,
    *,
    backend: Backend = "auto",
    gpu_index: int = 0,
    gpu_uuid: str | None = None,
    repeats: int = 3,
    matrices: tuple[np.ndarray, np.ndarray] | None = None,
) -> ChallengeResult:
    """Compute C = A @ B for `spec` on the best available backend (torch CUDA, then cupy, then
    numpy on the CPU unless one is named) and time it. `matrices` are the factors when the
    caller derived them already (the API's round: A diag(d) and B, derived before its clock
    starts); by default they are `challenge_matrices(spec.seed, spec.n)`.

    `gpu_uuid` (NVML's "GPU-...") picks the CUDA device by identity rather than by index, since
    CUDA's numbering need not follow NVML's."""
    if repeats < 1:
        raise ChallengeError("repeats must be at least 1")
    a, b = matrices if matrices is not None else challenge_matrices(spec.seed, spec.n)
    order: Sequence[str] = ("torch", "cupy", "numpy") if backend == "auto" else (backend,)
    reasons: list[str] = []
    for name in order:
        try:
            if name == "torch":
                c, elapsed, device, uuid = _run_torch(
                    a, b, spec.dtype, gpu_index, gpu_uuid, repeats
                )
            elif name == "cupy":
                c, elapsed, device, uuid = _run_cupy(a, b, spec.dtype, gpu_index, repeats)
            elif name == "numpy":
                c, elapsed, device, uuid = _run_numpy(a, b, spec.dtype, repeats)
            else:
                raise ChallengeError(f"unknown backend {name!r}")
        except _Unavailable as e:
            reasons.append(f"{name}: {e}")
            continue
        return ChallengeResult(
            spec=spec,
            c=c,
            tree=commitment_tree(c),
            elapsed_s=elapsed,
            backend=name,
            device=device,
            device_uuid=uuid,
        )
    raise ChallengeError("no backend could run the challenge: " + "; ".join(reasons))


class _Unavailable(Exception):
    """This backend is not installed or has no device; try the next one."""


def _to_exact_int64(c: np.ndarray) -> np.ndarray:
    # Values are integral by construction; a non-integral one means the device computed wrong,
    # which the verifier must see rather than have rounded away here.
    out = c.astype(np.int64)
    if not np.array_equal(out, c):
        raise ChallengeError("the device returned non-integral entries: its arithmetic is faulty")
    return out


def _run_numpy(
    a: np.ndarray, b: np.ndarray, dtype: str, repeats: int
) -> tuple[np.ndarray, float, str, str | None]:
    fa, fb = a.astype(dtype), b.astype(dtype)
    best = float("inf")
    c = fa
    for _ in range(repeats):
        t0 = time.perf_counter()
        c = fa @ fb
        best = min(best, time.perf_counter() - t0)
    return _to_exact_int64(c), best, "cpu", None


def _run_torch(
    a: np.ndarray, b: np.ndarray, dtype: str, gpu_index: int, gpu_uuid: str | None, repeats: int
) -> tuple[np.ndarray, float, str, str | None]:
    try:
        import torch
    except ImportError as e:
        raise _Unavailable("torch is not installed") from e
    if not torch.cuda.is_available():
        raise _Unavailable("torch sees no CUDA device")
    index = _torch_device_index(torch, gpu_index, gpu_uuid)
    device = torch.device("cuda", index)
    props = torch.cuda.get_device_properties(index)
    tdtype = {"float32": torch.float32, "float64": torch.float64}[dtype]
    ta = torch.from_numpy(a).to(device=device, dtype=tdtype)
    tb = torch.from_numpy(b).to(device=device, dtype=tdtype)
    tc = torch.matmul(ta, tb)  # warm-up: cuBLAS handle creation and kernel selection
    torch.cuda.synchronize(device)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        tc = torch.matmul(ta, tb)
        torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t0)
    c = tc.cpu().numpy()
    uuid = _torch_uuid(props)
    tf32 = " tf32" if dtype == "float32" and torch.backends.cuda.matmul.allow_tf32 else ""
    return _to_exact_int64(c), best, f"cuda:{index} {props.name}{tf32}", uuid


def _torch_uuid(props: Any) -> str | None:
    raw = getattr(props, "uuid", None)
    if raw is None:
        return None
    text = str(raw)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


def _torch_device_index(torch: Any, gpu_index: int, gpu_uuid: str | None) -> int:
    count = torch.cuda.device_count()
    if gpu_uuid is not None:
        for i in range(count):
            if _torch_uuid(torch.cuda.get_device_properties(i)) == gpu_uuid:
                return i
        # Older torch has no uuid property: fall back to the index, and say so via the result.
        if all(_torch_uuid(torch.cuda.get_device_properties(i)) is None for i in range(count)):
            return _check_index(gpu_index, count)
        raise _Unavailable(f"no CUDA device visible to torch has UUID {gpu_uuid}")
    return _check_index(gpu_index, count)


def _check_index(gpu_index: int, count: int) -> int:
    if not 0 <= gpu_index < count:
        raise _Unavailable(f"CUDA device {gpu_index} not visible ({count} visible)")
    return gpu_index


def _run_cupy(
    a: np.ndarray, b: np.ndarray, dtype: str, gpu_index: int, repeats: int
) -> tuple[np.ndarray, float, str, str | None]:
    try:
        import cupy
    except ImportError as e:
        raise _Unavailable("cupy is not installed") from e
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # cupy raises CUDARuntimeError when no driver is present
        raise _Unavailable(f"cupy sees no CUDA device: {e}") from e
    index = _check_index(gpu_index, count)
    with cupy.cuda.Device(index) as dev:
        ca, cb = cupy.asarray(a).astype(dtype), cupy.asarray(b).astype(dtype)
        cc = ca @ cb
        dev.synchronize()
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            cc = ca @ cb
            dev.synchronize()
            best = min(best, time.perf_counter() - t0)
        c = cupy.asnumpy(cc)
        name = cupy.cuda.runtime.getDeviceProperties(index)["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return _to_exact_int64(c), best, f"cuda:{index} {name}", None


# --- the verifier's side --------------------------------------------------------------------


@dataclass(frozen=True)
class Verification:
    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok


def _as_exact_int64(c: Any, n: int) -> tuple[np.ndarray | None, str]:
    arr = np.asarray(c)
    if arr.shape != (n, n):
        return None, f"C has shape {arr.shape}, expected ({n}, {n})"
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.array_equal(arr, np.trunc(arr)):
            return None, "C has non-integral or non-finite entries"
    elif arr.dtype.kind not in "iu":
        return None, f"C has dtype {arr.dtype}, expected integers"
    # Bounding C (compared in its own dtype, before any cast can wrap) keeps C @ r far from
    # int64 overflow, so the check stays exact over the integers: wrap-around would let
    # crafted entries vanish modulo 2**64.
    bound = n * ENTRY_BOUND**2
    if arr.max() > bound or arr.min() < -bound:
        return None, "C has entries outside the possible range"
    return arr.astype(np.int64), ""


def verify_freivalds(
    seed: int, n: int, c: Any, rounds: int = 2, *, rng: np.random.Generator | None = None
) -> Verification:
    """Exact probabilistic check that C == A @ B for the matrices of (seed, n).

    Each round draws r with entries uniform in [0, 2**16) from the verifier's own randomness
    and compares A(Br) with Cr in int64. A wrong C passes one round with probability at most
    2**-16 (a nonzero row d of AB - C has d.r == 0 for at most one value of any coordinate of
    r with the others fixed)."""
    if rounds < 1:
        raise ChallengeError("rounds must be at least 1")
    spec = ChallengeSpec(seed=seed, n=n)  # bad seed or n raises: that is the caller's error
    c64, why = _as_exact_int64(c, spec.n)
    if c64 is None:
        return Verification(False, why)
    a, b = challenge_matrices(spec.seed, spec.n)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    gen = rng if rng is not None else np.random.default_rng()
    for k in range(rounds):
        r = gen.integers(0, 2**_FREIVALDS_R_BITS, size=spec.n, dtype=np.int64)
        if not np.array_equal(a64 @ (b64 @ r), c64 @ r):
            return Verification(False, f"Freivalds round {k + 1} of {rounds}: A(Br) != Cr")
    return Verification(True, f"{rounds} Freivalds rounds passed")


def verify_rows(seed: int, n: int, rows: Sequence[RevealedRow], commitment: str) -> Verification:
    """Check revealed rows exactly (row i of A times B, O(n^2) each) and that each is the row
    the commitment (a Merkle root over the rows of C) was made to."""
    spec = ChallengeSpec(seed=seed, n=n)
    if not rows:
        return Verification(False, "no rows revealed")
    try:
        root = bytes.fromhex(commitment)
    except ValueError:
        return Verification(False, "commitment is not hex")
    a, b = challenge_matrices(spec.seed, spec.n)
    b64 = b.astype(np.int64)
    for row in rows:
        i = row.index
        if not 0 <= i < spec.n:
            return Verification(False, f"row index {i} out of range")
        values = np.asarray(row.values)
        if values.shape != (spec.n,) or values.dtype.kind not in "iu":
            return Verification(False, f"row {i} is not {spec.n} integers")
        if row.proof.index != i or row.proof.size != spec.n:
            return Verification(False, f"row {i} carries a proof for another position")
        if not verify_inclusion(row_bytes(values), row.proof, root):
            return Verification(False, f"row {i} is not in the committed C")
        if not np.array_equal(a[i].astype(np.int64) @ b64, values.astype(np.int64)):
            return Verification(False, f"row {i} is not row {i} of A @ B")
    return Verification(True, f"{len(rows)} revealed rows are exact and committed")


# --- plausibility of the timing -----------------------------------------------------------

# Dense peak TFLOP/s from NVIDIA datasheets, (float64 incl. FP64 tensor cores, float32 incl.
# TF32 tensor cores). Upper bounds only: a result faster than the claimed model's peak was not
# computed by that model. Longer names first: "A100" must win over "A10".
_PEAK_TFLOPS: Final[tuple[tuple[str, float, float], ...]] = (
    ("GH200", 67.0, 494.7),
    ("H200", 67.0, 494.7),
    ("H100", 67.0, 494.7),
    ("A100", 19.5, 156.0),
    ("A10G", 0.98, 62.5),
    ("A10", 0.98, 62.5),
    ("L40S", 1.43, 183.0),
    ("L40", 1.41, 90.5),
    ("L4", 0.49, 60.0),
    ("RTX 4090", 1.29, 82.6),
    ("RTX 3090", 0.56, 35.6),
    ("V100", 7.8, 15.7),
    ("T4", 0.25, 8.1),
)
_TOO_FAST_MARGIN: Final = 1.10  # clock boost and rounding in datasheets
_SLOW_FRACTION: Final = 0.01


@dataclass(frozen=True)
class Plausibility:
    verdict: Literal["plausible", "too-fast", "slow", "unknown-gpu", "cpu"]
    measured_tflops: float
    peak_tflops: float | None
    detail: str

    @property
    def ok(self) -> bool:
        """Only "too-fast" is disqualifying: slowness has innocent causes (small n, sharing)."""
        return self.verdict != "too-fast"


def peak_tflops(gpu_name: str, dtype: str) -> float | None:
    """The datasheet dense peak for `gpu_name` (as NVML names it) in `dtype`, if known."""
    if dtype not in DTYPES:
        raise ChallengeError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    upper = gpu_name.upper()
    for key, fp64, fp32 in _PEAK_TFLOPS:
        if key in upper:
            return fp64 if dtype == "float64" else fp32
    return None


def assess_throughput(spec: ChallengeSpec, elapsed_s: float, gpu_name: str | None) -> Plausibility:
    """Compare the measured rate with the claimed GPU's peak."""
    if elapsed_s <= 0:
        return Plausibility("too-fast", float("inf"), None, "non-positive elapsed time")
    measured = spec.flops / elapsed_s / 1e12
    if gpu_name is None:
        return Plausibility("cpu", measured, None, f"{measured:.3f} TFLOP/s on the CPU")
    peak = peak_tflops(gpu_name, spec.dtype)
    if peak is None:
        return Plausibility(
            "unknown-gpu", measured, None, f"{measured:.2f} TFLOP/s; no reference for {gpu_name}"
        )
    ratio = measured / peak
    if ratio > _TOO_FAST_MARGIN:
        verdict: Literal["plausible", "too-fast", "slow"] = "too-fast"
    elif ratio < _SLOW_FRACTION:
        verdict = "slow"
    else:
        verdict = "plausible"
    detail = f"{measured:.2f} TFLOP/s = {ratio:.1%} of the {gpu_name} {spec.dtype} peak {peak:g}"
    return Plausibility(verdict, measured, peak, detail)
