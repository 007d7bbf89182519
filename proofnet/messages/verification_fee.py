"""The verification fee: what a verifier whose report matched is paid, and the evidence a
settlement carries for it.

The rule (one definition, applied by the proposing oracle, every co-signer and every
auditor alike):

- A verified attestation of `amount` NTX sets aside `fee_for(amount)`, `FEE_PPM` parts per
  million of it, rounded down, for its verifiers. The fee is carved out of the attested
  amount: the provider is paid `amount - fee`, the verifiers `fee` between them, so a
  settlement never pays out more than the provider attested and never more than the escrow's
  budget (the attested amount is already checked against the job's price and the budget).
  The submitter's cost does not change; the provider's price includes being checked.
- The fee is shared equally by the verifiers whose signed report answered a task for that
  very attestation and matched its commitments (`FeeEvidence`), one share per verifier key
  whatever the number of tasks it answered; the remainder of the division goes to the first
  verifiers by key. An attestation no verifier checked (nothing to replay, the local demo's
  replay on the oracle) pays no fee: its provider gets the whole amount.
- Only a report that says it passed can earn: a report that does not match the commitments
  (the oracle's verdict on it failed, or it says failed, errored, withheld) earns nothing,
  so a verifier gains nothing by framing a provider or by answering carelessly. A report for
  a job whose code proved not replayable earns nothing either: the fee is paid for proof that
  work was done, and none was shown.
- The verifier names where its fee goes in the report it signs (`payout_address`); the
  oracle that drew it also checks that address is the one the verifier registered. A report
  without one earns nothing.

A fee's evidence is the oracle-signed task and the verifier-signed report, published in the
settlement's bundle next to the attestation it checked, so an auditor with the bundle alone
can recompute every fee output (`fee_payouts`) and tell a fee from a payout mismatch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from proofnet.messages.verification import (
    VerificationError,
    VerificationReport,
    VerificationTask,
)

# 5 % of the attested amount: the verification compute the defaults target (a replay of the
# drawn segments costs at most about 5 % of the job's compute, docs/benchmarks.md), paid at
# the provider's own rate.
FEE_PPM = 50_000
MILLION = 1_000_000
# The most fee entries one attestation carries in a bundle (one per oracle's draw is usual).
MAX_FEES_PER_ATTESTATION = 16


class FeeError(ValueError):
    """A fee's evidence does not hold for the attestation it names."""


def fee_for(amount: int) -> int:
    """The verification fee set aside from an attested `amount` (rounded down, so the
    provider's part is always positive for a positive amount)."""
    if amount <= 0:
        return 0
    return amount * FEE_PPM // MILLION


@dataclass(frozen=True)
class FeeEvidence:
    """A verifier's claim to a share of one attestation's fee: the task an oracle signed
    for it and the report it signed back."""

    task: VerificationTask
    report: VerificationReport

    @property
    def verifier(self) -> str:
        return self.report.verifier

    @property
    def payout_address(self) -> str | None:
        return self.report.payout_address

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task.to_json(), "report": self.report.to_json()}

    @classmethod
    def from_json(cls, obj: object) -> FeeEvidence:
        if not isinstance(obj, dict):
            raise FeeError("a fee's evidence is an object with its task and report")
        try:
            task = VerificationTask.from_json(obj.get("task"))
            report = VerificationReport.from_json(obj.get("report"))
        except VerificationError as exc:
            raise FeeError(str(exc)) from exc
        return cls(task, report)


def oracle_key_hash(oracle_key: str) -> str:
    """The Cardano key hash (Blake2b-224, hex) of an oracle's Ed25519 key (hex): how a
    settlement's required signers name the oracle that signed a task."""
    return hashlib.blake2b(bytes.fromhex(oracle_key), digest_size=28).hexdigest()


