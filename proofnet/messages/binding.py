"""The payout binding: a worker's Ed25519 signature tying its key to a Cardano payout address.

Defined here, not in `worker/`, because the API verifies what the worker signs and neither role
imports the other. The signed bytes are domain-separated canonical JSON, so a binding signature
can never be replayed as any other proofnet signature, on another network, or for another
registration challenge (the nonce is issued by the API and used once).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from proofnet.messages.address import AddressError, payment_address_bytes
from proofnet.messages.canonical import canonical_json

BINDING_DOMAIN: Final = "proofnet/worker-binding/v1"

BindingNetwork = Literal["devnet", "preprod", "preview", "mainnet"]
NETWORKS: Final[tuple[str, ...]] = ("devnet", "preprod", "preview", "mainnet")

_HEX_PUBKEY = re.compile(r"^[0-9a-f]{64}$")
# 16..64 random bytes: enough to be unguessable, short enough to log.
_HEX_NONCE = re.compile(r"^[0-9a-f]{32,128}$")


class BindingError(ValueError):
    """A binding is malformed, or does not verify against what the verifier expects."""


def worker_key_id(public_key: bytes) -> str:
    """Blake2b-224 of the raw public key: the same hash Cardano uses for key credentials."""
    if len(public_key) != 32:
        raise BindingError(f"an Ed25519 public key is 32 bytes, got {len(public_key)}")
    return hashlib.blake2b(public_key, digest_size=28).hexdigest()


def validate_payout_address(payout_address: str, network: str) -> None:
    """Raise BindingError unless `payout_address` is a bech32 Shelley address able to receive
    payments (it has a payment credential) on `network`."""
    if network not in NETWORKS:
        raise BindingError(f"unknown network {network!r}; expected one of {', '.join(NETWORKS)}")
    try:
        payment_address_bytes(payout_address, network)
    except AddressError as e:
        raise BindingError(f"payout address is not a {network} payment address: {e}") from e


def _check_fields(network: str, worker_pubkey: str, payout_address: str, nonce: str) -> None:
    if network not in NETWORKS:
        raise BindingError(f"unknown network {network!r}; expected one of {', '.join(NETWORKS)}")
    if not _HEX_PUBKEY.match(worker_pubkey):
        raise BindingError("worker_pubkey must be 64 lowercase hex characters")
    if not _HEX_NONCE.match(nonce):
        raise BindingError("nonce must be 32 to 128 lowercase hex characters")
    validate_payout_address(payout_address, network)


def binding_message(network: str, worker_pubkey: str, payout_address: str, nonce: str) -> bytes:
    """The exact bytes a worker signs: canonical JSON (RFC 8785, as every signed message)."""
    _check_fields(network, worker_pubkey, payout_address, nonce)
    body = {
        "domain": BINDING_DOMAIN,
        "network": network,
        "nonce": nonce,
        "payout_address": payout_address,
        "worker_pubkey": worker_pubkey,
    }
    return canonical_json(body)


class PayoutBinding(BaseModel):
    """A signed statement "pay the work of `worker_pubkey` to `payout_address` on `network`"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    domain: Literal["proofnet/worker-binding/v1"] = BINDING_DOMAIN
    network: BindingNetwork
    worker_pubkey: str = Field(pattern=r"^[0-9a-f]{64}$")
    payout_address: str = Field(min_length=10, max_length=200)
    nonce: str = Field(pattern=r"^[0-9a-f]{32,128}$")
    signature: str = Field(pattern=r"^[0-9a-f]{128}$")

    def message(self) -> bytes:
        return binding_message(self.network, self.worker_pubkey, self.payout_address, self.nonce)

    @property
    def key_id(self) -> str:
        return worker_key_id(bytes.fromhex(self.worker_pubkey))


def verify_payout_binding(
    binding: PayoutBinding,
    *,
    network: str,
    nonce: str,
    payout_address: str | None = None,
    worker_pubkey: str | None = None,
) -> None:
    """Raise BindingError unless `binding` is a valid signature for the verifier's own
    expectations: its network, the nonce it issued, and optionally the address and key it was
    told about. Returns None on success so a forgotten check cannot read as a pass."""
    if binding.network != network:
        raise BindingError(f"binding is for network {binding.network!r}, expected {network!r}")
    if not hmac.compare_digest(binding.nonce, nonce):
        raise BindingError("binding nonce does not match the challenge issued")
    if payout_address is not None and binding.payout_address != payout_address:
        raise BindingError("binding is for a different payout address")
    if worker_pubkey is not None and binding.worker_pubkey != worker_pubkey:
        raise BindingError("binding is signed by a different worker key")
    message = binding.message()  # re-validates every field, the address included
    # PyNaCl imported here so that modules only reading bindings do not need libsodium.
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    try:
        VerifyKey(bytes.fromhex(binding.worker_pubkey)).verify(
            message, bytes.fromhex(binding.signature)
        )
    except BadSignatureError as e:
        raise BindingError("binding signature does not verify") from e
    except ValueError as e:  # libsodium rejects some 32-byte strings as public keys
        raise BindingError(f"worker_pubkey is not a usable Ed25519 key: {e}") from e
