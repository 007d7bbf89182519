"""Hostile JSON is recognised before any parser sees it (`proofnet.json_limits`): nesting
past the limit, integers past 64 bits, numbers that overflow, NaN and Infinity; the same
text inside strings is data and passes, and so does every honest body."""

from __future__ import annotations

import json
import math

import pytest

from proofnet.json_limits import MAX_DEPTH, body_refusal, value_refusal

HONEST = [
    b'{"spec": {"resources": {"gpus": 1}}, "seed": 18446744073709551615}',
    b'{"low": -9223372036854775808, "ratio": 1.5e10, "small": 2e-300}',
    json.dumps({"text": "[[[[" * 100 + "NaN Infinity 99999999999999999999999"}).encode(),
    b"[" * MAX_DEPTH + b"]" * MAX_DEPTH,
    b'"a string with \\" an escaped quote and [ brackets"',
]
HOSTILE = {
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "deep objects": b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1),
    "one level too deep": b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
    "int past 64 bits": b'{"amount": 18446744073709551616}',
    "negative past 64 bits": b'{"amount": -9223372036854775809}',
    "huge int": b"[" + b"9" * 5000 + b"]",
    "overflowing float": b'{"x": 1e400}',
    "NaN": b'{"loss": NaN}',
    "Infinity": b'{"loss": -Infinity}',
}


@pytest.mark.parametrize("body", HONEST)
def test_honest_json_passes(body: bytes) -> None:
    assert body_refusal(body) is None
    assert value_refusal(json.loads(body)) is None


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_json_is_refused(name: str) -> None:
    assert body_refusal(HOSTILE[name]) is not None, name


def test_parsed_values_are_checked_the_same_way() -> None:
    nested: object = 1
    for _ in range(MAX_DEPTH + 1):
        nested = [nested]
    assert value_refusal(nested) is not None
    assert value_refusal({"a": 2**64}) is not None
    assert value_refusal({"a": 2**64 - 1, "b": -(2**63)}) is None
    assert value_refusal({"a": math.nan}) is not None
    assert value_refusal({"a": list(range(20))}, max_nodes=10) is not None
    assert value_refusal({"a": b"bytes"}) is not None