def fee_refusal(
    evidence: FeeEvidence,
    *,
    leaf_hash: str,
    provider: str,
    job_id: str,
    oracle_key_hashes: Collection[str],
) -> str | None:
    """Why `evidence` earns no share of the fee of the attestation with leaf `leaf_hash`
    (by worker `provider`, for job `job_id`), or None. `oracle_key_hashes` are the oracles
    whose tasks count: a settlement's required signers."""
    task, report = evidence.task, evidence.report
    checks: list[tuple[bool, str]] = [
        # A task for another attestation (an old lease, another job) earns nothing here.
        (task.attestation == leaf_hash, "the task checks another attestation"),
        (task.job_id == job_id, "the task is for another job"),
        (task.provider == provider, "the task names another provider"),
        # Drawing already excludes the provider; a forged pair must not pay it twice.
        (task.verifier != provider, "a provider is never paid for verifying itself"),
        (
            oracle_key_hash(task.oracle_key) in oracle_key_hashes,
            "the task is not signed by an oracle that signs this settlement",
        ),
        (report.status == "passed", f"the report says {report.status!r}: it earns nothing"),
        (report.payout_address is not None, "the report names no payout address"),
    ]
    for holds, why in checks:
        if not holds:
            return why
    try:
        task.verify([task.oracle_key])
        report.verify_for(task)
    except VerificationError as exc:
        return str(exc)
    if task.kind == "replay" and not _replay_complete(task, report):
        return "the report does not answer every segment the task drew"
    if task.kind == "node" and {r.segment for r in report.node_results} != set(task.segments):
        return "the report does not answer every segment the task drew"
    return None


def _replay_complete(task: VerificationTask, report: VerificationReport) -> bool:
    """Every drawn segment has a result, and the first segment's two replays agree."""
    results = {r.segment: r for r in report.results}
    if set(results) != set(task.segments):
        return False
    first = results.get(min(task.segments))
    return (
        report.repeat is not None
        and first is not None
        and (report.repeat.weights_hash == first.weights_hash)
    )


def fee_shares(amount: int, evidence: Sequence[FeeEvidence]) -> list[tuple[str, int]]:
    """The fee outputs of one attestation of `amount` with its (already checked) evidence:
    (payout address, NTX) per verifier, by verifier key, zero shares left out."""
    verifiers: dict[str, str] = {}
    for e in evidence:
        if e.payout_address is not None:
            verifiers.setdefault(e.verifier, e.payout_address)
    if not verifiers:
        return []
    fee = fee_for(amount)
    keys = sorted(verifiers)
    share, extra = divmod(fee, len(keys))
    out = []
    for position, key in enumerate(keys):
        part = share + (1 if position < extra else 0)
        if part > 0:
            out.append((verifiers[key], part))
    return out


@dataclass(frozen=True)
class Payouts:
    """What a settlement pays for one attestation: the provider's part and the fees."""

    provider: tuple[str, int]
    fees: tuple[tuple[str, int], ...]

    @property
    def outputs(self) -> tuple[tuple[str, int], ...]:
        """The payout outputs in the order a settlement entry names them: the provider's
        first, then the fees by verifier key."""
        return (self.provider, *self.fees)

    @property
    def fee_total(self) -> int:
        return sum(q for _, q in self.fees)


def fee_payouts(payout_address: str, amount: int, evidence: Sequence[FeeEvidence]) -> Payouts:
    """The outputs paying one attested `amount`: the provider's `amount - fees`, then the
    fee shares (`fee_shares`). Their sum is `amount`, whatever the evidence."""
    fees = tuple(fee_shares(amount, evidence))
    paid = sum(q for _, q in fees)
    return Payouts((payout_address, amount - paid), fees)


def bundle_fees(obj: Any, count: int) -> tuple[tuple[FeeEvidence, ...], ...]:
    """The fee evidence of a settlement bundle's JSON (`oracle.settlement.bundle`) per
    attestation position: empty for a version-1 bundle. Raises FeeError when an entry is
    malformed or names no attestation of the bundle."""
    raw = obj.get("fees", []) if isinstance(obj, dict) else []
    if not isinstance(raw, list):
        raise FeeError("fees is a list")
    per: list[list[FeeEvidence]] = [[] for _ in range(count)]
    for entry in raw:
        if not isinstance(entry, dict):
            raise FeeError("a fee entry is an object")
        position = entry.get("attestation")
        if not isinstance(position, int) or isinstance(position, bool):
            raise FeeError("a fee entry names its attestation by position")
        if not 0 <= position < count:
            raise FeeError(f"fee entry for attestation {position} of {count}")
        if len(per[position]) >= MAX_FEES_PER_ATTESTATION:
            raise FeeError(f"attestation {position} has too many fee entries")
        per[position].append(FeeEvidence.from_json(entry))
    return tuple(tuple(p) for p in per)
