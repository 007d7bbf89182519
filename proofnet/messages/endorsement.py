"""The text a senior member's wallet signs (CIP-8, CIP-30 `signData`) to endorse an
applicant: defined once, built by the API to check signatures and by clients to check what
the API asks them to sign."""

from __future__ import annotations


def endorsement_message(*, network: str, applicant_address: str, application_id: int) -> str:
    # Domain-separated so that a sign-in signature (or an endorsement of someone else, or on
    # another network) can never count as this endorsement.
    return (
        "proofnet endorsement v1\n"
        f"network: {network}\n"
        f"applicant: {applicant_address}\n"
        f"application: {application_id}\n"
        "I vouch that this applicant may submit training jobs."
    )
