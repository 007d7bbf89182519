"""The verification pipeline: an honest attestation passes; each kind of lie is rejected
with its own reason code."""

from __future__ import annotations

import dataclasses
import secrets
from dataclasses import FrozenInstanceError

import cbor2
import pytest
from nacl.signing import SigningKey
from oracle_fixtures import (
    BUDGET,
    NETWORK,
    PRICE,
    World,
    escrow_datum,
    escrow_output,
    make_world,
)

from chain.contracts import types as t
from oracle.inputs.chain import ChainUnavailable, EscrowLookup
from oracle.inputs.feed import FeedError
from oracle.models import escrow_ref
from oracle.verification.verify import Reason, Rejection, VerificationResult, authenticate, verify
from proofnet.messages.attestation import AttestationDomain, EscrowRef


@pytest.fixture
def world() -> World:
    return make_world()


def rejected(world: World, cose: bytes | None = None, **ctx: object) -> VerificationResult:
    result = verify(world.sign() if cose is None else cose, world.context(**ctx))
    assert result.outcome == "rejected", result
    return result


def test_honest_attestation_is_verified(world: World) -> None:
    result = verify(world.sign(), world.context())
    assert result.ok and result.reason is None
    assert result.attestation == world.attestation
    assert result.checks[0] == "signature_and_domain" and result.checks[-1] == "result_hashes"
    with pytest.raises(FrozenInstanceError):
        result.message = "changed"  # type: ignore[misc]


def test_forged_signature(world: World) -> None:
    cose = cbor2.loads(world.sign())
    cose[3] = bytes(64)
    assert rejected(world, cbor2.dumps(cose)).reason == Reason.BAD_SIGNATURE
    # Signed by another key than the attested worker key.
    with pytest.raises(ValueError, match="does not match"):
        world.sign(key=SigningKey.generate())


def test_payload_tampered_after_signing(world: World) -> None:
    protected, unprotected, payload, signature = cbor2.loads(world.sign())
    tampered = payload.replace(str(PRICE).encode(), str(PRICE * 10).encode())
    cose = cbor2.dumps([protected, unprotected, tampered, signature])
    assert rejected(world, cose).reason == Reason.BAD_SIGNATURE


@pytest.mark.parametrize("garbage", [b"", b"\xff\x00", cbor2.dumps([1, 2, 3]), cbor2.dumps("x")])
def test_malformed(world: World, garbage: bytes) -> None:
    assert rejected(world, garbage).reason == Reason.MALFORMED
    with pytest.raises(Rejection) as info:
        authenticate(garbage, world.context())
    assert info.value.reason == Reason.MALFORMED


def test_wrong_network_and_wrong_script(world: World) -> None:
    assert rejected(world, network="preprod").reason == Reason.WRONG_NETWORK
    assert rejected(world, escrow_script_hash="ab" * 28).reason == Reason.WRONG_SCRIPT


def test_unregistered_worker_and_other_payout_address(world: World) -> None:
    world.feed.workers.clear()
    assert rejected(world).reason == Reason.WORKER_UNREGISTERED
    other = make_world()
    world.feed.workers[world.attestation.worker_key] = other.feed.workers[
        other.attestation.worker_key
    ]
    assert rejected(world).reason == Reason.PAYOUT_MISMATCH


def test_unknown_job_and_unrecorded_escrow(world: World) -> None:
    world.set_job(escrow=None)
    assert rejected(world).reason == Reason.ESCROW_UNRECORDED
    world.feed.jobs.clear()
    assert rejected(world).reason == Reason.JOB_UNKNOWN


def test_same_attestation_on_another_escrow(world: World) -> None:
    other = EscrowRef(tx_id=secrets.token_hex(32), index=1)
    moved = world.variant(
        domain=AttestationDomain(
            network=NETWORK,
            escrow_script_hash=world.attestation.domain.escrow_script_hash,
            escrow=other,
            job_id=world.job_id,
        )
    )
    # The other escrow even exists and names the job: it is still not this job's escrow.
    world.chain.put(
        EscrowLookup("unspent", escrow_output(other, escrow_datum(world.job_id))), other
    )
    assert rejected(world, world.sign(moved)).reason == Reason.ESCROW_MISMATCH


def test_cross_job(world: World) -> None:
    """An attestation for job B presented against job A's escrow."""
    job_b = make_world()
    b_on_a = job_b.variant(
        domain=AttestationDomain(
            network=NETWORK,
            escrow_script_hash=world.attestation.domain.escrow_script_hash,
            escrow=world.escrow,
            job_id=job_b.job_id,
        )
    )
    job_b.set_job(escrow=world.escrow)
    job_b.chain = world.chain
    result = verify(job_b.sign(b_on_a), job_b.context())
    assert result.reason == Reason.ESCROW_JOB_MISMATCH


