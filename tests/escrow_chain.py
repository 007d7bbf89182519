"""A protocol deployment and Blockfrost-shaped escrow outputs, for the tests that check
escrows without a devnet: an honest escrow for a job, and one fact changed at a time.

The deployment's script hashes are made up except the escrow script's (the real,
parameterless validator), so outputs here sit at the real escrow address.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Mapping
from typing import Any

from pycardano import Address, Network, ScriptHash

from chain.contracts import types as t
from chain.offchain.builders.deployment import Deployment
from chain.offchain.scripts import apply_params, script_hash

NTX_POLICY = "ab" * 28
NTX_NAME = "4e5458"


def escrow_hash() -> str:
    return script_hash(apply_params("escrow")).payload.hex()


def deployment(**overrides: Any) -> Deployment:
    ref = "00" * 32 + "#{}"
    values: dict[str, Any] = {
        "network": "testnet",
        "seed": ref.format(0),
        "config_policy": "22" * 28,
        "config_name": t.CONFIG_NFT_NAME.hex(),
        "oracle_config_hash": "33" * 28,
        "escrow_hash": escrow_hash(),
        "batch_hash": "11" * 28,
        "config_ref": ref.format(1),
        "escrow_script_ref": ref.format(2),
        "batch_script_ref": ref.format(3),
        "config_script_ref": ref.format(4),
        "ntx_policy": NTX_POLICY,
        "ntx_name": NTX_NAME,
    }
    values.update(overrides)
    return Deployment(**values)


def escrow_datum(
    deployed: Deployment,
    job_id: str,
    submitter_pkh: str,
    *,
    budget: int,
    deadline_ms: int,
    **overrides: Any,
) -> t.EscrowDatum:
    """The datum the lock builder writes for this job, then `overrides` (field: value)."""
    pkh = bytes.fromhex(submitter_pkh)
    datum = t.EscrowDatum(
        batch_credential=bytes.fromhex(deployed.batch_hash),
        job_id=bytes.fromhex(job_id),
        submitter=t.Address(t.PubKeyCredential(pkh), t.NoStakingCredential()),
        submitter_pkh=pkh,
        budget=budget,
        ntx_policy=bytes.fromhex(deployed.ntx_policy),
        ntx_name=bytes.fromhex(deployed.ntx_name),
        deadline=deadline_ms,
        config_policy=bytes.fromhex(deployed.config_policy),
        config_name=bytes.fromhex(deployed.config_name),
        cancel_allowed_until=t.NoPosixTime(),
        nonce=0,
        oracle_set=bytes(32),
    )
    return dataclasses.replace(datum, **overrides)


def escrow_output(
    deployed: Deployment,
    datum: t.EscrowDatum | str | None,
    *,
    ntx: int | None = None,
    assets: Mapping[str, int] | None = None,
    script: str | None = None,
    spent_by: str | None = None,
) -> dict[str, Any]:
    """One `/txs/{hash}/utxos` output: `ntx` NTX (the datum's budget by default), plus
    `assets`; a `datum` string is put as the inline datum's hex as it is."""
    if ntx is None:
        ntx = datum.budget if isinstance(datum, t.EscrowDatum) else 0
    address = Address(
        ScriptHash(bytes.fromhex(script or deployed.escrow_hash)), network=Network.TESTNET
    )
    amount = [{"unit": "lovelace", "quantity": "3000000"}]
    if ntx:
        amount.append({"unit": deployed.ntx_unit, "quantity": str(ntx)})
    amount += [{"unit": u, "quantity": str(q)} for u, q in (assets or {}).items()]
    inline = datum.to_cbor_hex() if isinstance(datum, t.EscrowDatum) else datum
    return {
        "address": str(address),
        "output_index": 0,
        "amount": amount,
        "inline_datum": inline,
        "consumed_by_tx": spent_by,
    }


class _NotFound(Exception):
    status_code = 404


class FakeBlockfrostApi:
    """`transaction_utxos` over a dict; `down` makes every call fail as a dead backend."""

    def __init__(self) -> None:
        self.txs: dict[str, dict[str, Any]] = {}
        self.down = False
        self.calls = 0

    def transaction_utxos(self, hash: str, return_type: str = "json") -> dict[str, Any]:
        self.calls += 1
        if self.down:
            raise ConnectionError("the chain backend is down")
        if hash not in self.txs:
            raise _NotFound(hash)
        return self.txs[hash]


class FakeChainContext:
    """A Blockfrost-shaped chain context holding outputs that tests put and change."""

    def __init__(self) -> None:
        self.api = FakeBlockfrostApi()

    def put(self, output: dict[str, Any]) -> tuple[str, int]:
        tx_id = secrets.token_hex(32)
        self.api.txs[tx_id] = {"outputs": [output]}
        return tx_id, int(output["output_index"])

    def replace(self, tx_id: str, **changes: Any) -> None:
        self.api.txs[tx_id]["outputs"][0].update(changes)
