"""Cardano addresses as the messages need them: bech32 checks and key-hash-bound bytes.

Implemented here (BIP-173 bech32, CIP-19 headers) rather than through pycardano so that
verifying an attestation does not import the whole of pycardano, and stays fast.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_CHARSET_VALUES = {c: i for i, c in enumerate(_CHARSET)}
_GEN = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
# _GEN_XOR[top]: the XOR of the generator terms selected by the 5 bits of `top`.
_GEN_XOR = tuple(
    _GEN[0] * (t & 1)
    ^ _GEN[1] * (t >> 1 & 1)
    ^ _GEN[2] * (t >> 2 & 1)
    ^ _GEN[3] * (t >> 3 & 1)
    ^ _GEN[4] * (t >> 4 & 1)
    for t in range(32)
)
# CIP-19: Cardano addresses exceed BIP-173's 90 characters; 108 covers every payment address.
_MAX_LEN = 130

MAINNET_ID = 1
TESTNET_ID = 0


class AddressError(ValueError):
    """Not a well-formed Cardano payment address for the expected network."""


def _polymod(values: list[int]) -> int:
    chk = 1
    for v in values:
        chk = (chk & 0x1FFFFFF) << 5 ^ v ^ _GEN_XOR[chk >> 25]
    return chk


def _hrp_expand(hrp: str) -> list[int]:
    return [ord(x) >> 5 for x in hrp] + [0] + [ord(x) & 31 for x in hrp]


def _convert_bits(data: list[int], frombits: int, tobits: int, pad: bool) -> list[int]:
    acc = bits = 0
    out: list[int] = []
    maxv = (1 << tobits) - 1
    for value in data:
        acc = (acc << frombits) | value
        bits += frombits
        while bits >= tobits:
            bits -= tobits
            out.append((acc >> bits) & maxv)
    if pad:
        if bits:
            out.append((acc << (tobits - bits)) & maxv)
    elif bits >= frombits or ((acc << (tobits - bits)) & maxv):
        raise AddressError("bech32 data has invalid padding")
    return out


def bech32_decode(text: str) -> tuple[str, bytes]:
    if not 8 <= len(text) <= _MAX_LEN:
        raise AddressError(f"bech32 string has bad length {len(text)}")
    if text.lower() != text:
        raise AddressError("bech32 string must be lowercase")
    pos = text.rfind("1")
    if pos < 1 or pos + 7 > len(text):
        raise AddressError("bech32 separator '1' missing or misplaced")
    hrp, data_part = text[:pos], text[pos + 1 :]
    if any(not 33 <= ord(c) <= 126 for c in hrp):
        raise AddressError("bech32 prefix has invalid characters")
    try:
        data = [_CHARSET_VALUES[c] for c in data_part]
    except KeyError as exc:
        raise AddressError("bech32 data has a character outside the alphabet") from exc
    if _polymod(_hrp_expand(hrp) + data) != 1:
        raise AddressError("bech32 checksum mismatch")
    return hrp, _five_to_bytes(data[:-6])


def _five_to_bytes(data: list[int]) -> bytes:
    """`bytes(_convert_bits(data, 5, 8, pad=False))` through one big integer."""
    acc = 0
    for value in data:
        acc = acc << 5 | value
    bits = 5 * len(data)
    spare = bits % 8
    if spare >= 5 or acc & ((1 << spare) - 1):
        raise AddressError("bech32 data has invalid padding")
    return (acc >> spare).to_bytes(bits // 8, "big")


def bech32_encode(hrp: str, payload: bytes) -> str:
    data = _convert_bits(list(payload), 8, 5, pad=True)
    polymod = _polymod(_hrp_expand(hrp) + data + [0] * 6) ^ 1
    checksum = [(polymod >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(_CHARSET[d] for d in data + checksum)


def network_id(network: str) -> int:
    return MAINNET_ID if network == "mainnet" else TESTNET_ID


def payment_address_bytes(address: str, network: str) -> bytes:
    """Decode a bech32 payment address and check it belongs to `network`.

    Accepts base, pointer and enterprise addresses (CIP-19 types 0-7); reward (stake)
    addresses and Byron addresses cannot receive a payout from the escrow.

    Results for addresses that passed are cached per (address, network): payout addresses
    repeat, one per worker. A refused address is never cached, so it is checked (and
    refused) again on every call.
    """
    if type(address) is str and type(network) is str:
        return _payment_address_bytes_cached(address, network)
    return _payment_address_bytes(address, network)


@lru_cache(maxsize=16384)
def _payment_address_bytes_cached(address: str, network: str) -> bytes:
    # lru_cache stores return values only: an AddressError propagates and leaves no entry.
    return _payment_address_bytes(address, network)


def clear_address_cache() -> None:
    """Forget the addresses `payment_address_bytes` has accepted (benchmarks, tests)."""
    _payment_address_bytes_cached.cache_clear()


def _payment_address_bytes(address: str, network: str) -> bytes:
    hrp, raw = bech32_decode(address)
    expected_hrp = "addr" if network == "mainnet" else "addr_test"
    if hrp != expected_hrp:
        raise AddressError(f"address prefix {hrp!r} is not {expected_hrp!r} for {network}")
    if not raw:
        raise AddressError("address is empty")
    kind, net = raw[0] >> 4, raw[0] & 0x0F
    if kind > 7:
        raise AddressError(f"address type {kind} is not a payment address")
    if net != network_id(network):
        raise AddressError(f"address network id {net} does not match {network}")
    expected_len = {0: 57, 1: 57, 2: 57, 3: 57, 6: 29, 7: 29}.get(kind)
    if expected_len is not None and len(raw) != expected_len:
        raise AddressError(f"address of type {kind} must be {expected_len} bytes, got {len(raw)}")
    if kind in (4, 5) and len(raw) < 32:
        raise AddressError("pointer address is too short")
    return raw


def key_hash(verification_key: bytes) -> bytes:
    """Blake2b-224 of an Ed25519 public key: Cardano's key hash."""
    return hashlib.blake2b(verification_key, digest_size=28).digest()


def enterprise_address_bytes(verification_key: bytes, network: str) -> bytes:
    """CIP-19 type-6 address (payment key hash, no stake part): CIP-8's `address` header."""
    return bytes([0x60 | network_id(network)]) + key_hash(verification_key)


def enterprise_address(verification_key: bytes, network: str) -> str:
    hrp = "addr" if network == "mainnet" else "addr_test"
    return bech32_encode(hrp, enterprise_address_bytes(verification_key, network))
