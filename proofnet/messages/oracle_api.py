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
# The wire format's ceiling (256 result names of 512 characters fit well inside it). Each
# oracle takes less: PROOFNET_ORACLE_MAX_ATTESTATION_BYTES, 128 KiB by default (413 beyond).
MAX_ATTESTATION_BYTES: Final = 512 * 1024
