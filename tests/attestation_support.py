"""A provider-signed attestation as bond slashes cite it: one builder for the bond tests.

The fields other than the job, the Merkle root, the escrow and the key are fixed: a slash
cites the attestation by job id, root and the provider's signature, so those are what the
attacks vary.
"""

from __future__ import annotations

from nacl.signing import SigningKey

from proofnet.messages.address import enterprise_address
from proofnet.messages.attestation import (
    Attestation,
    AttestationDomain,
    EscrowRef,
    sign_attestation,
)

DEFAULT_ESCROW = EscrowRef(tx_id="ef" * 32, index=0)


def signed_attestation(
    key: SigningKey,
    job_id: bytes,
    root: bytes,
    *,
    escrow_script_hash: str = "ab" * 28,
    escrow: EscrowRef | None = None,
) -> bytes:
    """The COSE bytes of a one-minute H100 attestation for `job_id` committing `root`."""
    vk = bytes(key.verify_key)
    att = Attestation(
        domain=AttestationDomain(
            network="devnet",
            escrow_script_hash=escrow_script_hash,
            escrow=escrow or DEFAULT_ESCROW,
            job_id=job_id.hex(),
        ),
        worker_key=vk.hex(),
        payout_address=enterprise_address(vk, "devnet"),
        started_ms=1_000,
        ended_ms=61_000,
        gpu_milliseconds=60_000,
        gpu_model="NVIDIA H100",
        gpu_uuid_sha256="f" * 64,
        image_digest="sha256:" + "d" * 64,
        command_hash="e" * 64,
        result_hashes={"metrics.json": "a" * 64},
        pot_root=root.hex(),
        metrics={"loss": "0.25"},
        nonce="ab" * 16,
        amount=1_000_000,
    )
    return sign_attestation(att, key).cose
