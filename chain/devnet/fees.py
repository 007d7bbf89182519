"""Conway fee arithmetic: minimum fee, script execution fee, reference-script fee, min-ADA."""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

from chain.devnet.params import ProtocolParams

# Babbage/Conway min-ADA counts 160 bytes of per-entry overhead on top of the output's size.
OUTPUT_OVERHEAD_BYTES = 160


def script_fee(params: ProtocolParams, mem: int, steps: int) -> int:
    """ceil(price_mem * mem + price_step * steps): the ledger rounds the sum, not each term."""
    return math.ceil(params.price_mem * mem + params.price_step * steps)


def ref_script_fee(params: ProtocolParams, total_size: int) -> int:
    """Conway's tiered fee over the total size of reference scripts (floor of the sum)."""
    acc = Fraction(0)
    price = Fraction(params.min_fee_ref_script_cost_per_byte)
    step = params.ref_script_fee_range
    remaining = total_size
    while remaining >= step:
        acc += step * price
        price *= params.ref_script_fee_multiplier
        remaining -= step
    return math.floor(acc + remaining * price)


def min_fee(
    params: ProtocolParams, size: int, ex_units: Iterable[tuple[int, int]], ref_script_size: int
) -> int:
    mem = steps = 0
    for m, s in ex_units:
        mem += m
        steps += s
    return (
        params.min_fee_a * size
        + params.min_fee_b
        + script_fee(params, mem, steps)
        + ref_script_fee(params, ref_script_size)
    )


def min_ada(params: ProtocolParams, output_size: int) -> int:
    """Least lovelace an output of `output_size` serialized bytes must hold."""
    return (OUTPUT_OVERHEAD_BYTES + output_size) * params.coins_per_utxo_size


def min_collateral(params: ProtocolParams, fee: int) -> int:
    return math.ceil(fee * params.collateral_percent / 100) if fee else 0
