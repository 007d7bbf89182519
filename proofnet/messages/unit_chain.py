"""Whether the unit attestations a settlement pays form each escrow's chain of work: no unit
attested twice, every input the output of another unit of the same escrow, one output per
cluster's nodes. One check, run by the oracles' co-signers before they sign a batch and by
auditors after it settled."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

UNIT_ATTESTED_TWICE = "unit-attested-twice"
UNIT_INPUT_NOT_CHAINED = "unit-input-not-chained"
NODE_OUTPUTS_DISAGREE = "node-outputs-disagree"


@dataclass(frozen=True)
class ChainBreak:
    kind: str  # UNIT_ATTESTED_TWICE | UNIT_INPUT_NOT_CHAINED | NODE_OUTPUTS_DISAGREE
    escrow: str
    unit: int
    detail: str


def chain_breaks(units: Sequence[tuple[str, Any]]) -> list[ChainBreak]:
    """Within each escrow, over `(escrow, UnitWork)` pairs (one per unit attestation): no
    unit attested twice, every input is the output of another unit of the same escrow, and
    node units attest one output. Shared with the oracles' co-signers, who check a batch
    the same way before they sign it."""
    by_escrow: dict[str, list[Any]] = defaultdict(list)
    for escrow, work in units:
        by_escrow[escrow].append(work)
    found: list[ChainBreak] = []
    for escrow, works in sorted(by_escrow.items()):
        indices = [w.index for w in works]
        for index in sorted({i for i in indices if indices.count(i) > 1}):
            found.append(
                ChainBreak(
                    UNIT_ATTESTED_TWICE,
                    escrow,
                    index,
                    f"unit {index} of escrow {escrow} is attested {indices.count(index)} times",
                )
            )
        for work in works:
            outputs = {w.output: w.index for w in works if w.output and w is not work}
            for position, digest in enumerate(work.inputs):
                if digest not in outputs:
                    found.append(
                        ChainBreak(
                            UNIT_INPUT_NOT_CHAINED,
                            escrow,
                            work.index,
                            f"input {position} ({digest}) of unit {work.index} ({work.kind}) "
                            f"of escrow {escrow} is the output of no unit in the bundle",
                        )
                    )
        nodes = {w.output for w in works if w.kind == "node"}
        if len(nodes) > 1:
            first = min(w.index for w in works if w.kind == "node")
            found.append(
                ChainBreak(
                    NODE_OUTPUTS_DISAGREE,
                    escrow,
                    first,
                    f"the nodes of escrow {escrow} attest {len(nodes)} different outputs",
                )
            )
    return found
