"""Co-signers on a real devnet with real escrows, builders and signed unit attestations:
a co-signer refuses a batch that settles a running relay's escrow early (paying the stages
verified so far and refunding the rest while later stages still run), and a batch that
leaves out a completed stage before its own grace period ran out; it signs the honest batch
once the job is over. A co-signer whose own store still holds a superseded cluster-node
attestation judges it from the feed as the proposer did and signs the honest batch."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_units_settlement_devnet as units_devnet
from test_units_settlement_devnet import Devnet, _claims, _locked_world, _unsigned
from unit_fixtures import UnitWorld, node_topology, relay_topology

from oracle.models import REJECTED
from oracle.settlement.chain_view import BlockfrostChainView
from oracle.settlement.quorum import CoSigner, IntakeVerifier, QuorumRefusal
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from oracle.verification.verify import Reason, verify

# The devnet of the relay settlement tests (module-scoped: this module runs its own).
devnet = units_devnet.devnet


def _cosigner(devnet: Devnet, world: UnitWorld) -> CoSigner:
    """Oracle 1 co-signing with its own store (the world's), API feed and chain view."""
    scenario = devnet.scenario
    return CoSigner(
        scenario.deployment,
        BlockfrostChainView(devnet.api.url),
        scenario.oracle_keys[1],
        IntakeVerifier(world.context(ntx_policy=scenario.ntx_policy)),
    )


def _store(tmp_path: Path) -> AttestationStore:
    store = AttestationStore(make_engine(f"sqlite:///{tmp_path / 'cosigner.db'}"))
    store.create_schema()
    return store


def _review(devnet: Devnet, cosigner: CoSigner, world: UnitWorld, units: list[int]) -> bytes:
    scenario = devnet.scenario
    signers = [scenario.oracle_pkhs[0], scenario.oracle_pkhs[1]]
    unsigned, body = _unsigned(devnet, _claims(world, {i: world.sign(i) for i in units}), signers)
    return cosigner.review(unsigned.tx_cbor, body)


def test_cosigner_refuses_to_settle_a_running_pipeline_early(
    devnet: Devnet, tmp_path: Path
) -> None:
    world = _locked_world(devnet, relay_topology(3, None), 0, _store(tmp_path))
    cosigner = _cosigner(devnet, world)
    world.complete(0)
    world.complete(1)
    # Stages 0 and 1 verify, chain and are paid exactly; but stage 2 still runs, and the
    # refund would take its pay back to the submitter.
    with pytest.raises(QuorumRefusal, match=f"job {world.job_id} is running"):
        _review(devnet, cosigner, world, [0, 1])

    world.complete(2)
    world.set_job(status="completed")
    # Over, but stage 2 completed and is neither in the batch nor decided by this oracle:
    # it waits for its grace period (its own clock, from its first sighting: now).
    with pytest.raises(QuorumRefusal, match=r"unit\(s\) \[2\] completed"):
        _review(devnet, cosigner, world, [0, 1])
    assert len(_review(devnet, cosigner, world, [0, 1, 2])) > 64


def test_cosigner_judges_a_superseded_node_attestation_from_the_feed(
    devnet: Devnet, tmp_path: Path
) -> None:
    store = _store(tmp_path)
    world = _locked_world(devnet, node_topology(2), 0, store)
    context = world.context(ntx_policy=devnet.scenario.ntx_policy)
    # Cluster attempt 1: node 0 completed and this co-signer verified its attestation too.
    world.complete(0)
    cose = world.sign(0)
    row, _ = store.receive(world.attestation(0), cose)
    assert row.id is not None
    assert store.apply(row.id, verify(cose, context, own_id=row.id)).status == "verified"
    # Node 1 was lost: the API queued both nodes again, and attempt 2 completed the job.
    world.nonces[0] = "77" * 32
    world.outputs.clear()
    world.cluster_output = "3" * 64
    world.complete(0)
    world.complete(1)
    world.set_job(status="completed")

    witness = _review(devnet, _cosigner(devnet, world), world, [0, 1])
    assert len(witness) > 64
    stale = store.get(row.id)
    assert stale is not None and stale.status == REJECTED
    assert stale.reason == Reason.LEASE_SUPERSEDED and stale.payable_escrow is None
