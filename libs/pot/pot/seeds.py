"""Seeds and choices that both the worker and the verifier must derive identically."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from decimal import Decimal

import numpy as np

from pot.tensors import parse_decimal

DATA_SEED_DOMAIN = b"proofnet/pot/data-seed/v1"
SPOT_CHECK_DOMAIN = b"proofnet/pot/spot-check/v1"
DRAW_MESSAGE_DOMAIN = b"proofnet/pot/spot-check-draw/v1"
DRAW_SEED_DOMAIN = b"proofnet/pot/spot-check-seed/v1"
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


def draw_message(commitment: bytes) -> bytes:
    """What an oracle signs to draw the segments it checks: a domain tag and the digest of
    what the provider signed (its attestation, which names the proof's root).

    The provider signs first; the oracle's signature over it is unknown to the provider
    until the oracle reveals it, so the provider cannot know which segments will be
    replayed when it commits. Ed25519 signs deterministically, so the oracle cannot draw
    again either, and anyone with its public key can check a draw.
    """
    if not isinstance(commitment, bytes) or len(commitment) != 32:
        raise ValueError("the commitment must be a 32-byte digest")
    return DRAW_MESSAGE_DOMAIN + commitment


def draw_seed(signature: bytes) -> bytes:
    """The spot-check seed from the oracle's signature over `draw_message(...)`."""
    if not isinstance(signature, bytes) or len(signature) < 32:
        raise ValueError("the draw signature must be at least 32 bytes")
    return hashlib.sha256(DRAW_SEED_DOMAIN + signature).digest()


def select_spot_checks(
    update_norms: Sequence[str | None],
    *,
    seed: bytes,
    random_count: int,
    top: int = 2,
) -> tuple[int, ...]:
    """Segments to re-execute: `random_count` drawn uniformly from ALL segments, plus the
    `top` largest by committed update norm.

    `update_norms[i]` is the committed norm of segment i + 1 (segments are numbered from 1,
    segment s running from checkpoint s-1 to s). The random picks carry the guarantee: they
    are uniform without replacement over every segment, whatever the norms say, so a prover
    that fakes a fraction f of the segments is caught with probability at least
    1 - (1 - f)^random_count, also when it commits small norms for the faked ones. The
    norm picks only add the segments a large faked jump would hide in (ties go to the
    earlier segment). Draws are SHA-256(domain || seed || counter) with rejection sampling,
    so any party with the seed gets the same answer; the seed must be unknown to the
    prover until its root is committed (`draw_seed`).
    """
    if top < 0 or random_count < 0:
        raise ValueError("top and random_count must be >= 0")
    if not isinstance(seed, bytes) or len(seed) < 16:
        raise ValueError("seed must be at least 16 bytes")
    n = len(update_norms)
    remaining = list(range(n))
    chosen: set[int] = set()
    counter = 0
    for _ in range(min(random_count, n)):
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
    ranked = sorted(range(n), key=lambda i: (-_norm_key(update_norms[i]), i))
    chosen.update(ranked[:top])
    return tuple(sorted(i + 1 for i in chosen))


def detection_probability(faked_fraction: float, random_checks: int) -> float:
    """Chance that at least one of `random_checks` uniform picks lands on a faked segment."""
    return 1.0 - (1.0 - faked_fraction) ** random_checks
