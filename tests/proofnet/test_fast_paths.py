"""The verification fast paths decide exactly what the plain code decides.

- `parse_canonical_json` confirms canonical bytes through orjson when it can; it must accept
  and refuse exactly what the reference (json.loads, then re-encode with `canonical_json`)
  does.
- bech32 decoding uses a table-driven checksum and a big-integer regrouping; both must
  agree with the reference loops.
- `payment_address_bytes` caches accepted addresses; a refused one is never cached.
"""

from __future__ import annotations

import contextlib
import json
import random
from typing import Any

import pytest
from nacl.signing import SigningKey

from pot import canonical
from proofnet.messages import address as address_module
from proofnet.messages.address import (
    AddressError,
    bech32_decode,
    bech32_encode,
    clear_address_cache,
    enterprise_address,
    payment_address_bytes,
)
from proofnet.messages.canonical import CanonicalJSONError, canonical_json, parse_canonical_json


def _reference_accepts(data: bytes) -> bool:
    """The check without any fast path: parse, re-encode, compare."""
    try:
        value = json.loads(
            data.decode("utf-8"),
            parse_float=canonical._reject_float,
            parse_constant=canonical._reject_float,
        )
        return canonical_json(value) == data
    except (UnicodeDecodeError, json.JSONDecodeError, CanonicalJSONError):
        return False


def _accepts(data: bytes) -> bool:
    try:
        parse_canonical_json(data)
    except CanonicalJSONError:
        return False
    return True


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"1" + b"]" * depth


CASES: list[bytes] = [
    b'{"a":1,"b":[2]}',
    b'{"b":1,"a":2}',  # unsorted
    b'{"a":1,"a":1}',  # duplicate key
    b'{"a": 1}',  # whitespace
    b'{"a":1.0}',
    b'{"a":1e3}',
    b'{"a":NaN}',
    b'{"a":-0}',
    b'{"a":01}',
    b'{"a":true,"b":false,"c":null}',
    b"[]",
    b"{}",
    b'""',
    b'"\\u0000\\u001f\\b\\t\\n\\f\\r\\"\\\\"',
    b'"\\u001F"',  # uppercase hex escape: not canonical
    b'"\\u0008"',  # long form where a short form exists
    b'"\\/"',  # escaped solidus
    b'"\\u0041"',  # escaped ASCII letter
    b'"\\u00e9"',  # escaped non-ASCII: canonical writes it raw
    '"é"'.encode(),
    '{"é":1,"z":2}'.encode(),
    '{"z":2,"é":1}'.encode(),
    '{"\U0001f600":1,"\ufb01":2}'.encode(),  # UTF-16 order differs from code points
    '{"\ufb01":2,"\U0001f600":1}'.encode(),
    b'"\\ud800"',  # lone surrogate
    b'"\\ud83d\\ude00"',  # escaped pair: canonical writes the character raw
    b'"\x7f"',
    b'"\x1f"',  # raw control character is not valid JSON
    str(2**64 - 1).encode(),
    str(2**64).encode(),
    str(-(2**63)).encode(),
    str(-(2**63) - 1).encode(),
    b"12345678901234567890123456789012345678901234567890",
    _nested(32),
    _nested(33),
    b'{"a":' * 16 + b"[" * 16 + b"1" + b"]" * 16 + b"}" * 16,
    b'{"a":' * 16 + b"[" * 17 + b"1" + b"]" * 17 + b"}" * 16,
    b'{"k":"' + b"[" * 40 + b'"}',  # brackets inside a string
    b"\xef\xbb\xbf{}",  # BOM
    b"\xff",
    b'{"a":1}\n',
]


@pytest.mark.parametrize("data", CASES)
def test_canonical_parse_matches_the_reference(data: bytes) -> None:
    assert _accepts(data) == _reference_accepts(data)


def test_canonical_parse_matches_the_reference_on_random_documents() -> None:
    rng = random.Random(20240611)
    alphabet = [chr(c) for c in range(0x80)] + ["é", "\u2028", "\ufb01", "\U0001f600"]

    def text() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 6)))

    def value(depth: int) -> Any:
        kind = rng.randrange(7 if depth < 5 else 4)
        if kind == 0:
            return rng.choice([0, 1, -1, 2**63 - 1, 2**64 - 1, -(2**63), rng.getrandbits(70)])
        if kind == 1:
            return text()
        if kind == 2:
            return rng.choice([True, False, None])
        if kind == 3:
            return rng.randrange(-1000, 1000)
        if kind == 4:
            return [value(depth + 1) for _ in range(rng.randrange(0, 4))]
        return {text(): value(depth + 1) for _ in range(rng.randrange(0, 4))}

    seen = {True: 0, False: 0}
    for _ in range(3000):
        doc = value(0)
        candidates = [json.dumps(doc, ensure_ascii=rng.random() < 0.3).encode()]
        with contextlib.suppress(CanonicalJSONError):
            candidates.append(canonical_json(doc))
        for data in candidates:
            accepted = _accepts(data)
            assert accepted == _reference_accepts(data), data
            seen[accepted] += 1
    assert seen[True] > 500 and seen[False] > 500


