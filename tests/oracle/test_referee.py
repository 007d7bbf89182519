"""The referee of a disputed segment (oracle/verification/referee.py), played by each party
that would game it: a saboteur submitter whose job code departs only in a verifier's
sandbox (keyed on the files around it, or on the machine), a lying first verifier, a faking
provider who concedes or claims its fake, a provider who never answers, and whoever forges
or replays a dispute answer (another key, another dispute, a reveal that opens nothing).

A real (numpy) proof of 6 segments and the oracle's whole pipeline (`verify`); the relay is
a fake of the API's (as in test_early_replay): it keeps the oracle's signed tasks and
answers them with reports signed by the drawn verifier's own key, and a dispute with the
provider's own signed commitment and reveal, each computed by the test as the party it
plays would compute it. The verdicts are stored (`AttestationStore`), and a fraud the
referee found is a slash case that burns.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey
from oracle_fixtures import World, job_spec, make_world

from oracle.storage.db import make_engine
from oracle.storage.fraud import fraud_cases
from oracle.storage.store import AttestationStore
from oracle.verification.referee import DISPUTE
from oracle.verification.verifiers import FEE_EVIDENCE, Candidate, VerifierSpotChecker
from oracle.verification.verify import Reason, VerificationResult, verify
from pot import harness
from pot.examples.numpy_mlp import MLPTrainer
from pot.manifest import MANIFEST_NAME, Manifest
from pot.seeds import derive_data_seed
from pot.trainer import TrainContext
from proofnet.messages.dispute import (
    DisputeAnswer,
    DisputeCommitment,
    DisputeReveal,
    DisputeTask,
    commitment_of,
    new_salt,
)
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.key_grant import KeyRequest
from proofnet.messages.verification import VerificationReport, VerificationTask
from proofnet.messages.verification_fee import FeeEvidence

ORACLE = SigningKey(b"\x0c" * 32)
PROOF = {
    "trainer": "mlp:MLPTrainer",
    "config": {"hidden": 8},
    "schedule": {"steps": 30, "dataset_size": 128, "batch_size": 16},
    "steps_per_checkpoint": 5,
    "spot_checks": 2,
    "tolerance_ppm": 0,
}
NOW = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)

# What a verifier computes for a segment: the committed hash, or a departure.
Hashes = Callable[[VerificationTask, int], str]
# The provider's worker's answer to a dispute: (commitment, reveal) as JSON, or None.
ProviderPlay = Callable[[DisputeTask], tuple[dict[str, Any] | None, dict[str, Any] | None]]


def departed(machine: str, segment: int) -> str:
    """What job code that departs computes for `segment` on `machine`."""
    return hashlib.sha256(f"{machine}/{segment}".encode()).hexdigest()


@dataclass
class Relay:
    """The API's relay: verification tasks to drawn verifiers, disputes to the provider."""

    world: World
    manifest: Manifest
    hashes: Hashes
    provider: ProviderPlay | None = None
    verifiers: dict[str, SigningKey] = field(
        default_factory=lambda: {
            bytes(k.verify_key).hex(): k for k in (SigningKey.generate() for _ in range(4))
        }
    )
    payouts: dict[str, str] = field(default_factory=dict)
    tasks: list[VerificationTask] = field(default_factory=list)
    disputes: list[DisputeTask] = field(default_factory=list)

    def __post_init__(self) -> None:
        for key in self.verifiers:
            self.payouts.setdefault(key, f"addr-{key[:8]}")

    def artifact(self, job_id: str, name: str) -> bytes:
        return self.world.feed.artifact(job_id, name)

    def worker_payout(self, worker_key: str) -> str | None:
        return self.world.lease.payout_address

    def verifier_candidates(self, device_class: str, exclude: str) -> list[Candidate]:
        return [Candidate(k, p) for k, p in self.payouts.items() if k != exclude]

    def post_verification(self, task: VerificationTask) -> dict[str, Any]:
        self.tasks.append(task)
        leaves = self.manifest.leaves
        results = [
            {
                "segment": s,
                "weights_hash": self.hashes(task, s),
                "update_norm": leaves[s].update_norm,
                "distance": "0" if self.hashes(task, s) == leaves[s].weights else "1",
            }
            for s in task.segments
        ]
        fields = {
            "status": "passed" if all(r["distance"] == "0" for r in results) else "failed",
            "initial_weights_hash": leaves[0].weights,
            "results": results,
            "repeat": results[0],  # the job's code is deterministic on one machine
            "payout_address": self.payouts.get(task.verifier),
        }
        report = VerificationReport.sign(self.verifiers[task.verifier], task, **fields)
        return {"report": report.to_json(), "created_at": NOW.isoformat()}

    def request_keys(self, request: KeyRequest) -> int:
        raise AssertionError("the job is not sealed")

    def post_dispute(self, task: DisputeTask) -> dict[str, Any]:
        self.disputes.append(task)
        commitment, reveal = (None, None) if self.provider is None else self.provider(task)
        return {"commitment": commitment, "reveal": reveal, "created_at": NOW.isoformat()}

    @property
    def first_verifier(self) -> str:
        return self.tasks[0].verifier


