"""Storage payouts on a real devnet with the real builders, scripts, co-signer and audit:
the escrow locks the compute price plus the storage budget; the job's settlement entry pays
each unit, then each storage copy its receipt's amount, the rest back to the submitter; a
co-signer signs it and the audit says OK and shows the storage beside the compute. A
co-signer refuses a receipt over what holding the copy can earn; a dishonest proposer
(threshold 1) that pays one anyway is named by the audit."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest
import test_units_settlement_devnet as units_devnet
from nacl.signing import SigningKey
from test_units_settlement_devnet import (
    Devnet,
    _audit,
    _audit_cli,
    _claims,
    _locked_world,
    _unsigned,
)
from test_verification_fees_devnet import _cosigner, _submit
from unit_fixtures import UnitWorld, relay_topology

from auditor import audit as au
from oracle.settlement import scenario as sc
from oracle.settlement.ports import Claim
from oracle.settlement.quorum import QuorumRefusal
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from proofnet.messages.storage_receipt import StorageReceipt
from tests.proofnet.storage_receipts import receipt

devnet = units_devnet.devnet
STORER = str(sc.enterprise(sc.seeded_key("storage-devnet/provider")))
BUDGET = 5_000


def _world(devnet: Devnet, tmp_path: Path, name: str) -> UnitWorld:
    store = AttestationStore(make_engine(f"sqlite:///{tmp_path / f'{name}.db'}"))
    store.create_schema()
    world = _locked_world(devnet, relay_topology(2, None), BUDGET, store)
    for index in range(2):
        world.complete(index)
    world.set_job(status="completed")
    return world


DAY = 86400


def _receipt(devnet: Devnet, world: UnitWorld, amount: int) -> StorageReceipt:
    oracle = SigningKey(bytes(devnet.scenario.oracle_keys[0].payload))
    # 10,000 bytes challenged weekly for a month at 3 * 10^8 per GB-month: at most 3,000.
    return receipt(
        oracle,
        network="devnet",
        job_id=world.job_id,
        payout_address=STORER,
        data=bytes(range(250)) * 40,
        placed_at=0,
        answered=[d * DAY for d in (7, 14, 21, 28, 30)],
        placement_id=1,
        provider_key="5a" * 32,
        ntx_per_gb_month=300_000_000,
        amount=amount,
    )


def _storage_claims(devnet: Devnet, world: UnitWorld, amount: int) -> list[Claim]:
    coses = {i: world.sign(i) for i in range(2)}
    claims = [
        dataclasses.replace(c, worker_key=world.worker_key(c.unit or 0))
        for c in _claims(world, coses)
    ]
    first = dataclasses.replace(claims[0], storage=(_receipt(devnet, world, amount),))
    return [first, *claims[1:]]


def test_storage_is_paid_beside_compute_cosigned_and_audited(
    devnet: Devnet, tmp_path: Path
) -> None:
    world = _world(devnet, tmp_path, "honest")
    scenario = devnet.scenario
    both = [scenario.oracle_pkhs[0], scenario.oracle_pkhs[1]]
    cosigner = _cosigner(devnet, world)

    unsigned, body = _unsigned(devnet, _storage_claims(devnet, world, 2_500), both)
    witness = cosigner.review(unsigned.tx_cbor, body)
    tx_id = _submit(devnet, unsigned, body, [witness])

    paid = units_devnet._ntx_outputs(devnet, tx_id)
    assert (STORER, 2_500) in paid
    for index in range(2):
        assert (world.payout(index), world.units[index].amount) in paid
    # What the copy did not earn of the budget goes back to the submitter.
    assert (str(scenario.submitter.address), BUDGET - 2_500) in paid

    report = _audit(devnet, tx_id)
    assert report.ok, report.problems
    (settled,) = report.escrows
    assert [(c.address, c.amount, c.placement_id) for c in settled.storage] == [(STORER, 2_500, 1)]
    assert settled.attested == world.total and settled.storage_total == 2_500
    assert "NTX of storage to 1 copy" in report.line()
    # `proofnet audit` prints the copy beside the units.
    code, out = _audit_cli(devnet, tx_id)
    assert code == 0, out
    assert f"storage copy 1: 2500 NTX to {STORER}" in out


def test_storage_over_what_the_copy_can_earn_is_refused_and_named(
    devnet: Devnet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = _world(devnet, tmp_path, "greedy")
    scenario = devnet.scenario
    claims = _storage_claims(devnet, world, 3_001)  # 1 GB-month at 3,000 earns 3,000
    # An honest proposer leaves the receipt out ...
    unsigned, body = _unsigned(devnet, claims, [scenario.oracle_pkhs[0], scenario.oracle_pkhs[1]])
    assert all(c.storage == () for c in unsigned.claims)
    # ... a co-signer refuses a batch paying it ...
    monkeypatch.setattr(Claim, "with_valid_storage", lambda self, signers: self)
    unsigned, body = _unsigned(devnet, claims, [scenario.oracle_pkhs[0], scenario.oracle_pkhs[1]])
    with pytest.raises(QuorumRefusal, match="over 3000"):
        _cosigner(devnet, world).review(unsigned.tx_cbor, body)
    # ... and when a dishonest proposer alone (threshold 1) pays it, the audit names it.
    unsigned, body = _unsigned(devnet, claims, [scenario.oracle_pkhs[0]])
    tx_id = _submit(devnet, unsigned, body, [])
    report = _audit(devnet, tx_id)
    kinds = {d.kind for d in report.discrepancies}
    assert au.STORAGE_UNEARNED in kinds, report.problems
    (unearned,) = [d for d in report.discrepancies if d.kind == au.STORAGE_UNEARNED]
    assert "over 3000" in unearned.detail
    assert hashlib.sha256(body).hexdigest() in devnet.bundles
