"""An escrow that can pay: the one definition the API and the oracle apply.

The batch script settles an escrow only if the escrow trusts this deployment's batch
script and oracle config, pins the oracle set that config holds now, holds NTX and no other token, its budget and its NTX cover the
payout, and the transaction is valid before its deadline; the oracle verifies the same
before it attests a payout. The API applies these very checks, against the chain, before a
job can be claimed (`POST /jobs/{id}/escrow`) and again at every lease start, so that no
worker runs a job whose payout the oracle would then refuse; the oracle applies them to
every attestation (`oracle.verification.verify`).

`escrow_refusal(facts, terms)` runs `ESCROW_CHECKS` in turn: each takes what the chain says
about the output (`EscrowFacts`, read by the caller) and what this caller requires
(`EscrowTerms`), and returns the first `EscrowRefusal` (a stable reason and a message) or
None. Pure: no I/O here; `facts_from_blockfrost` reads one Blockfrost output object,
`facts_from_kupo` one Kupo match (with its inline datum, fetched by the caller).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from pycardano import Address, ScriptHash

from chain.contracts.types import EscrowDatum, PubKeyCredential


class EscrowReason(StrEnum):
    """Why an output cannot pay a job. The values are the oracle's rejection reasons."""

    MISSING = "escrow_missing"
    WRONG_ADDRESS = "escrow_wrong_address"
    SPENT = "escrow_spent"
    DATUM_INVALID = "escrow_datum_invalid"
    JOB_MISMATCH = "escrow_job_mismatch"
    SUBMITTER_MISMATCH = "escrow_submitter_mismatch"
    WRONG_UNIT = "escrow_wrong_unit"
    WRONG_BATCH = "escrow_wrong_batch"
    WRONG_CONFIG = "escrow_wrong_config"
    WRONG_ORACLE_SET = "escrow_wrong_oracle_set"
    STRAY_TOKENS = "escrow_stray_tokens"
    EXPIRED = "escrow_expired"
    DEADLINE_TOO_NEAR = "escrow_deadline_too_near"
    UNDERFUNDED = "amount_exceeds_budget"


@dataclass(frozen=True)
class EscrowRefusal:
    reason: EscrowReason
    message: str


@dataclass(frozen=True)
class EscrowFacts:
    """What the chain says about one output claimed to be an escrow."""

    ref: str  # "txid#index"
    address: str
    payment_script_hash: str | None  # hex; None for a key payment credential
    lovelace: int
    assets: Mapping[str, int]  # unit (policy hex + name hex) -> quantity
    datum: EscrowDatum | None
    datum_error: str  # why `datum` is None ("" when it parsed)
    spent_by: str | None = None

    def quantity(self, unit: str) -> int:
        return self.assets.get(unit, 0)


@dataclass(frozen=True)
class EscrowTerms:
    """What an escrow must satisfy to pay `pays` NTX for job `job_id` at `now_ms`, with its
    deadline at least `settle_margin_ms` away (the run still to come plus the settlement
    window; 0 for the oracle, which needs only a deadline not yet passed).

    A field left None is not checked: `of_deployment` pins every one of them, and the API
    and the oracle as served are built from their deployment (tests may leave some out).
    `submitter_pkh` is the job owner's payment key hash where the caller knows the owner."""

    escrow_hash: str
    job_id: str
    pays: int
    now_ms: int
    settle_margin_ms: int = 0
    ntx_policy: str | None = None
    ntx_name: str = "4e5458"
    batch_hash: str | None = None
    config_policy: str | None = None
    config_name: str | None = None
    submitter_pkh: str | None = None
    # The oracle set (hex of `chain.offchain.oracle_set.of_config`) the deployment's config
    # holds now: the batch settles only escrows pinning it. Read from the chain by the
    # caller; None is not checked (the batch builder checks it again before signing).
    oracle_set: str | None = None

    @classmethod
    def of_deployment(cls, deployment: Any, **values: Any) -> EscrowTerms:
        """Terms pinned to a `chain.offchain.builders.Deployment`."""
        return cls(
            escrow_hash=deployment.escrow_hash,
            ntx_policy=deployment.ntx_policy,
            ntx_name=deployment.ntx_name,
            batch_hash=deployment.batch_hash,
            config_policy=deployment.config_policy,
            config_name=deployment.config_name,
            **values,
        )


EscrowCheck = Callable[[EscrowFacts, EscrowTerms], EscrowRefusal | None]


def _refuse(reason: EscrowReason, message: str) -> EscrowRefusal:
    return EscrowRefusal(reason, message)


def _check_address(f: EscrowFacts, terms: EscrowTerms) -> EscrowRefusal | None:
    if f.payment_script_hash != terms.escrow_hash:
        return _refuse(
            EscrowReason.WRONG_ADDRESS, f"output {f.ref} is not at the escrow script ({f.address})"
        )
    return None


def _check_unspent(f: EscrowFacts, terms: EscrowTerms) -> EscrowRefusal | None:
    if f.spent_by is not None:
        return _refuse(EscrowReason.SPENT, f"escrow {f.ref} was spent by {f.spent_by}")
    return None


