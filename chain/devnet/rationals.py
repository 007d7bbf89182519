"""Rationals as the ledger reads them from a transaction and hands them to scripts.

cardano-ledger decodes every bounded rational of a transaction (`BoundedRatio` in
`Cardano.Ledger.BaseTypes`, through `decodeRationalWithTag`) the same way:

1. the value carries CBOR tag 30, over an array of exactly two integers;
2. a zero denominator is refused;
3. `n % d` makes a Haskell `Rational`: the sign moves to the numerator and both are divided
   by their greatest common divisor, so `30([2, 4])` is one half;
4. `boundRational` then refuses the result unless its numerator and denominator (reduced)
   fit a Word64, and the value lies in the type's interval: `UnitInterval` [0, 1],
   `NonNegativeInterval` [0, 2^64 - 1], `PositiveInterval` [10^-19, 2^64 - 1],
   `PositiveUnitInterval` [10^-19, 1].

What a script sees is that reduced value (`unboundRational`): a two-element list in a
parameter change, PlutusTx's `Rational` (`Constr 0 [n, d]`, denominator positive, coprime)
for a committee quorum. The transaction's own bytes are never rewritten (its id is over them).
"""

from __future__ import annotations

import enum
from fractions import Fraction
from typing import Any

from chain.devnet.cbor_items import CborTag

RATIONAL_TAG = 30
WORD64_MAX = 2**64 - 1
_EPSILON = Fraction(1, 10**19)  # the smallest decimal that round-trips JSON (the ledger's)


class RationalError(ValueError):
    """A rational the ledger's decoder refuses."""


class Interval(enum.Enum):
    """The ledger's bounded rational types: (name, lower bound, upper bound)."""

    UNIT = ("UnitInterval", Fraction(0), Fraction(1))
    NON_NEGATIVE = ("NonNegativeInterval", Fraction(0), Fraction(WORD64_MAX))
    POSITIVE = ("PositiveInterval", _EPSILON, Fraction(WORD64_MAX))
    POSITIVE_UNIT = ("PositiveUnitInterval", _EPSILON, Fraction(1))


def ledger_rational(item: Any, interval: Interval, what: str = "rational") -> Fraction:
    """The value of `item` (a decoded CBOR item) as the ledger decodes it, reduced."""
    name, low, high = interval.value
    if not (isinstance(item, CborTag) and item.tag == RATIONAL_TAG):
        raise RationalError(f"{what} must be a rational with CBOR tag 30, got {item!r}")
    pair = item.value
    if not (
        isinstance(pair, list)
        and len(pair) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
    ):
        raise RationalError(f"{what} must be tag 30 over two integers, got {pair!r}")
    numerator, denominator = pair
    if denominator == 0:
        raise RationalError(f"{what} has a zero denominator")
    value = Fraction(numerator, denominator)  # reduced, sign on the numerator, as `%`
    if not (0 <= value.numerator <= WORD64_MAX and value.denominator <= WORD64_MAX):
        raise RationalError(f"{what} {value} does not fit a {name} (Word64 parts, reduced)")
    if not low <= value <= high:
        raise RationalError(f"{what} {value} is outside the {name} [{low}, {high}]")
    return value
