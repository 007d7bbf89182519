import sys
from dataclasses import replace

import numpy as np
import pytest

from worker.challenge import (
    MAX_N,
    ChallengeError,
    ChallengeSpec,
    assess_throughput,
    challenge_matrices,
    commitment_tree,
    peak_tflops,
    reveal_indices,
    run_challenge,
    verify_freivalds,
    verify_rows,
)


@pytest.fixture(autouse=True)
def _cpu_backends_only(monkeypatch):
    # The suite runs on machines with and without GPUs; these tests are about the maths.
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "cupy", None)


def test_matrices_are_seeded_small_integers():
    a, b = challenge_matrices(7, 64)
    a2, b2 = challenge_matrices(7, 64)
    assert a.dtype == np.int8 and a.shape == (64, 64)
    assert np.array_equal(a, a2) and np.array_equal(b, b2)
    assert not np.array_equal(a, b)
    assert a.min() >= -8 and a.max() <= 8 and a.min() < 0 < a.max()
    assert not np.array_equal(challenge_matrices(8, 64)[0], a)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_honest_result_is_exact_and_verifies(dtype):
    spec = ChallengeSpec(seed=123, n=192, dtype=dtype)
    result = run_challenge(spec, backend="auto", repeats=2)
    assert result.backend == "numpy" and result.device == "cpu"
    a, b = challenge_matrices(123, 192)
    assert np.array_equal(result.c, a.astype(np.int64) @ b.astype(np.int64))
    assert result.commitment == commitment_tree(result.c).root.hex()
    assert len(result.commitment) == 64
    assert result.elapsed_s > 0 and result.flops_per_s > 0
    verdict = verify_freivalds(123, 192, result.c, rounds=3)
    assert verdict.ok and bool(verdict)


def test_one_flipped_element_is_caught():
    result = run_challenge(ChallengeSpec(seed=5, n=128), backend="numpy", repeats=1)
    rng = np.random.default_rng(0)
    for trial in range(40):
        bad = result.c.copy()
        i, j = rng.integers(0, 128, size=2)
        bad[i, j] += 1 if trial % 2 else -1
        # One round misses with probability at most 2**-16; forty in a row would be 2**-640.
        verdict = verify_freivalds(5, 128, bad, rounds=1)
        assert not verdict.ok and "Freivalds" in verdict.reason


def test_wrong_seed_or_shape_is_rejected():
    c = run_challenge(ChallengeSpec(seed=9, n=64), backend="numpy", repeats=1).c
    assert not verify_freivalds(10, 64, c).ok
    short = verify_freivalds(9, 64, c[:63])
    assert not short.ok and "shape" in short.reason
    assert not verify_freivalds(9, 65, c).ok


def test_malformed_entries_are_rejected():
    c = run_challenge(ChallengeSpec(seed=9, n=64), backend="numpy", repeats=1).c
    halves = c.astype(np.float64)
    halves[0, 0] += 0.5
    assert "non-integral" in verify_freivalds(9, 64, halves).reason
    huge = c.copy()
    huge[3, 3] = 2**62  # would wrap in C @ r if it were not bounded first
    assert "outside" in verify_freivalds(9, 64, huge).reason
    wrapped = c.astype(np.uint64)  # negatives become huge unsigned values
    assert not verify_freivalds(9, 64, wrapped).ok
    assert "dtype" in verify_freivalds(9, 64, c.astype(str)).reason
    assert verify_freivalds(9, 64, c.astype(np.float64)).ok  # exact floats are fine


@pytest.mark.parametrize(
    "kwargs",
    [
        {"seed": -1, "n": 8},
        {"seed": 2**63, "n": 8},
        {"seed": True, "n": 8},
        {"seed": 1, "n": 1},
        {"seed": 1, "n": MAX_N + 1},
        {"seed": 1, "n": 8, "dtype": "float16"},
    ],
)
def test_bad_specs_raise(kwargs):
    with pytest.raises(ChallengeError):
        ChallengeSpec(**kwargs)


def test_named_missing_backend_is_a_clear_error():
    with pytest.raises(ChallengeError, match="torch is not installed"):
        run_challenge(ChallengeSpec(seed=1, n=8), backend="torch")


def test_revealed_rows_verify_against_commitment():
    spec = ChallengeSpec(seed=77, n=96)
    result = run_challenge(spec, backend="numpy", repeats=1)
    picks = reveal_indices(result.commitment, "ab" * 16, spec.n, 6)
    assert len(set(picks)) == 6 and all(0 <= i < 96 for i in picks)
    assert picks == reveal_indices(result.commitment, "ab" * 16, spec.n, 6)
    assert picks != reveal_indices(result.commitment, "cd" * 16, spec.n, 6)
    rows = result.reveal(picks)
    assert [r.index for r in rows] == list(picks)
    assert verify_rows(77, 96, rows, result.commitment).ok

    first = rows[0]
    forged = replace(first, values=tuple(v + 1 for v in first.values))
    v = verify_rows(77, 96, [forged], result.commitment)
    assert not v.ok and "not in the committed C" in v.reason
    moved = replace(rows[1], index=first.index)
    assert "another position" in verify_rows(77, 96, [moved], result.commitment).reason
    # A consistent but wrong C (committed honestly to wrong values) fails the recomputation.
    bad_c = result.c.copy()
    bad_c[first.index] += 1
    bad_tree = commitment_tree(bad_c)
    bad_row = replace(
        first, values=tuple(int(x) for x in bad_c[first.index]), proof=bad_tree.proof(first.index)
    )
    v = verify_rows(77, 96, [bad_row], bad_tree.root.hex())
    assert not v.ok and "not row" in v.reason
    assert not verify_rows(77, 96, [], result.commitment).ok
    with pytest.raises(ChallengeError):
        result.reveal([96])


def test_each_gpu_gets_its_own_seed():
    spec = ChallengeSpec(seed=42, n=16)
    seeds = {spec.for_gpu(i).seed for i in range(8)}
    assert len(seeds) == 8
    assert spec.for_gpu(3) == ChallengeSpec(seed=42, n=16).for_gpu(3)


def test_throughput_plausibility_against_claimed_gpu():
    spec = ChallengeSpec(seed=1, n=8192)  # 1.1e12 flops
    assert assess_throughput(spec, spec.flops / 40e12, "NVIDIA H200").verdict == "plausible"
    too_fast = assess_throughput(spec, spec.flops / 2000e12, "NVIDIA H200")
    assert too_fast.verdict == "too-fast" and not too_fast.ok
    assert assess_throughput(spec, spec.flops / 40e12, "NVIDIA A10").verdict == "plausible"
    assert assess_throughput(spec, spec.flops / 100e12, "NVIDIA A10").verdict == "too-fast"
    assert assess_throughput(spec, 100.0, "NVIDIA H200").verdict == "slow"
    assert assess_throughput(spec, 1.0, "Mystery GPU").verdict == "unknown-gpu"
    assert assess_throughput(spec, 1.0, None).verdict == "cpu"
    assert peak_tflops("NVIDIA A100-SXM4-80GB", "float64") == 19.5
    assert peak_tflops("NVIDIA A10", "float32") == 62.5
