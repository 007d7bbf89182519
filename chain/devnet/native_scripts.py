"""Evaluation of native (timelock) scripts, as the Allegra+ ledger defines them."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from chain.devnet.errors import MalformedTransaction

_MAX_DEPTH = 64


def evaluate_native(
    script: Any,
    signers: Set[bytes],
    invalid_before: int | None,
    invalid_hereafter: int | None,
    depth: int = 0,
) -> bool:
    """True when `script` (decoded CBOR) holds for the given key hashes and validity interval.

    `invalid_before` / `invalid_hereafter` are the transaction's own interval bounds: a
    timelock holds when the interval lies entirely inside the script's bounds, whatever the
    current slot.
    """
    if depth > _MAX_DEPTH:
        raise MalformedTransaction("native script nests too deeply")
    if not isinstance(script, list) or not script or not isinstance(script[0], int):
        raise MalformedTransaction(f"native script must be [type, ...], got {script!r:.80}")
    kind = script[0]
    if kind == 0 and len(script) == 2 and isinstance(script[1], bytes):
        return script[1] in signers
    if kind in (1, 2) and len(script) == 2 and isinstance(script[1], list):
        results = (
            evaluate_native(sub, signers, invalid_before, invalid_hereafter, depth + 1)
            for sub in script[1]
        )
        return all(results) if kind == 1 else any(results)
    if kind == 3 and len(script) == 3 and isinstance(script[1], int):
        needed = script[1]
        if not isinstance(script[2], list):
            raise MalformedTransaction("n-of-k native script needs a list of scripts")
        held = 0
        for sub in script[2]:
            if evaluate_native(sub, signers, invalid_before, invalid_hereafter, depth + 1):
                held += 1
                if held >= needed:
                    return True
        return held >= needed
    if kind == 4 and len(script) == 2 and isinstance(script[1], int):
        return invalid_before is not None and script[1] <= invalid_before
    if kind == 5 and len(script) == 2 and isinstance(script[1], int):
        return invalid_hereafter is not None and invalid_hereafter <= script[1]
    raise MalformedTransaction(f"unknown native script {script!r:.80}")
