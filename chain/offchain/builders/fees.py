"""Conway fee arithmetic from a pycardano `ProtocolParameters` (what a backend reports).

pycardano's own estimate assumes a flat reference-script fee; the ledger's is tiered, so
builders compute the minimum fee here, with the same formula the ledger applies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

from pycardano import ProtocolParameters

# Ledger constants of the Conway reference-script fee (not protocol parameters): the price
# per byte grows by this factor every this many bytes.
REF_SCRIPT_TIER_BYTES = 25_600
REF_SCRIPT_TIER_MULTIPLIER = Fraction(6, 5)
# Min-ADA counts this overhead per output on top of its serialized size.
OUTPUT_OVERHEAD_BYTES = 160


def exact_price(value: float | Fraction) -> Fraction:
    """Blockfrost reports execution prices as JSON floats; the ledger's are small rationals."""
    return Fraction(value).limit_denominator(10**12)


def script_fee(params: ProtocolParameters, mem: int, steps: int) -> int:
    # The ledger rounds the sum of both terms, not each one.
    return math.ceil(exact_price(params.price_mem) * mem + exact_price(params.price_step) * steps)


def ref_script_fee(params: ProtocolParameters, total_size: int) -> int:
    base = (params.min_fee_reference_scripts or {}).get("base", 15)
    price = exact_price(base)
    acc = Fraction(0)
    remaining = total_size
    while remaining >= REF_SCRIPT_TIER_BYTES:
        acc += REF_SCRIPT_TIER_BYTES * price
        price *= REF_SCRIPT_TIER_MULTIPLIER
        remaining -= REF_SCRIPT_TIER_BYTES
    return math.floor(acc + remaining * price)


def min_fee(
    params: ProtocolParameters,
    size: int,
    ex_units: Iterable[tuple[int, int]],
    ref_script_size: int,
) -> int:
    mem = steps = 0
    for m, s in ex_units:
        mem += m
        steps += s
    return (
        int(params.min_fee_coefficient) * size
        + int(params.min_fee_constant)
        + script_fee(params, mem, steps)
        + ref_script_fee(params, ref_script_size)
    )


def min_ada(params: ProtocolParameters, output_size: int) -> int:
    per_byte = int(params.coins_per_utxo_byte or params.coins_per_utxo_word)
    return (OUTPUT_OVERHEAD_BYTES + output_size) * per_byte


def min_collateral(params: ProtocolParameters, fee: int) -> int:
    return math.ceil(fee * int(params.collateral_percent) / 100)
