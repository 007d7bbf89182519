"""The oracle set an escrow pins (`EscrowDatum.oracle_set`), computed off-chain.

The same bytes as `chain.contracts.rules.oracle_set_hash` on chain: blake2b-256 of the
threshold as 8 big-endian bytes followed by the oracle key hashes in the config's
(strictly increasing) order. Builders write it into each escrow at lock time from the
configuration on chain; the batch script and Cancel accept an escrow only while the
configuration holds exactly that set, so a rotation by the admins settles no escrow locked
before it (docs/protocol.md, Trust model). Pure: no I/O here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from chain.contracts import types as t

# The width the threshold is encoded in (integerToByteString big-endian on chain).
THRESHOLD_BYTES = 8


def oracle_set_hash(oracles: Sequence[bytes], threshold: int) -> bytes:
    """The pin of `threshold`-of-`oracles` (key hashes in strictly increasing order, as a
    valid config holds them)."""
    if not 0 <= threshold < 2 ** (8 * THRESHOLD_BYTES):
        raise ValueError(f"threshold {threshold} does not fit {THRESHOLD_BYTES} bytes")
    payload = threshold.to_bytes(THRESHOLD_BYTES, "big") + b"".join(bytes(k) for k in oracles)
    return hashlib.blake2b(payload, digest_size=32).digest()


def of_config(cfg: t.OracleConfigDatum) -> bytes:
    """The oracle set a configuration holds now."""
    return oracle_set_hash(list(cfg.oracles), int(cfg.threshold))
