"""Rationals read as cardano-ledger's `decodeRationalWithTag` + `boundRational` read them,
and handed to scripts reduced (chain/devnet/rationals.py, chain/devnet/script_context.py).

Each rule is a hand-built rational the ledger refuses or rewrites, beside its honest twin.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from chain.devnet.cbor_items import CborMap, CborTag
from chain.devnet.plutus_data import PlutusData, constr, integer, plist, pmap
from chain.devnet.rationals import WORD64_MAX, Interval, RationalError, ledger_rational
from chain.devnet.script_context import (
    ScriptContextError,
    changed_parameters,
    governance_action,
)


def r(n: object, d: object) -> CborTag:
    return CborTag(30, [n, d])


def test_a_rational_must_carry_tag_30() -> None:
    assert ledger_rational(r(1, 2), Interval.UNIT) == Fraction(1, 2)
    for untagged in ([1, 2], CborTag(31, [1, 2]), 0.5):
        with pytest.raises(RationalError, match="tag 30"):
            ledger_rational(untagged, Interval.UNIT)


def test_a_rational_is_exactly_two_integers() -> None:
    for bad in (CborTag(30, [1, 2, 3]), CborTag(30, [1]), r(1.0, 2), r(True, 2), r(1, b"\x02")):
        with pytest.raises(RationalError, match="two integers"):
            ledger_rational(bad, Interval.NON_NEGATIVE)


def test_a_zero_denominator_is_refused() -> None:
    with pytest.raises(RationalError, match="zero denominator"):
        ledger_rational(r(0, 0), Interval.NON_NEGATIVE)
    assert ledger_rational(r(0, 7), Interval.NON_NEGATIVE) == 0


def test_values_are_reduced_with_the_sign_on_the_numerator() -> None:
    half = ledger_rational(r(2, 4), Interval.UNIT)
    assert (half.numerator, half.denominator) == (1, 2)
    # Haskell's `%` turns -1/-2 into 1/2, which a UnitInterval takes.
    assert ledger_rational(r(-1, -2), Interval.UNIT) == Fraction(1, 2)
    with pytest.raises(RationalError):  # 1/-2 is -1/2: negative, no interval takes it
        ledger_rational(r(1, -2), Interval.NON_NEGATIVE)


def test_word64_bounds_apply_to_the_reduced_parts() -> None:
    # Both parts overflow a Word64 as written, yet reduce to 1/2: the ledger accepts it.
    assert ledger_rational(r(2**64, 2**65), Interval.UNIT) == Fraction(1, 2)
    with pytest.raises(RationalError, match="Word64"):
        ledger_rational(r(1, 2**64), Interval.UNIT)
    assert ledger_rational(r(WORD64_MAX, 1), Interval.NON_NEGATIVE) == WORD64_MAX


@pytest.mark.parametrize(
    ("interval", "inside", "outside"),
    [
        (Interval.UNIT, (1, 1), (3, 2)),
        (Interval.NON_NEGATIVE, (3, 2), (-1, 2)),
        (Interval.POSITIVE, (1, 10**19), (0, 1)),
        (Interval.POSITIVE_UNIT, (1, 1), (0, 5)),
    ],
)
def test_each_interval_keeps_its_bounds(
    interval: Interval, inside: tuple[int, int], outside: tuple[int, int]
) -> None:
    assert ledger_rational(r(*inside), interval) == Fraction(*inside)
    with pytest.raises(RationalError):
        ledger_rational(r(*outside), interval)


# --- what a script sees ----------------------------------------------------------------


def test_parameter_change_hands_scripts_reduced_rationals() -> None:
    update = CborMap(
        (
            (9, r(6, 20)),  # a0
            (19, [r(1154, 20000), r(1442, 20000000)]),  # execution prices
            (25, [r(2, 4)] * 5),  # pool voting thresholds
            (33, r(30, 2)),  # reference-script fee per byte
            (0, 44),
        )
    )
    assert changed_parameters(update) == pmap(
        (integer(k), v)
        for k, v in [
            (0, integer(44)),
            (9, pair(3, 10)),
            (19, plist([pair(577, 10000), pair(721, 10000000)])),
            (25, plist([pair(1, 2)] * 5)),
            (33, pair(15, 1)),
        ]
    )


def test_committee_quorum_is_plutus_tx_rational_reduced() -> None:
    action: list[object] = [4, None, [], CborMap(()), r(4, 6)]
    quorum = governance_action(action).fields[-1]  # type: ignore[attr-defined]
    assert quorum == constr(0, integer(2), integer(3))
    with pytest.raises(ScriptContextError, match="UnitInterval"):
        governance_action([4, None, [], CborMap(()), r(4, 3)])


def test_parameter_change_refuses_what_the_ledger_cannot_decode() -> None:
    for bad in (
        CborMap(((10, r(3, 2)),)),  # rho above one
        CborMap(((11, [1, 2]),)),  # tau untagged
        CborMap(((19, [r(1, 2)]),)),  # one price of two
        CborMap(((26, [r(1, 2)] * 9),)),  # nine DRep thresholds of ten
        CborMap(((0, r(1, 2)),)),  # min fee a is an integer
        CborMap(((14, [11, 0]),)),  # protocol version left the update in Conway
        CborMap(((0, 1), (0, 2))),  # a key twice
        CborMap(()),  # an empty update
    ):
        with pytest.raises(ScriptContextError):
            changed_parameters(bad)


def pair(n: int, d: int) -> PlutusData:
    return plist([integer(n), integer(d)])
