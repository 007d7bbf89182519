"""Cardano wallet addresses and CIP-8 / CIP-30 `signData` signatures."""

from __future__ import annotations

from dataclasses import dataclass

import cbor2
from pycardano import Address, Network, PaymentVerificationKey, VerificationKeyHash
from pycardano.cip import cip8

from api.errors import BadRequest, Unauthorized

# COSE_Key label of an OKP public key (RFC 8152 section 13.2).
_COSE_OKP_X = -2


@dataclass(frozen=True)
class WalletAddress:
    """An address a wallet signs for. `payment_key_hash` is the key its signatures must be
    made with: the payment key of a payment address; for a stake address, the stake key
    (`credential` "stake")."""

    bech32: str
    payment_key_hash: str
    credential: str = "payment"


@dataclass(frozen=True)
class WalletSignature:
    """What a verified `signData` result proves: this key hash signed exactly `message`."""

    message: str
    key_hash: str


def parse_wallet_address(address: str, network: str) -> WalletAddress:
    """A bech32 Shelley address on `network` whose payment credential is a key (it can sign)."""
    if not address.startswith(("addr1", "addr_test1")):
        raise BadRequest("address must be a bech32 payment address (addr1... or addr_test1...)")
    try:
        parsed = Address.from_primitive(address)
    except Exception as e:  # pycardano raises several unrelated types for bad input
        raise BadRequest(f"not a valid Cardano address: {address[:24]!r}") from e
    want = Network.MAINNET if network == "mainnet" else Network.TESTNET
    if parsed.network != want:
        raise BadRequest(f"address is for {parsed.network.name.lower()}, this API runs {network}")
    if not isinstance(parsed.payment_part, VerificationKeyHash):
        raise BadRequest("address payment credential must be a key, not a script")
    return WalletAddress(bech32=address, payment_key_hash=parsed.payment_part.payload.hex())


def parse_sign_in_address(address: str, network: str) -> WalletAddress:
    """What a wallet may sign in as: a payment address (signed with its payment key), or a
    stake address (signed with its stake key). A stake address's session proves that stake
    key, and so may read that stake credential's balance; a payment address's session
    proves only its payment key, whatever staking part the address names."""
    if not address.startswith(("stake1", "stake_test1")):
        return parse_wallet_address(address, network)
    try:
        parsed = Address.from_primitive(address)
    except Exception as e:  # pycardano raises several unrelated types for bad input
        raise BadRequest(f"not a valid Cardano stake address: {address[:24]!r}") from e
    want = Network.MAINNET if network == "mainnet" else Network.TESTNET
    if parsed.network != want:
        raise BadRequest(f"address is for {parsed.network.name.lower()}, this API runs {network}")
    if parsed.payment_part is not None or not isinstance(parsed.staking_part, VerificationKeyHash):
        raise BadRequest("a stake address must name a stake key (not a script)")
    return WalletAddress(address, parsed.staking_part.payload.hex(), credential="stake")


def verify_sign_data(signature: str, key: str, *, credential: str = "payment") -> WalletSignature:
    """Verify a CIP-30 `signData` result (COSE_Sign1 hex + COSE_Key hex) made with a
    payment key (or, with `credential="stake"`, a stake key signing for a stake address).

    Raises Unauthorized when the signature does not verify or is malformed.
    """
    try:
        result = cip8.verify({"signature": signature, "key": key}, attach_cose_key=True)
        public_key = cbor2.loads(bytes.fromhex(key))[_COSE_OKP_X]
        key_hash = PaymentVerificationKey.from_primitive(public_key).hash().payload.hex()
    except Exception as e:  # cip8/cose raise assorted types (even AssertionError) on bad input
        raise Unauthorized(f"malformed wallet signature: {type(e).__name__}") from e
    if not result["verified"]:
        raise Unauthorized("wallet signature does not verify")
    signing_address = result["signing_address"]
    # cip8.verify only ties the key to the header address; require the credential asked
    # for, so a stake-key signature never stands in for the payment key, nor the reverse.
    if credential == "stake":
        part, other = signing_address.staking_part, signing_address.payment_part
        what = "a stake key"
    else:
        part, other = signing_address.payment_part, None
        what = "a payment key"
    if part is None or other is not None or part.payload.hex() != key_hash:
        raise Unauthorized(f"wallet signature was not made with {what}")
    return WalletSignature(message=result["message"], key_hash=key_hash)