def test_canonical_parse_without_orjson_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    with_fast = {data: _accepts(data) for data in CASES}
    monkeypatch.setattr(canonical, "_orjson", None)
    assert {data: _accepts(data) for data in CASES} == with_fast


def test_canonical_parse_returns_the_value_and_names_the_fault() -> None:
    assert parse_canonical_json(b'{"a":[1,"x",null]}') == {"a": [1, "x", None]}
    with pytest.raises(CanonicalJSONError, match="not in canonical form"):
        parse_canonical_json(b'{"b":1,"a":2}')
    with pytest.raises(CanonicalJSONError, match="floats"):
        parse_canonical_json(b'{"a":1.5}')
    with pytest.raises(CanonicalJSONError, match="deeper"):
        parse_canonical_json(_nested(33))


# --- bech32 -------------------------------------------------------------------------------


def _reference_polymod(values: list[int]) -> int:
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for i in range(5):
            chk ^= address_module._GEN[i] if (top >> i) & 1 else 0
    return chk


def test_bech32_helpers_match_the_reference_loops() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        values = [rng.randrange(32) for _ in range(rng.randrange(0, 120))]
        assert address_module._polymod(values) == _reference_polymod(values)
        try:
            expected: bytes | None = bytes(address_module._convert_bits(values, 5, 8, pad=False))
        except AddressError:
            expected = None
        try:
            got: bytes | None = address_module._five_to_bytes(values)
        except AddressError:
            got = None
        assert got == expected


def test_bech32_round_trip_and_refusals() -> None:
    payload = bytes(range(29))
    text = bech32_encode("addr_test", payload)
    assert bech32_decode(text) == ("addr_test", payload)
    flipped = text[:-1] + ("q" if text[-1] != "q" else "p")
    with pytest.raises(AddressError, match="checksum"):
        bech32_decode(flipped)
    with pytest.raises(AddressError, match="alphabet"):
        bech32_decode(text[:-3] + "b" + text[-2:])  # 'b' is not in the bech32 alphabet


# --- the address cache --------------------------------------------------------------------


def _address(network: str = "preprod") -> str:
    return enterprise_address(bytes(SigningKey.generate().verify_key), network)


def test_invalid_address_is_refused_after_a_valid_one_was_cached() -> None:
    clear_address_cache()
    good = _address()
    raw = payment_address_bytes(good, "preprod")
    assert payment_address_bytes(good, "preprod") == raw  # second answer from the cache
    assert address_module._payment_address_bytes_cached.cache_info().hits >= 1
    corrupted = good[:-1] + ("q" if good[-1] != "q" else "p")
    for _ in range(2):  # refused every time: errors are never cached
        with pytest.raises(AddressError):
            payment_address_bytes(corrupted, "preprod")
    assert payment_address_bytes(good, "preprod") == raw


def test_cached_address_is_still_checked_against_the_network() -> None:
    clear_address_cache()
    testnet = _address("preprod")
    payment_address_bytes(testnet, "preprod")
    payment_address_bytes(testnet, "devnet")  # every test network shares the prefix
    for _ in range(2):
        with pytest.raises(AddressError, match="prefix"):
            payment_address_bytes(testnet, "mainnet")
    mainnet = _address("mainnet")
    payment_address_bytes(mainnet, "mainnet")
    with pytest.raises(AddressError):
        payment_address_bytes(mainnet, "preprod")


def test_refused_address_leaves_no_cache_entry() -> None:
    clear_address_cache()
    with pytest.raises(AddressError):
        payment_address_bytes("addr_test1notanaddress", "preprod")
    assert address_module._payment_address_bytes_cached.cache_info().currsize == 0


def test_attestation_with_a_corrupted_address_is_refused_after_the_good_one() -> None:
    from proofnet.messages.attestation import (
        Attestation,
        AttestationDomain,
        EscrowRef,
        MalformedAttestation,
        attestation_from_dict,
    )

    clear_address_cache()
    good = _address("devnet")
    att = Attestation(
        domain=AttestationDomain(
            network="devnet",
            escrow_script_hash="a" * 56,
            escrow=EscrowRef(tx_id="b" * 64, index=0),
            job_id="c" * 64,
        ),
        worker_key="d" * 64,
        payout_address=good,
        started_ms=1,
        ended_ms=2,
        gpu_milliseconds=1,
        gpu_model="GPU",
        gpu_uuid_sha256="e" * 64,
        image_digest="sha256:" + "f" * 64,
        command_hash="0" * 64,
        result_hashes={},
        pot_root="1" * 64,
        metrics={},
        nonce="2" * 32,
        amount=1,
    )
    data = att.model_dump(mode="python")
    assert attestation_from_dict(data) == att
    data["payout_address"] = good[:-1] + ("q" if good[-1] != "q" else "p")
    with pytest.raises(MalformedAttestation, match="payout_address"):
        attestation_from_dict(data)


def test_fast_path_confirms_typical_canonical_documents() -> None:
    if canonical._orjson is None:
        pytest.skip("orjson is not installed; the full check runs instead")
    doc = {"b": [1, "x\n\u001f", None, True], "a": {"z": 2**64 - 1, "y": -(2**63)}}
    data = canonical_json(doc)
    assert canonical._canonical_fast(json.loads(data), data)
    assert not canonical._canonical_fast(json.loads(data), data + b" ")
