"""Address bytes: credentials, networks, and bech32 text."""

from __future__ import annotations

from functools import lru_cache

from pycardano import Address
from pycardano.crypto import bech32

# A stake or payment credential as one bytes key: 0x00 + key hash or 0x01 + script hash.
Credential = bytes
KEY = 0
SCRIPT = 1


def is_byron(address: bytes) -> bool:
    return address[0] >> 4 == 8


def payment_credential(address: bytes) -> Credential | None:
    """The payment credential of a Shelley address; None for Byron and reward addresses."""
    kind = address[0] >> 4
    if kind > 7 or len(address) < 29:
        return None
    return bytes([kind & 1]) + address[1:29]


def address_network(address: bytes) -> int | None:
    """Network id of a Shelley address (None for Byron, whose network sits in attributes)."""
    return None if is_byron(address) else address[0] & 0x0F


def reward_credential(account: bytes) -> Credential | None:
    """Stake credential of a 29-byte reward account, or None when it is not one."""
    kind = account[0] >> 4
    if kind not in (14, 15) or len(account) != 29:
        return None
    return bytes([SCRIPT if kind == 15 else KEY]) + account[1:]


def credential_from_cbor(value: object) -> Credential | None:
    """[0, keyhash] / [1, scripthash] as a credential key."""
    if (
        isinstance(value, list)
        and len(value) == 2
        and value[0] in (KEY, SCRIPT)
        and isinstance(value[1], bytes)
        and len(value[1]) == 28
    ):
        return bytes([value[0]]) + value[1]
    return None


def reward_account(credential: Credential, network_id: int) -> bytes:
    return bytes([(0xF0 if credential[0] == SCRIPT else 0xE0) | network_id]) + credential[1:]


def reward_account_order(account: bytes) -> tuple[int, int, bytes]:
    """Haskell's Ord on RewardAccount: network, then ScriptHashObj before KeyHashObj."""
    return (account[0] & 0x0F, 0 if account[0] >> 4 == 15 else 1, account[1:])


@lru_cache(maxsize=65536)
def address_text(address: bytes) -> str:
    """bech32 (Shelley) or base58 (Byron) text of raw address bytes."""
    kind = address[0] >> 4
    testnet = (address[0] & 0x0F) == 0
    if kind in (14, 15):
        return bech32.encode("stake_test" if testnet else "stake", address)
    if kind <= 7:
        return bech32.encode("addr_test" if testnet else "addr", address)
    return str(Address.from_primitive(address))


def address_bytes(text: str) -> bytes:
    """Raw bytes of a bech32 or base58 address; ValueError when it is not an address."""
    try:
        if text.startswith(("stake", "addr")):
            decoded = bech32.decode(text)
            if decoded is None:
                raise ValueError("bad bech32")
            return bytes(decoded)
        return bytes(Address.from_primitive(text).to_primitive())
    except Exception as exc:
        raise ValueError(f"not a Cardano address: {text!r:.120}") from exc