# A datum's integers are unbounded; a budget no output can hold, or a deadline past any
# clock, is no escrow's (and would not fit where the API records it).
_INT64_MAX = 2**63 - 1


def _check_datum(f: EscrowFacts, terms: EscrowTerms) -> EscrowRefusal | None:
    if f.datum is None:
        return _refuse(EscrowReason.DATUM_INVALID, f"escrow {f.ref}: {f.datum_error}")
    if not (0 <= f.datum.budget <= _INT64_MAX and 0 <= f.datum.deadline <= _INT64_MAX):
        return _refuse(
            EscrowReason.DATUM_INVALID, f"escrow {f.ref}: budget or deadline out of range"
        )
    return None


def _datum(f: EscrowFacts) -> EscrowDatum:
    assert f.datum is not None  # _check_datum ran first
    return f.datum


def _check_job(f: EscrowFacts, terms: EscrowTerms) -> EscrowRefusal | None:
    # The escrow datum's job_id is the job id's 32 bytes.
    named = bytes(_datum(f).job_id).hex()
    if named != terms.job_id:
        return _refuse(
            EscrowReason.JOB_MISMATCH, f"escrow {f.ref} is for job {named}, not {terms.job_id}"
        )
    return None


def _check_submitter(f: EscrowFacts, terms: EscrowTerms) -> EscrowRefusal | None:
    if terms.submitter_pkh is None:
        return None
    datum = _datum(f)
    credential = getattr(datum.submitter, "payment_credential", None)
    refunds_to_owner = isinstance(credential, PubKeyCredential) and (
        bytes(credential.credential_hash).hex() == terms.submitter_pkh
    )
    if bytes(datum.submitter_pkh).hex() != terms.submitter_pkh or not refunds_to_owner:
        return _refuse(
            EscrowReason.SUBMITTER_MISMATCH,
            f"escrow {f.ref} names another submitter than the job's owner (its refund and "
            "remainder would go elsewhere)",
        )
    return None


def _ntx_unit(f: EscrowFacts, terms: EscrowTerms) -> str:
    if terms.ntx_policy is not None:
        return terms.ntx_policy + terms.ntx_name
    datum = _datum(f)
    return bytes(datum.ntx_policy).hex() + bytes(datum.ntx_name).hex()


def _check_unit(f: EscrowFacts, terms: EscrowTerms) -> EscrowRefusal | None:
    datum = _datum(f)
    if terms.ntx_policy is not None and (
        bytes(datum.ntx_policy).hex() != terms.ntx_policy
        or bytes(datum.ntx_name).hex() != terms.ntx_name
    ):
        return _refuse(EscrowReason.WRONG_UNIT, f"escrow {f.ref} does not lock the NTX unit")
    return None


def _check_batch(f: EscrowFacts, terms: EscrowTerms) -> EscrowRefusal | None:
    if terms.batch_hash is not None and bytes(_datum(f).batch_credential).hex() != terms.batch_hash:
        return _refuse(
            EscrowReason.WRONG_BATCH, f"escrow {f.ref} trusts another batch settlement script"
        )
    return None


def _check_config(f: EscrowFacts, terms: EscrowTerms) -> EscrowRefusal | None:
    datum = _datum(f)
    if (
        terms.config_policy is not None and bytes(datum.config_policy).hex() != terms.config_policy
    ) or (terms.config_name is not None and bytes(datum.config_name).hex() != terms.config_name):
        return _refuse(
            EscrowReason.WRONG_CONFIG, f"escrow {f.ref} trusts another oracle configuration"
        )
    return None


def _check_oracle_set(f: EscrowFacts, terms: EscrowTerms) -> EscrowRefusal | None:
    if terms.oracle_set is not None and bytes(_datum(f).oracle_set).hex() != terms.oracle_set:
        return _refuse(
            EscrowReason.WRONG_ORACLE_SET,
            f"escrow {f.ref} was locked under another oracle set than the configuration holds "
            "now: the batch script does not settle it (it refunds after its deadline)",
        )
    return None


def _check_tokens(f: EscrowFacts, terms: EscrowTerms) -> EscrowRefusal | None:
    # The batch script refuses an escrow holding any token but its NTX (it stays refundable).
    stray = sorted(unit for unit, q in f.assets.items() if q and unit != _ntx_unit(f, terms))
    if stray:
        return _refuse(
            EscrowReason.STRAY_TOKENS,
            f"escrow {f.ref} holds tokens other than its NTX ({len(stray)} unit(s)); the batch "
            "script does not settle it",
        )
    return None


def _check_deadline(f: EscrowFacts, terms: EscrowTerms) -> EscrowRefusal | None:
    deadline = _datum(f).deadline
    if deadline <= terms.now_ms:
        return _refuse(EscrowReason.EXPIRED, f"escrow {f.ref}'s deadline has passed")
    if deadline < terms.now_ms + terms.settle_margin_ms:
        return _refuse(
            EscrowReason.DEADLINE_TOO_NEAR,
            f"escrow {f.ref}'s deadline is {(deadline - terms.now_ms) // 1000} s away: the job "
            f"needs {terms.settle_margin_ms // 1000} s to run and be settled",
        )
    return None