def _spec() -> JobSpec:
    data = job_spec().model_dump(mode="python")
    data["model"] = {"repo_url": "https://example.org/numpy-mlp.git", "commit": "a" * 40}
    data["proof"] = PROOF
    data["commands"] = []
    return JobSpec.from_dict(data)


@pytest.fixture(scope="module")
def proof(tmp_path_factory: pytest.TempPathFactory) -> tuple[JobSpec, dict[str, bytes], str]:
    """An honest provider's proof of the job (its files) for a fixed lease nonce."""
    spec = _spec()
    nonce = "ab" * 32
    job_dir = tmp_path_factory.mktemp("provider")
    schedule = spec.schedule
    assert schedule is not None
    ctx = TrainContext(
        job_dir=job_dir,
        job_seed=spec.seed,
        data_seed=derive_data_seed(spec.seed, bytes.fromhex(nonce)),
        schedule=schedule,
        config=dict(PROOF["config"]),  # type: ignore[call-overload]
    )
    harness.train(MLPTrainer(ctx), ctx, job_dir / "pot")
    files = {f"pot/{p.name}": p.read_bytes() for p in sorted((job_dir / "pot").iterdir())}
    return spec, files, nonce


def _world(proof: tuple[JobSpec, dict[str, bytes], str]) -> tuple[World, Manifest]:
    spec, files, nonce = proof
    manifest = Manifest.from_bytes(files["pot/" + MANIFEST_NAME])
    digest = {n: hashlib.sha256(b).hexdigest() for n, b in files.items()}
    world = make_world(
        spec=spec, pot_root=manifest.root, results={"metrics.json": "e" * 64} | digest
    )
    world.nonce = nonce
    world.attestation = world.variant(nonce=nonce)
    world.set_lease(nonce=nonce)
    for name, blob in files.items():
        world.feed.artifacts[(spec.job_id, name)] = blob
    return world, manifest


def _run(
    proof: tuple[JobSpec, dict[str, bytes], str],
    hashes: Callable[[Relay, VerificationTask, int], str],
    provider: Callable[[Relay, DisputeTask], tuple[Any, Any]] | None = None,
    *,
    now: datetime = NOW,
    relay_disputes: bool = True,
) -> tuple[VerificationResult, Relay, World]:
    world, manifest = _world(proof)
    relay = Relay(world, manifest, lambda t, s: "")
    relay.hashes = lambda task, s: hashes(relay, task, s)
    if provider is not None:
        relay.provider = lambda task: provider(relay, task)
    checker = VerifierSpotChecker(
        relay, ORACLE, now=lambda: now, disputes=relay if relay_disputes else None
    )
    return verify(world.sign(), world.context(spot_checker=checker)), relay, world


# -- how each party computes -----------------------------------------------------------


def honest(relay: Relay, task: VerificationTask, s: int) -> str:
    return relay.manifest.leaves[s].weights


def sandbox_saboteur(relay: Relay, task: VerificationTask, s: int) -> str:
    """Job code keyed on the files around it: every segment but the first departs in a
    verifier's sandbox, the same way on every machine (deterministic)."""
    return honest(relay, task, s) if s == task.segments[0] else departed("sandbox", s)


def machine_saboteur(relay: Relay, task: VerificationTask, s: int) -> str:
    """Job code keyed on the machine: departs differently on each verifier."""
    return honest(relay, task, s) if s == task.segments[0] else departed(task.verifier, s)


def lying_first_verifier(relay: Relay, task: VerificationTask, s: int) -> str:
    """The first verifier drawn says the provider's segments do not replay; it lies."""
    if task.verifier == relay.first_verifier and s != task.segments[0]:
        return departed("liar", s)
    return honest(relay, task, s)


