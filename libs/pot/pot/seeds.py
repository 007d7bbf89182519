"""Seeds and choices that both the worker and the verifier must derive identically."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from decimal import Decimal

import numpy as np

from worker.pot.tensors import parse_decimal

DATA_SEED_DOMAIN = b"proofnet/pot/data-seed/v1"
SPOT_CHECK_DOMAIN = b"proofnet/pot/spot-check/v1"
MAX_SEED = 2**64 - 1


def derive_data_seed(job_seed: int, nonce: bytes) -> int:
    """Data-order seed = first 8 bytes of SHA-256(domain || job seed (u64 BE) || nonce).

    The job seed is in the signed spec; the nonce is revealed only when the job is claimed, so
    nobody can precompute a training run (or pick a convenient data order) before claiming.
    The result fits numpy's and torch's 64-bit seeding.
    """
    if isinstance(job_seed, bool) or not isinstance(job_seed, int) or not 0 <= job_seed <= MAX_SEED:
        raise ValueError("job_seed must be an integer in [0, 2**64 - 1]")
    if not isinstance(nonce, bytes) or not 16 <= len(nonce) <= 64:
        raise ValueError("nonce must be 16 to 64 bytes")
    digest = hashlib.sha256(DATA_SEED_DOMAIN + job_seed.to_bytes(8, "big") + nonce).digest()
    return int.from_bytes(digest[:8], "big")


class BatchSampler:
    """Mini-batch indices for step s (1-based): epoch-wise shuffles seeded by the data seed.

    Each epoch's order is a permutation drawn from PCG64 seeded with (data seed, epoch), so the
    indices of any step can be recomputed without replaying earlier ones; the last partial
    batch of an epoch is dropped so every step has the same batch size.
    """

    def __init__(self, data_seed: int, dataset_size: int, batch_size: int) -> None:
        if not 1 <= batch_size <= dataset_size:
            raise ValueError("need 1 <= batch_size <= dataset_size")
        self.data_seed = data_seed
        self.dataset_size = dataset_size
        self.batch_size = batch_size
        self.steps_per_epoch = dataset_size // batch_size
        self._epoch = -1
        self._perm = np.empty(0, dtype=np.int64)

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch != self._epoch:
            seq = np.random.SeedSequence(self.data_seed, spawn_key=(epoch,))
            rng = np.random.Generator(np.random.PCG64(seq))
            self._perm = rng.permutation(self.dataset_size).astype(np.int64)
            self._epoch = epoch
        return self._perm

    def indices(self, step: int) -> np.ndarray:
        if step < 1:
            raise ValueError("steps are numbered from 1")
        epoch, pos = divmod(step - 1, self.steps_per_epoch)
        start = pos * self.batch_size
        return self._permutation(epoch)[start : start + self.batch_size].copy()


def _norm_key(norm: str | None) -> Decimal:
    # A missing or non-finite norm is suspicious: rank it first so it gets checked.
    if norm is None:
        return Decimal("Infinity")
    return parse_decimal(norm)


def select_spot_checks(
    update_norms: Sequence[str | None],
    *,
    seed: bytes,
    random_count: int,
    top: int = 2,
) -> tuple[int, ...]:
    """Segments to re-execute: the `top` largest by update norm plus `random_count` others.

    `update_norms[i]` is the committed norm of segment i + 1 (segments are numbered from 1,
    segment s running from checkpoint s-1 to s). Ties go to the earlier segment. The random
    picks are uniform without replacement over the remaining segments, drawn from
    SHA-256(domain || seed || counter), so any party with the seed gets the same answer.
    The seed must be unknown to the worker until its root is committed (oracle randomness).
    """
    if top < 0 or random_count < 0:
        raise ValueError("top and random_count must be >= 0")
    if not isinstance(seed, bytes) or len(seed) < 16:
        raise ValueError("seed must be at least 16 bytes")
    n = len(update_norms)
    ranked = sorted(range(n), key=lambda i: (-_norm_key(update_norms[i]), i))
    chosen = set(ranked[:top])
    remaining = [i for i in range(n) if i not in chosen]
    counter = 0
    for _ in range(min(random_count, len(remaining))):
        # Rejection sampling keeps the pick unbiased for any len(remaining).
        bound = len(remaining)
        limit = (1 << 64) - ((1 << 64) % bound)
        while True:
            digest = hashlib.sha256(SPOT_CHECK_DOMAIN + seed + counter.to_bytes(8, "big")).digest()
            counter += 1
            draw = int.from_bytes(digest[:8], "big")
            if draw < limit:
                break
        chosen.add(remaining.pop(draw % bound))
    return tuple(sorted(i + 1 for i in chosen))


def detection_probability(faked_fraction: float, random_checks: int) -> float:
    """Chance that at least one of `random_checks` uniform picks lands on a faked segment."""
    return 1.0 - (1.0 - faked_fraction) ** random_checks