def _check_funds(f: EscrowFacts, terms: EscrowTerms) -> EscrowRefusal | None:
    budget = _datum(f).budget
    locked = f.quantity(_ntx_unit(f, terms))
    if budget < terms.pays or locked < terms.pays:
        return _refuse(
            EscrowReason.UNDERFUNDED,
            f"escrow {f.ref} (budget {budget}, locked {locked} NTX) cannot pay {terms.pays}",
        )
    return None


ESCROW_CHECKS: tuple[EscrowCheck, ...] = (
    _check_address,
    _check_unspent,
    _check_datum,
    _check_job,
    _check_submitter,
    _check_unit,
    _check_batch,
    _check_config,
    _check_oracle_set,
    _check_tokens,
    _check_deadline,
    _check_funds,
)


def escrow_refusal(facts: EscrowFacts | None, terms: EscrowTerms) -> EscrowRefusal | None:
    """Why the output cannot pay under `terms` (the first failing check), or None."""
    if facts is None:
        return _refuse(
            EscrowReason.MISSING, "the output does not exist on chain (not yet confirmed?)"
        )
    for check in ESCROW_CHECKS:
        refusal = check(facts, terms)
        if refusal is not None:
            return refusal
    return None


# --- reading the chain's answer -------------------------------------------------------------


def parse_escrow_datum(inline_datum_hex: str | None) -> tuple[EscrowDatum | None, str]:
    if not inline_datum_hex:
        return None, "the output has no inline datum"
    try:
        datum = EscrowDatum.from_cbor(bytes.fromhex(inline_datum_hex))
    except Exception as exc:  # pycardano raises assorted types on foreign data
        return None, f"inline datum is not an EscrowDatum: {exc}"
    if not isinstance(datum, EscrowDatum):
        return None, "inline datum is not an EscrowDatum"
    return datum, ""


def payment_script_hash(address: str) -> str | None:
    try:
        part = Address.from_primitive(address).payment_part
    except Exception:  # pycardano raises assorted types on a bad address
        return None
    return part.payload.hex() if isinstance(part, ScriptHash) else None


def facts_from_blockfrost(ref: str, out: Mapping[str, Any]) -> EscrowFacts:
    """`EscrowFacts` from one Blockfrost `/txs/{hash}/utxos` output object."""
    lovelace = 0
    assets: dict[str, int] = {}
    for entry in out.get("amount") or []:
        unit, quantity = str(entry["unit"]), int(entry["quantity"])
        if unit == "lovelace":
            lovelace = quantity
        else:
            assets[unit] = quantity
    datum, error = parse_escrow_datum(out.get("inline_datum"))
    address = str(out.get("address", ""))
    spent_by = out.get("consumed_by_tx")
    return EscrowFacts(
        ref=ref,
        address=address,
        payment_script_hash=payment_script_hash(address),
        lovelace=lovelace,
        assets=MappingProxyType(assets),
        datum=datum,
        datum_error=error,
        spent_by=str(spent_by) if spent_by else None,
    )


# What `EscrowFacts.spent_by` says when the chain says "spent" but not by which transaction.
UNKNOWN_SPENDER = "another transaction"


def kupo_assets(assets: Mapping[str, Any]) -> dict[str, int]:
    """Kupo's "policy.name" (or "policy" for the empty name) -> our unit (policy + name)."""
    found: dict[str, int] = {}
    for key, quantity in assets.items():
        policy, _, name = str(key).partition(".")
        found[policy + name] = int(quantity)
    return found


def facts_from_kupo(
    ref: str, match: Mapping[str, Any], inline_datum_hex: str | None
) -> EscrowFacts:
    """`EscrowFacts` from one Kupo v2 match (`GET /matches/{index}@{tx id}`) and the inline
    datum its `datum_hash` names (None for no datum or a datum by hash: like Blockfrost's
    `inline_datum`, an escrow must carry its datum inline). The spender is Kupo v2.10's
    `spent_at.transaction_id`; an older Kupo says only that it is spent ("another
    transaction"). Raises KeyError, TypeError or ValueError on a match that does not read."""
    value = match["value"]
    datum, error = parse_escrow_datum(inline_datum_hex)
    address = str(match["address"])
    spent_at = match.get("spent_at")
    spent_by = None
    if spent_at is not None:
        spent_by = str((spent_at or {}).get("transaction_id") or UNKNOWN_SPENDER)
    return EscrowFacts(
        ref=ref,
        address=address,
        payment_script_hash=payment_script_hash(address),
        lovelace=int(value["coins"]),
        assets=MappingProxyType(kupo_assets(value.get("assets") or {})),
        datum=datum,
        datum_error=error,
        spent_by=spent_by,
    )
