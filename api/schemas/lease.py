from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from api.schemas.common import PublicBody, RequestBody
from proofnet.messages.claim import Claim, LeaseAnswer
from proofnet.messages.destinations import MAX_DESTINATIONS, DeliveryReport


class ClaimAccepts(RequestBody):
    """The kinds of work beyond a plain job or relay unit that the claiming worker can run.

    Unknown kinds are ignored rather than refused: a newer worker may name kinds this API
    does not hand out yet, and ignoring them never gives a worker work it cannot run."""

    model_config = ConfigDict(extra="ignore")

    # Nodes of multi-node jobs: they need the host's network, which a worker may not allow.
    # Absent means no: a worker that does not say so cannot be assumed to run them.
    cluster: bool = Field(default=False, strict=True)
    # Jobs that ask for network egress (`egress: true`): only where the provider allows it.
    # Absent means no.
    egress: bool = Field(default=False, strict=True)


class ClaimRequest(RequestBody):
    """The optional body of POST /worker/claim (absent: the worker accepts nothing extra)."""

    accepts: ClaimAccepts = Field(default_factory=ClaimAccepts)


class ClaimPublic(Claim):
    """The claim answer: the message itself (proofnet/messages/claim.py), so the API
    validates what it sends against the one definition the worker parses with."""


class LeaseHeartbeat(RequestBody):
    progress: float | None = Field(default=None, ge=0.0, le=1.0)
    message: str | None = Field(default=None, max_length=500)
    # Node rank 0 of a multi-node job: "host:port" where it hosts the c10d store.
    rendezvous: str | None = Field(default=None, max_length=300)


class LeaseComplete(RequestBody):
    # What the worker hands back for the result pipeline (e.g. attestation, commitments).
    result: dict[str, Any] = Field(default_factory=dict)


class LeaseEnd(RequestBody):
    reason: str = Field(min_length=1, max_length=2000)


class LeasePublic(LeaseAnswer):
    """The answer to a lease call: the message the worker parses (proofnet/messages/claim.py)."""


class LeaseRelease(RequestBody):
    reason: str = Field(default="", max_length=2000)


class LeaseDeliveries(RequestBody):
    """How each result destination of the job's spec answered (the worker's report)."""

    reports: list[DeliveryReport] = Field(max_length=MAX_DESTINATIONS)


class DeliveriesPublic(PublicBody):
    """What still keeps the job from completing (empty: every destination acknowledged)."""

    pending: list[str]