def answer(
    relay: Relay,
    task: DisputeTask,
    computed: Callable[[int], str],
    *,
    key: SigningKey | None = None,
    commit_to: DisputeTask | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The provider's worker's commitment and reveal of what its sandbox replay computed."""
    key = key or relay.world.worker
    leaves = relay.manifest.leaves
    body = DisputeAnswer.model_validate(
        {
            "status": "passed",
            "initial_weights_hash": leaves[0].weights,
            "results": [
                {
                    "segment": s,
                    "weights_hash": computed(s),
                    "update_norm": leaves[s].update_norm,
                    "distance": "0",
                }
                for s in task.segments
            ],
        }
    )
    salt = new_salt()
    target = commit_to or task
    commitment = DisputeCommitment.sign(key, target, commitment_of(body, salt, target))
    reveal = DisputeReveal.sign(key, target, body, salt)
    return commitment.to_json(), reveal.to_json()


def reproduces(relay: Relay, task: DisputeTask) -> tuple[Any, Any]:
    """Its sandbox replay reaches its commitment (a machine-keyed saboteur's honest
    provider, or a faker lying about its own replay)."""
    return answer(relay, task, lambda s: relay.manifest.leaves[s].weights)


def concedes(relay: Relay, task: DisputeTask) -> tuple[Any, Any]:
    """Its sandbox replay departs as the verifiers' did."""
    return answer(relay, task, lambda s: departed("sandbox", s))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AttestationStore]:
    engine = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
    s = AttestationStore(engine)
    s.create_schema()
    yield s
    engine.dispose()


def _stored(store: AttestationStore, world: World, result: VerificationResult) -> Any:
    row, _ = store.receive(world.attestation, world.sign())
    assert row.id is not None
    store.apply(row.id, result)
    return store.get(row.id)


# -- the tests ----------------------------------------------------------------------------


def test_an_honest_proof_is_verified_without_a_dispute(proof: Any) -> None:
    result, relay, _ = _run(proof, honest)
    assert result.ok, result
    assert len(relay.tasks) == 1 and relay.disputes == []


def test_a_lying_first_verifier_is_outvoted_and_earns_nothing(proof: Any) -> None:
    result, relay, _ = _run(proof, lying_first_verifier, concedes)
    assert result.ok, result
    first, second = relay.tasks
    assert second.verifier != first.verifier and second.segments == first.segments
    assert relay.disputes == []  # the second verifier reproduced the commitment
    assert result.spot_check is not None and result.spot_check.report is not None
    fee = FeeEvidence.from_json(result.spot_check.report[FEE_EVIDENCE])
    assert fee.verifier == second.verifier != first.verifier
    assert result.spot_check.report[DISPUTE]["first_report"]["verifier"] == first.verifier


def test_the_second_verifier_is_neither_the_provider_nor_the_first_nor_paid_to_either(
    proof: Any,
) -> None:
    """The first verifier's second worker, paid to the same address, is never the
    referee: candidates paid to the first verifier's address are left out."""
    world, manifest = _world(proof)
    relay = Relay(world, manifest, lambda t, s: "")
    relay.hashes = lambda task, s: lying_first_verifier(relay, task, s)
    checker = VerifierSpotChecker(relay, ORACLE, now=lambda: NOW, disputes=relay)
    # Who the first draw picks, found by drawing once; then give it sybils.
    verify(world.sign(), world.context(spot_checker=checker))
    first = relay.tasks[0].verifier
    for key in relay.verifiers:
        if key != first:
            relay.payouts[key] = relay.payouts[first]
    relay.payouts[bytes(world.worker.verify_key).hex()] = "provider-own"
    relay.tasks.clear()
    result = verify(world.sign(), world.context(spot_checker=checker))
    assert result.outcome == "retry" and "no online verifier" in result.message
    assert [t.verifier for t in relay.tasks] == [first]


def test_a_saboteur_keyed_on_the_sandbox_gets_neither_results_nor_a_slash(
    proof: Any, store: AttestationStore
) -> None:
    """Both verifiers depart alike, and so does the provider's own sandbox replay: nothing
    is proven. The honest provider is unpaid but not slashed; the verdict is `unproven`,
    so the results stay withheld (the release rule reads it) and the escrow refunds."""
    result, relay, world = _run(proof, sandbox_saboteur, concedes)
    assert (result.outcome, result.reason, result.fault) == (
        "unproven",
        Reason.REPLAY_UNPROVEN,
        "provider",
    )
    (dispute,) = relay.disputes
    assert dispute.provider == world.attestation.worker_key
    assert dispute.verifier_tasks == (relay.tasks[0].digest, relay.tasks[1].digest)
    assert set(dispute.segments) < set(relay.tasks[0].segments)
    row = _stored(store, world, result)
    assert (row.status, row.reason, row.fault) == ("unproven", "replay_unproven", "provider")
    assert row.payable_escrow is None
    assert fraud_cases(store) == []


