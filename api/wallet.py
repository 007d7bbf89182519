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
    bech32: str
    payment_key_hash: str


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


def verify_sign_data(signature: str, key: str) -> WalletSignature:
    """Verify a CIP-30 `signData` result (COSE_Sign1 hex + COSE_Key hex).

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
    # cip8.verify only ties the key to the header address; require a payment credential so
    # a stake-key signature can never stand in for the payment key.
    if signing_address.payment_part is None or signing_address.payment_part.payload.hex() != (
        key_hash
    ):
        raise Unauthorized("wallet signature was not made with a payment key")
    return WalletSignature(message=result["message"], key_hash=key_hash)