def test_escrow_missing_spent_elsewhere_or_bad_datum(world: World) -> None:
    world.set_escrow(EscrowLookup("missing"))
    assert rejected(world).reason == Reason.ESCROW_MISSING
    out = escrow_output(world.escrow, escrow_datum(world.job_id))
    world.set_escrow(EscrowLookup("spent", out, spent_by="aa" * 32))
    assert rejected(world).reason == Reason.ESCROW_SPENT
    world.set_escrow(EscrowLookup("unspent", escrow_output(world.escrow, None)))
    assert rejected(world).reason == Reason.ESCROW_DATUM_INVALID
    world.set_escrow(EscrowLookup("unspent", escrow_output(world.escrow, escrow_datum("12" * 32))))
    assert rejected(world).reason == Reason.ESCROW_JOB_MISMATCH
    world.set_escrow(
        EscrowLookup(
            "unspent",
            escrow_output(world.escrow, escrow_datum(world.job_id), script_hash="cd" * 28),
        )
    )
    assert rejected(world).reason == Reason.ESCROW_WRONG_ADDRESS


def test_escrow_other_unit_or_expired(world: World) -> None:
    world.set_escrow(
        EscrowLookup(
            "unspent", escrow_output(world.escrow, escrow_datum(world.job_id, ntx_name="00"))
        )
    )
    assert rejected(world).reason == Reason.ESCROW_WRONG_UNIT
    world.set_escrow(
        EscrowLookup(
            "unspent", escrow_output(world.escrow, escrow_datum(world.job_id, deadline_ms=1))
        )
    )
    assert rejected(world).reason == Reason.ESCROW_EXPIRED


def test_escrow_of_another_deployment_or_with_stray_tokens(world: World) -> None:
    """Escrows the batch script would refuse to settle: another batch script or oracle
    config named in the datum, or a token besides the NTX. The honest twin passes with the
    deployment pinned as the served oracle pins it."""
    pinned = {
        "batch_credential": "11" * 28,
        "config_policy": "22" * 28,
        "config_name": t.CONFIG_NFT_NAME.hex(),
    }
    assert verify(world.sign(), world.context(**pinned)).ok
    honest = escrow_datum(world.job_id)
    for field, value, reason in (
        ("batch_credential", b"\x44" * 28, Reason.ESCROW_WRONG_BATCH),
        ("config_policy", b"\x55" * 28, Reason.ESCROW_WRONG_CONFIG),
        ("config_name", b"other", Reason.ESCROW_WRONG_CONFIG),
    ):
        datum = dataclasses.replace(honest, **{field: value})
        world.set_escrow(EscrowLookup("unspent", escrow_output(world.escrow, datum)))
        assert rejected(world, **pinned).reason == reason
    stray = escrow_output(world.escrow, honest)
    stray = dataclasses.replace(stray, assets={**stray.assets, "ef" * 28: 1})
    world.set_escrow(EscrowLookup("unspent", stray))
    assert rejected(world, **pinned).reason == Reason.ESCROW_STRAY_TOKENS


def test_escrow_locked_under_another_oracle_set(world: World) -> None:
    """After a rotation the batch settles no escrow locked under the old oracle set: the
    oracle refuses to attest such an escrow's payout when it knows the live set."""
    honest = escrow_datum(world.job_id)
    live = bytes(honest.oracle_set).hex()
    assert verify(world.sign(), world.context(oracle_set=live)).ok
    assert rejected(world, oracle_set="ab" * 32).reason == Reason.ESCROW_WRONG_ORACLE_SET


def test_replayed_and_already_settled(world: World) -> None:
    leaf = world.attestation.leaf_hash().hex()
    world.store.leaves[leaf] = 7
    assert rejected(world).reason == Reason.REPLAYED
    # The stored attestation itself is not a replay of itself.
    assert verify(world.sign(), world.context(), own_id=7).ok
    world.store.leaves.clear()
    ref = escrow_ref(world.escrow.tx_id, world.escrow.index)
    world.store.payable[ref] = (3, "verified")
    assert rejected(world).reason == Reason.ESCROW_ALREADY_CLAIMED
    world.store.payable[ref] = (3, "settled")
    assert rejected(world).reason == Reason.ALREADY_SETTLED