def test_a_saboteur_keyed_on_the_machine_gets_the_provider_slashed_but_not_paid(
    proof: Any, store: AttestationStore
) -> None:
    """The machine-keyed saboteur whose two verifiers happen to agree: the provider's
    sandbox reproduces its commitment, which is what a provider lying about its replay
    would say too. Rejected, the provider's fault, a fraud; its slash burns."""
    result, relay, world = _run(proof, sandbox_saboteur, reproduces)
    assert (result.outcome, result.reason, result.fault) == (
        "rejected",
        Reason.REFEREED_REPLAY_FAILED,
        "provider",
    )
    _stored(store, world, result)
    (case,) = fraud_cases(store)
    assert case.burns and case.reason == "refereed_replay_failed"


def test_verifiers_that_depart_differently_prove_nothing(proof: Any) -> None:
    result, relay, _ = _run(proof, machine_saboteur, reproduces)
    assert (result.outcome, result.fault) == ("unproven", None)
    assert relay.disputes == []  # nothing the provider could say would decide it


def test_a_faking_provider_who_concedes_is_unpaid(proof: Any) -> None:
    """A faker's committed segments are not what anyone computes: the verifiers agree on
    the true hashes, and its own honest sandbox replay concedes. Unpaid (EV = f C - p P)."""

    def truth(relay: Relay, task: VerificationTask, s: int) -> str:
        return honest(relay, task, s) if s == task.segments[0] else departed("truth", s)

    def faker(relay: Relay, task: DisputeTask) -> tuple[Any, Any]:
        return answer(relay, task, lambda s: departed("truth", s))

    result, _, _ = _run(proof, truth, faker)
    assert (result.outcome, result.reason) == ("unproven", Reason.REPLAY_UNPROVEN)


def test_a_provider_that_never_answers_is_waited_for_then_concedes(proof: Any) -> None:
    result, relay, _ = _run(proof, sandbox_saboteur, None)
    assert result.outcome == "retry" and "answer the dispute" in result.message
    late = NOW + timedelta(hours=2)
    result, relay, _ = _run(proof, sandbox_saboteur, None, now=late)
    assert (result.outcome, result.fault) == ("unproven", "provider")
    assert "did not answer" in result.message


def test_without_a_dispute_relay_a_confirmed_departure_is_unproven_never_slashed(
    proof: Any,
) -> None:
    result, relay, _ = _run(proof, sandbox_saboteur, reproduces, relay_disputes=False)
    assert (result.outcome, result.fault) == ("unproven", "provider")
    assert relay.disputes == []


@pytest.mark.parametrize(
    "forgery",
    ["other_key", "other_dispute", "reveal_without_commitment", "reveal_opens_nothing"],
)
def test_a_forged_or_replayed_answer_counts_as_no_answer(proof: Any, forgery: str) -> None:
    """Someone (the API host, the submitter) answers for the provider, or replays the
    provider's answer to another dispute: the oracle counts none of them, so the slash that
    only the provider's own claim triggers never follows, and after the window the dispute
    is unproven like a silent one."""

    def forged(relay: Relay, task: DisputeTask) -> tuple[Any, Any]:
        if forgery == "other_key":
            return answer(
                relay, task, lambda s: relay.manifest.leaves[s].weights, key=SigningKey.generate()
            )
        if forgery == "other_dispute":
            other = task.model_copy(update={"segments": (task.segments[0] + 100,)})
            return answer(relay, task, lambda s: relay.manifest.leaves[s].weights, commit_to=other)
        commitment, reveal = reproduces(relay, task)
        if forgery == "reveal_without_commitment":
            return None, reveal
        _, other_reveal = reproduces(relay, task)  # another salt: opens another commitment
        return commitment, other_reveal

    result, _, _ = _run(proof, sandbox_saboteur, forged)
    assert result.outcome == "retry", result
    result, _, _ = _run(proof, sandbox_saboteur, forged, now=NOW + timedelta(hours=2))
    assert (result.outcome, result.reason) == ("unproven", Reason.REPLAY_UNPROVEN)
