"""Before sealing results: is the sealing key the API handed over really the submitter's?

The API hands the worker a sealing key with the CIP-8 signature of the wallet that vouched
for it. That proves some wallet signed the key, not that it is the wallet paying for the
job: a compromised API host could sign a key of its own and read every result. So the
worker checks the wallet against the chain, through the oracle (the worker never reads the
chain itself): the escrow the claim names must be for this job, and the wallet that signed
the sealing key must be the one that locked it (`submitter_pkh` of the escrow datum).
"""

from __future__ import annotations

import hmac

from proofnet.messages.escrow_info import EscrowInfo
from proofnet.messages.sealing import SealingError, SealingTarget
from worker.oracle_client import OracleClient, OracleRefused, OracleUnavailable


class SealingKeyRefused(Exception):
    """The sealing key is not vouched for by the job's submitter on chain: never seal to it."""


class SealingKeyUnverified(Exception):
    """The check could not be made now (the oracle is unreachable): not the job's fault."""


def check_sealing_wallet(target: SealingTarget, escrow: EscrowInfo, job_id: str) -> str:
    """The submitter's payment key hash, once `target` is shown to be signed by it and
    `escrow` to pay for `job_id`; SealingKeyRefused otherwise."""
    try:
        signer = target.verify()
    except SealingError as e:
        raise SealingKeyRefused(f"the sealing key's wallet signature does not hold: {e}") from e
    if escrow.job_id != job_id:
        raise SealingKeyRefused(
            f"escrow {escrow.tx_id}#{escrow.index} pays for job {escrow.job_id}, not {job_id}"
        )
    if not hmac.compare_digest(signer, escrow.submitter_pkh):
        raise SealingKeyRefused(
            f"the sealing key is vouched for by wallet {signer}, but the escrow on chain was "
            f"locked by {escrow.submitter_pkh}: refusing to seal results to it"
        )
    return signer


def verify_sealing_key(
    target: SealingTarget, *, tx_id: str, index: int, job_id: str, oracle: OracleClient
) -> str:
    """Look the escrow up through the oracle and check `target` against it."""
    try:
        escrow = oracle.escrow_info(tx_id, index)
    except OracleUnavailable as e:
        raise SealingKeyUnverified(f"cannot check the sealing key against the chain: {e}") from e
    except OracleRefused as e:
        raise SealingKeyRefused(
            f"cannot check the sealing key: the oracle finds no escrow {tx_id}#{index} on chain "
            f"({e})"
        ) from e
    if (escrow.tx_id, escrow.index) != (tx_id, index):
        raise SealingKeyUnverified(f"the oracle answered about another output than {tx_id}#{index}")
    return check_sealing_wallet(target, escrow, job_id)
