"""Provider bonds as the API reads them when a worker claims: a job may require a minimum
bond (`JobSpec.min_bond`, NTX base units), checked against the chain at every claim.

The bond script is derived from the deployment and the bond terms
(`chain.offchain.builders.bond`); a provider's bonds are the UTxOs there whose datum names
the hash of the worker's registered key (the key that signs its attestations, so a slash
can cite them). Only bonds that back claims count (`Bond.counts`: bonded, not unbonding,
only ADA and NTX), and for a given job not those already slashed for it (a provider could
lock a bond whose datum lists that job, which the script would then never slash for it).
I/O: the chain reads in `provider_bonds`; everything else is pure.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Any

from pycardano import PlutusV3Script, VerificationKeyHash

from api.config import ApiConfig
from api.models import Job
from chain.offchain.builders.bond import (
    Bond,
    BondTerms,
    bond_address,
    bond_script,
    bonded_total,
    bonds_at,
)
from chain.offchain.builders.deployment import Deployment


class BondUnavailable(Exception):
    """The provider's bonds could not be read on chain (the message says why)."""


def terms_of(config: ApiConfig) -> BondTerms:
    return BondTerms(config.bond_unbonding_delay_ms, config.bond_slash_permille)


@functools.lru_cache(maxsize=8)
def _script(deployment_json: str, terms: BondTerms) -> PlutusV3Script:
    return bond_script(Deployment.from_json(deployment_json), terms)


def provider_pkh(worker_key_hex: str) -> bytes:
    """The bond datum's provider: blake2b-224 of the worker's Ed25519 key."""
    return hashlib.blake2b(bytes.fromhex(worker_key_hex), digest_size=28).digest()


def provider_bonds(
    context: Any, deployment: Deployment, terms: BondTerms, worker_key_hex: str
) -> list[Bond]:
    """The provider's bonds at the deployment's bond address, read on chain now."""
    try:
        address = bond_address(_script(deployment.to_json(), terms), deployment)
        pkh = VerificationKeyHash(provider_pkh(worker_key_hex))
        return bonds_at(context, deployment, address, pkh)
    except Exception as exc:  # every backend raises its own kinds; the claim needs one
        raise BondUnavailable(f"the provider's bonds could not be read on chain: {exc}") from exc


def min_bond_of(job: Job) -> int:
    value = job.spec.get("min_bond") if isinstance(job.spec, dict) else None
    return int(value) if isinstance(value, int) and value > 0 else 0


def bond_refusal(bonds: Sequence[Bond] | None, job: Job) -> str | None:
    """Why this provider's bonds do not back `job` (None: they do, or none is required)."""
    need = min_bond_of(job)
    if need == 0:
        return None
    if bonds is None:
        return f"the job requires a bond of {need} NTX and bonds cannot be read on chain"
    have = bonded_total(bonds, bytes.fromhex(job.job_id))
    if have < need:
        return f"the job requires a bond of {need} NTX; the provider's bonds back {have}"
    return None
