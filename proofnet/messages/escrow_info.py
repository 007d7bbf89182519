"""What an oracle says about one escrow output on chain: `GET /api/v1/escrows/{tx_id}/{index}`.

Workers talk to the API and the oracle only, and the API is not trusted with facts the chain
holds. Before sealing results to the key the API hands over, a worker asks the oracle (which
reads the chain itself) who locked the job's escrow: the sealing key must be vouched for by
that wallet (`submitter_pkh`, the escrow datum's payment key hash), and the escrow must be
for this job.

The oracle answers 200 with this object for an output at the escrow script with a valid
escrow datum (spent or not), 404 when there is no such output or it is not an escrow, 503
when its chain backend cannot be asked.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field, ValidationError

from proofnet.messages.fields import Frozen, Hex56, Hex64, NonNegInt

ESCROWS_PATH: Final = "/api/v1/escrows"

OutputIndex = Annotated[int, Field(ge=0, le=2**32 - 1)]


class EscrowInfoError(ValueError):
    """The oracle's answer is not an escrow description."""


def escrow_path(tx_id: str, index: int) -> str:
    return f"{ESCROWS_PATH}/{tx_id}/{index}"


class EscrowInfo(Frozen):
    tx_id: Hex64
    index: OutputIndex
    # The escrow datum's job id (32 bytes, hex): the job this escrow pays for.
    job_id: Hex64
    # Payment key hash of the wallet that locked the escrow (who signs a Cancel).
    submitter_pkh: Hex56
    budget: NonNegInt
    deadline_ms: NonNegInt
    # The transaction that spent the escrow, or None while it is unspent.
    spent_by: Hex64 | None = None

    @classmethod
    def from_json(cls, obj: object) -> EscrowInfo:
        try:
            return cls.model_validate(obj)
        except ValidationError as exc:
            raise EscrowInfoError(f"the oracle's escrow answer is malformed: {exc}") from exc
