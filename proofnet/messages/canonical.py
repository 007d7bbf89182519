"""Canonical JSON for everything that is hashed or signed.

Defined once, in `pot.canonical` (the proof-of-training library, standard library only, runs
inside job containers too); the messages re-export it so every wire format imports it from
here, one layer above.
"""

from pot.canonical import (
    MAX_DEPTH,
    MAX_INT,
    MIN_INT,
    CanonicalJSONError,
    canonical_json,
    parse_canonical_json,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_INT",
    "MIN_INT",
    "CanonicalJSONError",
    "canonical_json",
    "parse_canonical_json",
]
