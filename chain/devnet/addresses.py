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


def stake_credential(address: bytes) -> Credential | None:
    """The stake credential of a base address (kinds 0-3); None for any other address."""
    kind = address[0] >> 4
    if kind > 3 or len(address) != 57:
        return None
    return bytes([(kind >> 1) & 1]) + address[29:57]


def payment_credential_from_bech32(text: str) -> Credential | None:
    """`addr_vkh1...` (key hash) or `script1...` (script hash) as a credential, else None."""
    if not text.startswith(("addr_vkh1", "script1")):
        return None
    try:
        decoded = bech32.decode(text)
    except Exception:  # the codec raises assorted errors on bad input
        return None
    if decoded is None or len(decoded) != 28:
        return None
    return bytes([SCRIPT if text.startswith("script") else KEY]) + bytes(decoded)


# A DRep a stake credential delegates to, as one bytes key: 0x00 + key hash, 0x01 + script
# hash, 0x02 always abstain, 0x03 always no confidence (the ledger's `drep` tags).
DRep = bytes
ALWAYS_ABSTAIN = b"\x02"
ALWAYS_NO_CONFIDENCE = b"\x03"


def drep_from_cbor(value: object) -> DRep | None:
    """[0, keyhash] / [1, scripthash] / [2] / [3] as a DRep key, None when malformed."""
    if isinstance(value, list) and value in ([2], [3]):
        return bytes([value[0]])
    cred = credential_from_cbor(value)
    return cred


def drep_id_text(drep: DRep) -> str:
    """Blockfrost's drep_id: CIP-129 bech32 for credentials, names for the two defaults."""
    if drep == ALWAYS_ABSTAIN:
        return "drep_always_abstain"
    if drep == ALWAYS_NO_CONFIDENCE:
        return "drep_always_no_confidence"
    header = 0x23 if drep[0] == SCRIPT else 0x22
    return bech32.encode("drep", bytes([header]) + drep[1:])


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
