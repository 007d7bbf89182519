"""Which segments are replayed: drawn from all of them with the verifier's randomness, so a
prover faking segments (and committing small update norms for them) is caught at the rate
the random picks guarantee, and cannot know the picks when it commits."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest
from nacl.signing import SigningKey

from pot.seeds import draw_message, draw_seed, select_spot_checks


def test_selection_is_deterministic_and_adds_the_largest_updates() -> None:
    norms = ["0.5", "3.25", "0.1", "2", "0.75", "1", "0.2", "0.3"]
    seed = b"\x01" * 32
    chosen = select_spot_checks(norms, seed=seed, random_count=3)
    assert chosen == select_spot_checks(norms, seed=seed, random_count=3)
    assert {2, 4} <= set(chosen)  # the two largest updates, 1-based segment numbers
    assert 3 <= len(chosen) <= 5  # three random picks, which may include those two
    assert all(1 <= s <= len(norms) for s in chosen)
    assert select_spot_checks(norms, seed=seed, random_count=0) == (2, 4)
    assert select_spot_checks(norms, seed=seed, random_count=100) == tuple(range(1, 9))
    # A non-finite norm is suspicious and always checked; ties go to the earlier segment.
    assert 3 in select_spot_checks(["1", "1", "NaN", "1"], seed=seed, random_count=0)
    assert select_spot_checks(["1", "1", "1"], seed=seed, random_count=0, top=1) == (1,)
    assert select_spot_checks([], seed=seed, random_count=3) == ()
    with pytest.raises(ValueError):
        select_spot_checks(norms, seed=b"short", random_count=1)


def test_random_picks_are_uniform_over_all_segments() -> None:
    """The random picks ignore the norms: the segments with the largest updates are drawn
    as often as any other (they are replayed anyway; the draw does not avoid them)."""
    norms = ["9", "8", *(["1"] * 10)]
    counts = np.zeros(len(norms))
    for i in range(600):
        random_only = select_spot_checks(norms, seed=i.to_bytes(16, "big"), random_count=1, top=0)
        for s in random_only:
            counts[s - 1] += 1
    assert counts.min() > 20 and counts.max() < 85  # 50 each expected


@pytest.mark.parametrize("faked", [1, 3, 5])
def test_small_norm_fakes_are_caught_at_the_guaranteed_rate(faked: int) -> None:
    """A prover fakes `faked` of 10 segments and commits tiny update norms for them so the
    norm picks never land there. The norm picks alone never catch it (the attack); the
    random picks catch it with probability 1 - C(n - F, m) / C(n, m) (the guarantee,
    at least 1 - (1 - f)^m)."""
    n, m, trials = 10, 3, 1500
    fakes = set(range(n - faked + 1, n + 1))
    norms = ["0.000001" if s in fakes else str(1 + s) for s in range(1, n + 1)]
    caught_by_norm = caught = 0
    for i in range(trials):
        seed = i.to_bytes(32, "big")
        caught_by_norm += bool(fakes & set(select_spot_checks(norms, seed=seed, random_count=0)))
        caught += bool(fakes & set(select_spot_checks(norms, seed=seed, random_count=m)))
    assert caught_by_norm == 0
    exact = 1 - comb(n - faked, m) / comb(n, m)
    assert exact >= 1 - (1 - faked / n) ** m
    assert caught / trials == pytest.approx(exact, abs=0.05)


def test_the_draw_is_the_verifiers_signature_over_the_commitment() -> None:
    """Deterministic for one key and commitment (no redraws), different for another key
    (the prover, without the key, cannot compute it), and checkable by anyone with the
    public key."""
    commitment = bytes(range(32))
    oracle, other = SigningKey(b"\x01" * 32), SigningKey(b"\x02" * 32)
    signature = oracle.sign(draw_message(commitment)).signature
    assert signature == oracle.sign(draw_message(commitment)).signature
    oracle.verify_key.verify(draw_message(commitment), signature)
    seed = draw_seed(signature)
    assert len(seed) == 32
    assert seed != draw_seed(other.sign(draw_message(commitment)).signature)
    assert seed != draw_seed(oracle.sign(draw_message(bytes(32))).signature)
    norms = ["1"] * 40
    picks = {
        select_spot_checks(
            norms,
            seed=draw_seed(SigningKey(bytes([i]) * 32).sign(draw_message(commitment)).signature),
            random_count=3,
            top=0,
        )
        for i in range(1, 9)
    }
    assert len(picks) > 4
    with pytest.raises(ValueError, match="32-byte"):
        draw_message(b"root")
