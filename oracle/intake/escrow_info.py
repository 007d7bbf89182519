"""`GET /api/v1/escrows/{tx_id}/{index}`: an escrow's datum as this oracle reads it on chain.

Public on purpose: escrow datums are public on chain anyway. Workers ask it before sealing
results, so a compromised API host cannot hand them its own sealing key (see
`proofnet.messages.escrow_info`). The answer comes from the oracle's `ChainView`, the same
lookups and the same bounded, short-lived cache verification uses; each client address may
ask `per_address` times a minute (429 beyond), so made-up ids cannot turn the oracle into a
free proxy to its chain backend.
"""

from __future__ import annotations

import math
import re
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Request
from pydantic import ValidationError

from oracle.inputs.chain import ChainUnavailable, ChainView
from oracle.models import escrow_ref
from proofnet.limits import TokenBuckets
from proofnet.messages.attestation import EscrowRef
from proofnet.messages.escrow_info import ESCROWS_PATH, EscrowInfo

_HEX64 = re.compile(r"[0-9a-f]{64}")


def describe_escrow(
    chain: ChainView, escrow_script_hash: str, tx_id: str, index: int
) -> EscrowInfo:
    """The escrow at `tx_id#index`; HTTPException 404 when there is none, 503 when the chain
    backend does not answer."""
    if not _HEX64.fullmatch(tx_id):
        raise HTTPException(422, "tx_id must be 64 lowercase hex digits")
    if not 0 <= index <= 2**32 - 1:
        raise HTTPException(422, "index must be an output index (0 to 2**32 - 1)")
    ref = EscrowRef(tx_id=tx_id, index=index)
    name = escrow_ref(tx_id, index)
    try:
        lookup = chain.escrow_output(ref)
    except ChainUnavailable as exc:
        raise HTTPException(503, f"the chain backend did not answer: {exc}") from exc
    out = lookup.output
    if lookup.status == "missing" or out is None:
        raise HTTPException(404, f"output {name} does not exist on chain")
    if out.payment_script_hash != escrow_script_hash:
        raise HTTPException(404, f"output {name} is not at the escrow script")
    datum = out.datum
    if datum is None:
        raise HTTPException(404, f"output {name} holds no escrow datum: {out.datum_error}")
    try:
        return EscrowInfo(
            tx_id=tx_id,
            index=index,
            job_id=bytes(datum.job_id).hex(),
            submitter_pkh=bytes(datum.submitter_pkh).hex(),
            budget=datum.budget,
            deadline_ms=datum.deadline,
            spent_by=lookup.spent_by if lookup.status == "spent" else None,
        )
    except ValidationError as exc:  # a datum of the right shape with out-of-range fields
        raise HTTPException(404, f"output {name}'s escrow datum is malformed: {exc}") from exc


def escrow_info_router(
    chain: ChainView, escrow_script_hash: str, per_address: TokenBuckets | None = None
) -> APIRouter:
    router = APIRouter(tags=["escrows"])

    # A plain function: FastAPI runs it in its thread pool (chain lookups block).
    @router.get(
        ESCROWS_PATH + "/{tx_id}/{index}",
        responses={429: {"description": "too many look-ups from this address"}},
    )
    def escrow_info(
        tx_id: Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")],
        index: Annotated[int, Path(ge=0, le=2**32 - 1)],
        request: Request,
    ) -> EscrowInfo:
        if per_address is not None:
            host = request.client.host if request.client is not None else "unknown"
            wait = per_address.take(host)
            if wait > 0:
                raise HTTPException(
                    429,
                    "too many escrow look-ups from this address; slow down",
                    headers={"retry-after": str(max(1, math.ceil(wait)))},
                )
        return describe_escrow(chain, escrow_script_hash, tx_id, index)

    return router
