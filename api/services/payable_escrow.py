"""Escrows that can pay: read the chain, apply `chain.offchain.escrow_terms` for one job.

The API records a job's escrow only if the chain shows an output that can pay the job
(`POST /jobs/{id}/escrow`, the wallet flow's submit), and checks it again when a lease
starts (`api.routes.worker.claim`): no worker is handed a job whose payout the oracle would
then refuse. The terms are the oracle's (this deployment's escrow and batch scripts and
config, the NTX unit and no other token, an unspent output whose datum names this job and
its owner) plus what the job still needs: a budget and NTX covering its price, and a
deadline leaving room for its run and the settlement window.

I/O: one chain read per check (`lookup`, through `chain.offchain.output_reads`: the devnet,
Blockfrost, or Kupo on a self-hosted node); the rest is pure.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from api.config import ApiConfig
from api.errors import BadRequest
from api.models import Job, User
from api.services.escrow_deadline import sequential_units
from chain.offchain.errors import ChainError
from chain.offchain.escrow_terms import (
    EscrowFacts,
    EscrowRefusal,
    EscrowTerms,
    escrow_refusal,
)
from chain.offchain.output_reads import output_facts
from proofnet.messages.jobspec import JobSpec

_HEX64 = re.compile(r"[0-9a-f]{64}")


class EscrowBackendError(Exception):
    """The chain backend could not be asked (503 to the client)."""


class EscrowCannotPay(BadRequest):
    """The output is not an escrow that can pay this job; `reason` is the stable code."""

    def __init__(self, refusal: EscrowRefusal) -> None:
        super().__init__(f"{refusal.reason}: {refusal.message}")
        self.reason = refusal.reason


def lookup(context: Any, tx_id: str, index: int) -> EscrowFacts | None:
    """One output, spent or not, through the API's chain context (Blockfrost-shaped
    `/txs/{hash}/utxos`, or a self-hosted node's Kupo), or None when the chain does not
    know it."""
    if not _HEX64.fullmatch(tx_id):
        raise BadRequest("tx_id must be 64 lowercase hex digits")
    try:  # Ogmios without Kupo is a server misconfiguration (503 naming the setting)
        return output_facts(context, tx_id, index)
    except ChainError as exc:
        raise EscrowBackendError(f"chain backend failed: {exc}") from exc


def run_margin_ms(spec: JobSpec, config: ApiConfig, *, whole_job: bool) -> int:
    """How far the deadline must be: the run still to come, then the settlement window.
    Before any lease the run is the job's units that must run one after another; at a
    lease start it is that lease's run."""
    runs = sequential_units(spec) if whole_job else 1
    # A job that keeps storage is settled once its storage term is over (its copies are
    # paid from the same escrow, docs/storage.md): the escrow must outlive the term.
    term = 0 if spec.storage is None else spec.storage.term_s
    return (spec.resources.max_duration_s * runs + term + config.settlement_window_s) * 1000


def terms_for(
    job: Job,
    owner: User,
    deployment: Any,
    config: ApiConfig,
    now: datetime,
    *,
    whole_job: bool = True,
) -> EscrowTerms:
    spec = JobSpec.from_dict(job.spec)
    return EscrowTerms.of_deployment(
        deployment,
        job_id=job.job_id,
        pays=spec.max_amount,
        now_ms=int(now.timestamp() * 1000),
        settle_margin_ms=run_margin_ms(spec, config, whole_job=whole_job),
        submitter_pkh=owner.payment_key_hash,
    )


def require_payable(found: EscrowFacts | None, terms: EscrowTerms) -> EscrowFacts:
    """`found`, or `EscrowCannotPay` (400) saying which condition it fails."""
    refusal = escrow_refusal(found, terms)
    if refusal is not None:
        raise EscrowCannotPay(refusal)
    assert found is not None
    return found
