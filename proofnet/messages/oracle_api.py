"""The oracle's HTTP interface as workers use it: where attestations go and how they travel.

A worker POSTs the COSE_Sign1 bytes of a signed attestation (`proofnet.messages.attestation`)
as the raw request body with content type `application/cose`; the oracle answers 2xx once it
has durably accepted it (a repeat of an accepted attestation is also a 2xx), 4xx when it
refuses it for good, 5xx or 429 when the worker should retry later.
"""

from __future__ import annotations

from typing import Final

ATTESTATIONS_PATH: Final = "/api/v1/attestations"
COSE_CONTENT_TYPE: Final = "application/cose"
# An attestation with 256 result names of 512 characters fits well inside this.
MAX_ATTESTATION_BYTES: Final = 512 * 1024
