"""A sealed job's lost attempt is paid for the segments it proved, like any other: its worker
signed its claim while it trained (in the clear: hashes only), and the drawn verifier of its
segments gets their keys from that worker, which answers key requests for its own lease's
files after the lease was lost. Played as the attacker:

- the submitter (who wants the lost provider unpaid) cannot stop it: once the lost
  provider's worker answers, the claim is verified and both attempts are paid, together;
- a lost provider that never answers leaves its claim waiting, never refused and never
  blamed; the escrow waits for it only the grace period, then pays the resuming provider
  alone (the rest is refunded);
- the key request is the lost attempt's own: it names the lost provider, not the one that
  resumed with the same nonce (whose worker would grant keys that open nothing, and so
  have the lost provider blamed for withholding; the API's and the worker's refusals are
  tests/worker/test_sealed_proof.py's).

The chain of relays is a fake verifier desk: the API's key request and the lost worker's
grant are modelled by whether the lost worker answers; the verifier replays honestly once
it holds the keys (tests/worker/test_sealed_proof.py drives the real API and worker).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey
from sqlmodel import Session
from test_attempts_settlement import NoChain, _store_verified
from test_verify_resumed import LOST_KEY, lost_claim, repo, resumed_world  # noqa: F401

from oracle.inputs.feed import ArtifactMissing
from oracle.settlement.ports import OutRef, UnitEscrow
from oracle.settlement.queue import AttestationQueue
from oracle.settlement.readiness import JobEndReadiness, ReadinessPolicy
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from oracle.verification.verifiers import Candidate, VerifierSpotChecker
from oracle.verification.verify import verify
from pot.manifest import Manifest
from proofnet.messages.key_grant import KeyRequest
from proofnet.messages.verification import VerificationReport, VerificationTask

VERIFIERS = [SigningKey(bytes([0x40 + i]) * 32) for i in range(3)]


@dataclass
class SealedDesk:
    """The API as the oracle sees it, for a sealed job whose lost attempt's worker answers
    key requests (`answers`) or is silent."""

    feed: Any
    lost_worker: str
    answers: bool
    key_requests: list[KeyRequest] = field(default_factory=list)
    tasks: list[VerificationTask] = field(default_factory=list)

    def artifact(self, job_id: str, name: str) -> bytes:
        blob = self.feed.artifacts.get((job_id, name))
        if blob is None:
            raise ArtifactMissing(name)
        return bytes(blob)

    def worker_payout(self, worker_key: str) -> str | None:
        info = self.feed.workers.get(worker_key)
        return None if info is None else info.payout_address

    def verifier_candidates(self, device_class: str, exclude: str) -> list[Candidate]:
        keys = (bytes(k.verify_key).hex() for k in VERIFIERS)
        return [Candidate(k, f"addr-{k[:8]}") for k in keys if k != exclude]

    def request_keys(self, request: KeyRequest) -> int:
        self.key_requests.append(request)
        return len(self.key_requests)

    def _granted(self, task: VerificationTask) -> bool:
        """The lost worker answers (worker.key_grants) only a request naming its own lease:
        its key, the lease's nonce, the task's verifier and files."""
        return self.answers and any(
            r.provider == self.lost_worker == task.provider
            and (r.nonce, r.recipient) == (task.nonce, task.verifier)
            and set(r.files) == set(task.files[1:])
            for r in self.key_requests
        )

    def post_verification(self, task: VerificationTask) -> dict[str, Any]:
        self.tasks.append(task)
        report = None
        if self._granted(task):
            prefix = Manifest.from_bytes(self.artifact(task.job_id, f"attempts/1/{task.files[0]}"))
            results = [
                {
                    "segment": s,
                    "weights_hash": prefix.leaves[s].weights,
                    "update_norm": prefix.leaves[s].update_norm,
                    "distance": "0",
                }
                for s in task.segments
            ]
            key = next(k for k in VERIFIERS if bytes(k.verify_key).hex() == task.verifier)
            report = VerificationReport.sign(
                key,
                task,
                status="passed",
                initial_weights_hash=prefix.leaves[0].weights,
                results=results,
                repeat=results[0],
            ).to_json()
        # No grant, no replay: the verifier's task stays unanswered.
        return {"report": report, "created_at": datetime.now(UTC).isoformat()}


def _sealed(repo: tuple[str, str], tmp_path: Path, answers: bool) -> tuple[Any, ...]:  # noqa: F811
    world, _, first_files = resumed_world(repo, tmp_path)
    job = world.feed.jobs[world.job_id]
    world.feed.jobs[world.job_id] = replace(job, sealed=True)
    lost_worker = LOST_KEY.verify_key.encode().hex()
    desk = SealedDesk(world.feed, lost_worker, answers)
    checker = VerifierSpotChecker(desk, SigningKey(b"\x05" * 32))  # type: ignore[arg-type]
    claim = lost_claim(world, first_files)
    return world, desk, checker, claim


def _readiness(world: Any, tmp_path: Path) -> tuple[Any, JobEndReadiness, UnitEscrow, list[float]]:
    db = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
    AttestationStore(db).create_schema()
    clock = [1_000.0]
    readiness = JobEndReadiness(
        world.feed, NoChain(), db, ReadinessPolicy(grace_s=600, recheck_s=0), lambda: clock[0]
    )
    ref = OutRef(world.escrow.tx_id, world.escrow.index)
    return db, readiness, UnitEscrow(ref, world.job_id, 1, 0.0), clock


def test_a_sealed_lost_attempt_whose_worker_answers_is_paid_beside_the_resumed_one(
    repo: tuple[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    world, desk, checker, claim = _sealed(repo, tmp_path, answers=True)
    result = verify(world.sign(claim, LOST_KEY), world.context(spot_checker=checker))
    assert result.ok, result
    assert "proof_of_training" in result.checks
    (request,) = {r.digest: r for r in desk.key_requests}.values()
    assert request.provider == desk.lost_worker != world.attestation.worker_key
    assert all(task.kind == "claim" for task in desk.tasks)

    db, readiness, group, _ = _readiness(world, tmp_path)
    _store_verified(db, world.attestation, world.worker)
    assert not readiness.ready(group)  # the lost attempt's claim is not decided yet
    _store_verified(db, claim, LOST_KEY)
    assert readiness.ready(group)
    with Session(db) as session:
        claims = AttestationQueue().unit_claims(session, [group.escrow])
    assert sorted((c.attempt, c.worker_key) for c in claims) == sorted(
        [(1, desk.lost_worker), (2, world.attestation.worker_key)]
    )


def test_a_silent_lost_provider_is_unpaid_and_the_resumed_one_paid_after_the_grace(
    repo: tuple[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    world, desk, checker, claim = _sealed(repo, tmp_path, answers=False)
    for _ in range(2):  # asked again: still waiting, never refused, nobody blamed
        result = verify(world.sign(claim, LOST_KEY), world.context(spot_checker=checker))
        assert result.outcome == "retry" and result.fault is None, result
        assert "waiting for verifier" in result.message
    assert desk.key_requests and desk.key_requests[0].provider == desk.lost_worker

    db, readiness, group, clock = _readiness(world, tmp_path)
    _store_verified(db, world.attestation, world.worker)
    assert not readiness.ready(group)
    clock[0] += 601  # the grace period since the job was first seen over
    assert readiness.ready(group)
    with Session(db) as session:
        claims = AttestationQueue().unit_claims(session, [group.escrow])
    assert [(c.attempt, c.worker_key) for c in claims] == [(2, world.attestation.worker_key)]
