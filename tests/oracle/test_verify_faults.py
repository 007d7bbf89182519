"""Every verdict says whose fault it is: the provider's when its attestation or proof does
not hold, the job's when the job's escrow or code is at fault (then a proof that could not
be checked still pays the provider, and says why), nobody's when verified or postponed.
The verdict and its fault are stored and served with the attestation."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from oracle_fixtures import World, make_world

from oracle.inputs.feed import FeedError, JobInfo
from oracle.models import escrow_ref
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from oracle.verification.spotcheck import SpotCheckUnavailable, SpotCheckVerdict
from oracle.verification.verify import Reason, authenticate, verify
from proofnet.messages.attestation import Attestation


@dataclass
class FixedChecker:
    """A spot checker answering one verdict (stands in for `oracle.verification.verifiers`, whose real
    flow over HTTP is tests/worker/test_verifier_units.py)."""

    verdict: SpotCheckVerdict | None

    def check(self, att: Attestation, job: JobInfo) -> SpotCheckVerdict:
        if self.verdict is None:
            raise SpotCheckUnavailable("waiting for verifier")
        return self.verdict


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AttestationStore]:
    engine = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
    s = AttestationStore(engine)
    s.create_schema()
    yield s
    engine.dispose()


def test_rejections_name_the_provider_or_the_job(store: AttestationStore) -> None:
    world = make_world()
    assert verify(world.sign(), world.context()).fault is None
    # The provider attests with another nonce than the one its lease revealed: its fault.
    world.set_lease(nonce="0" * 64)
    result = verify(world.sign(), world.context())
    assert (result.outcome, result.reason, result.fault) == (
        "rejected",
        Reason.NONCE_MISMATCH,
        "provider",
    )
    world.set_lease(nonce=world.attestation.nonce)
    # The submitter's escrow was cancelled: not the provider's doing.
    ref = escrow_ref(world.escrow.tx_id, world.escrow.index)
    world.store.cancelled[ref] = "cancelled"
    result = verify(world.sign(), world.context())
    assert (result.reason, result.fault) == (Reason.ESCROW_CANCELLED, "job")


def test_a_proof_that_does_not_replay_is_the_providers_fault_unless_the_code_is(
    store: AttestationStore,
) -> None:
    world = make_world()
    provider_fault = SpotCheckVerdict(
        False,
        Reason.SPOT_CHECK_FAILED,
        "segments [2] do not replay",
        "ab",
        (1, 2),
        fault="provider",
    )
    result = verify(world.sign(), world.context(spot_checker=FixedChecker(provider_fault)))
    assert (result.outcome, result.reason, result.fault) == (
        "rejected",
        Reason.SPOT_CHECK_FAILED,
        "provider",
    )
    # Job code that does not replay: verified (the provider is paid), the job's fault, why.
    job_fault = SpotCheckVerdict(
        False, Reason.JOB_NOT_REPLAYABLE, "the job's code is not deterministic", "ab", (1,),
        fault="job",
    )  # fmt: skip
    result = verify(world.sign(), world.context(spot_checker=FixedChecker(job_fault)))
    assert (result.outcome, result.fault) == ("verified", "job")
    assert "not deterministic" in result.message
    # Waiting for the verifier is nobody's fault yet.
    waiting = verify(world.sign(), world.context(spot_checker=FixedChecker(None)))
    assert (waiting.outcome, waiting.fault) == ("retry", None)


def test_the_fault_is_stored_with_the_verdict(store: AttestationStore) -> None:
    def applied(world: World, verdict: SpotCheckVerdict) -> tuple[str, str | None, str]:
        cose = world.sign()
        [ident] = store.receive_many([(authenticate(cose, world.context()), cose)])
        result = verify(cose, world.context(spot_checker=FixedChecker(verdict)), own_id=ident)
        store.apply_many([(ident, result, None, 0.0)])
        row = store.get(ident)
        assert row is not None
        return row.status, row.fault, row.message

    job = SpotCheckVerdict(False, Reason.JOB_NOT_REPLAYABLE, "nondeterministic", fault="job")
    assert applied(make_world(store), job) == ("verified", "job", "nondeterministic")
    bad = SpotCheckVerdict(False, Reason.SPOT_CHECK_FAILED, "[2] does not replay")
    assert applied(make_world(store), bad) == ("rejected", "provider", "[2] does not replay")
    good = SpotCheckVerdict(True, None, "")
    assert applied(make_world(store), good) == ("verified", None, "")


def test_feed_errors_are_retried_not_blamed() -> None:
    world = make_world()

    class Unreachable(FixedChecker):
        def check(self, att: Attestation, job: JobInfo) -> SpotCheckVerdict:
            raise FeedError("API unreachable")

    result = verify(world.sign(), world.context(spot_checker=Unreachable(None)))
    assert (result.outcome, result.fault) == ("retry", None)