def test_lease_of_another_worker_or_nonce(world: World) -> None:
    world.set_job(status="leased")
    assert rejected(world).reason == Reason.JOB_NOT_COMPLETED
    world.set_job(status="completed")
    world.set_lease(worker_key="01" * 32)
    assert rejected(world).reason == Reason.LEASE_OTHER_WORKER
    world.set_lease(nonce="02" * 32)
    assert rejected(world).reason == Reason.NONCE_MISMATCH


def test_inflated_gpu_time(world: World) -> None:
    att = world.attestation
    wall = att.ended_ms - att.started_ms
    over = world.variant(gpu_milliseconds=wall * world.lease.gpus + 1)
    assert rejected(world, world.sign(over)).reason == Reason.GPU_TIME_IMPLAUSIBLE
    at_limit = world.variant(gpu_milliseconds=wall * world.lease.gpus)
    assert verify(world.sign(at_limit), world.context()).ok
    early = world.variant(started_ms=world.lease.started_ms - 3_600_000)
    assert rejected(world, world.sign(early)).reason == Reason.TIMES_OUTSIDE_LEASE


def test_inflated_amount(world: World) -> None:
    over_price = world.variant(amount=PRICE + 1)
    assert rejected(world, world.sign(over_price)).reason == Reason.AMOUNT_EXCEEDS_PRICE
    world.set_escrow(
        EscrowLookup(
            "unspent", escrow_output(world.escrow, escrow_datum(world.job_id, budget=PRICE - 1))
        )
    )
    assert rejected(world).reason == Reason.AMOUNT_EXCEEDS_BUDGET
    # The datum's budget is fine but the output holds less NTX than it promises.
    world.set_escrow(
        EscrowLookup(
            "unspent",
            escrow_output(world.escrow, escrow_datum(world.job_id), locked=PRICE - 1),
        )
    )
    assert rejected(world).reason == Reason.AMOUNT_EXCEEDS_BUDGET
    huge = world.variant(amount=2**64 - 1)
    with pytest.raises(Rejection) as info:
        authenticate(world.sign(huge), world.context())
    assert info.value.reason == Reason.AMOUNT_EXCEEDS_BUDGET
    assert BUDGET > PRICE


def test_work_other_than_the_spec(world: World) -> None:
    image = world.variant(image_digest="sha256:" + "9" * 64)
    assert rejected(world, world.sign(image)).reason == Reason.IMAGE_MISMATCH
    command = world.variant(command_hash="8" * 64)
    assert rejected(world, world.sign(command)).reason == Reason.COMMAND_MISMATCH


def test_result_hashes_must_match_uploads(world: World) -> None:
    other = world.variant(result_hashes={"metrics.json": "7" * 64})
    assert rejected(world, world.sign(other)).reason == Reason.RESULT_HASHES_MISMATCH
    never = world.variant(result_hashes={"metrics.json": "e" * 64, "model.bin": "e" * 64})
    assert rejected(world, world.sign(never)).reason == Reason.RESULT_HASHES_MISMATCH
    world.set_job(results={"metrics.json": "e" * 64, "extra.csv": "1" * 64})
    assert rejected(world).reason == Reason.RESULT_HASHES_MISMATCH
    # Proof-of-training uploads are the spot check's business, not the attestation's.
    world.set_job(results={"metrics.json": "e" * 64, "pot/manifest.json": "1" * 64})
    assert verify(world.sign(), world.context()).ok


def test_unreachable_backends_mean_retry_not_rejection(world: World) -> None:
    class DownChain:
        def escrow_output(self, ref: EscrowRef) -> EscrowLookup:
            raise ChainUnavailable("backend down")

    class DownFeed:
        def worker(self, key: str) -> None:
            raise FeedError("API down")

    result = verify(world.sign(), world.context(chain=DownChain()))
    assert result.outcome == "retry" and result.reason is None and "backend down" in result.message
    result = verify(world.sign(), world.context(feed=DownFeed()))
    assert result.outcome == "retry" and "API down" in result.message


def test_an_escrow_this_oracle_co_signed_a_cancel_for_is_never_paid(world: World) -> None:
    ref = escrow_ref(world.escrow.tx_id, world.escrow.index)
    world.store.cancelled[ref] = "this oracle co-signed the cancel of escrow " + ref
    result = rejected(world)
    assert result.reason == Reason.ESCROW_CANCELLED and "co-signed the cancel" in result.message
    world.store.cancelled.clear()
    assert verify(world.sign(), world.context()).ok
