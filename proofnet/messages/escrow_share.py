"""Which attestations may be paid from one escrow together: the one rule the batch builder,
the co-signers and the auditor apply.

An escrow is spent once, by one settlement entry with one payout output per attestation
(and its verifiers' fees). Several attestations share it only as

- distinct units of one topology job (`Attestation.unit`), or
- distinct attempts of one resumed single-unit job (`Attestation.segments`), each for
  segments no other claims: their shares, each rounded down from the price for its own
  segments (`proofnet.messages.segment_share`), then sum to at most the price.

A single attestation always may. Anything else (two whole-job attestations, a whole-job
attestation beside an attempt's, units of two jobs) is paying one escrow twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from proofnet.messages.attestation import Attestation
from proofnet.messages.segment_share import overlap


def sharing_refusal(atts: Sequence[Attestation]) -> str | None:
    """Why `atts` (all claiming one escrow) may not be paid together, or None."""
    if len(atts) < 2:
        return None
    if len({a.job_id for a in atts}) != 1:
        return "attestations of several jobs claim it"
    if all(a.unit is not None for a in atts):
        indices = [a.unit.index for a in atts if a.unit is not None]
        if len(set(indices)) != len(indices):
            return "a unit is attested twice"
        return None
    spans = [a.segments for a in atts]
    if any(s is None for s in spans):
        return "it is attested twice (a whole-job attestation beside another)"
    attempts = [s.attempt for s in spans if s is not None]
    if len(set(attempts)) != len(attempts):
        return "an attempt of it is attested twice"
    shared = overlap((s.first, s.last) for s in spans if s is not None)
    if shared is not None:
        (a, b), (c, d) = shared
        return f"two attempts claim the same segments ({a}..{b} and {c}..{d})"
    return None
