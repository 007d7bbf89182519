"""`proofnet bench cheat`: each way to cheat, tried against the checks that should stop it.

Every strategy is played as the cheater would, on a real (numpy MLP) training run proven by
the network's harness (`pot`), and met by the code that meets it in the product:

- the oracle's checks before any replay, on the provider's attestation and the job's spec
  (`oracle.verification.proof_checks.check_manifest`: the root, then the schedule by `pot.conformance`);
- the oracle's draw (`oracle.verification.proof_checks.draw_segments`: its Ed25519 signature over the
  attestation seeds `pot.seeds.select_spot_checks`);
- the replay a drawn verifier runs (`pot.harness.replay` over the spec's trainer), judged as
  the oracle judges a report (every drawn segment replays bit for bit with a consistent
  update norm, checkpoint 0 is the trainer's);
- the GPU challenge's checks (Freivalds, `worker.challenge`; the API's timing rule,
  `api.services.gpu_challenges.allowed_seconds`) and the oracle's metering bound on
  rate-card GPU time (`oracle.verification.metering.proof_bound_ms` with the oracle's default slack and
  allowance).

These run in-process without the devnet, API or Docker ("method": "check_only"); what the
product cannot yet stop, or what only runs under Docker, is computed from the model
("model_only", `benchmarks.cheat_model`) and says which check (and which branch) it waits on.
With `end_to_end`, the proof cheats and the submitter's replay saboteur are also played
through the whole loop on a local devnet (`benchmarks.cheat_e2e`: API, three oracles settling
2-of-3 and drawing verifier workers, one bent provider each) and their rows say what the
oracles decided and whether the provider was paid on chain ("method": "end_to_end"); beside
them the spoofed GPU, an idle lease on a rate-card job and a resume from a forged checkpoint
(`benchmarks.cheat_e2e_more`: the API's onboarding challenge, the oracles' metering bound and
resume check).
Per strategy: caught (and by which check), the detection probability at the default number
of checked segments, the cheater's expected value with the default bond and price, and the
verification compute share. docs/benchmarks.md records the table.
"""

from __future__ import annotations

import hashlib
import math
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.cheat_model import (
    Terms,
    best_attested,
    best_padding,
    bond_for,
    checks_for,
    design_sigma,
    detection_probability,
    faked_segments,
    min_segments,
    padding_ev,
    padding_refusal,
    provider_ev,
    slack_for,
    verification_share,
)

FRACTIONS = (0.1, 0.25, 0.5)
JOB_SEED = 20_261_202
NONCE = bytes(range(16))
# The bench job: 20 segments of 5 steps (small enough to train in seconds on a CPU).
STEPS, INTERVAL, DATASET, BATCH = 100, 5, 256, 32
CONFIG: dict[str, object] = {"hidden": 16, "lr": "0.05"}
INTERVAL_REFERENCE = 100  # the spec's default steps_per_checkpoint
DRAWS = 400  # oracle draws (distinct signatures) over which the caught rate is counted


@dataclass
class Outcome:
    strategy: str
    cheater: str  # provider, submitter, or none (the honest control)
    method: str  # end_to_end | check_only | model_only
    caught: bool
    by: str  # the check that caught it, or why nothing did
    detection_probability: float
    expected_value: float  # NTX, the cheat's gain over playing honestly
    verification_share: float
    note: str = ""
    observed: dict[str, Any] = field(default_factory=dict)
    # end_to_end only: did the provider's payout address receive the price on chain?
    paid_on_chain: bool | None = None

    @property
    def deterred(self) -> bool:
        return self.caught or self.expected_value < 0


@dataclass(frozen=True)
class CheatReport:
    terms: Terms
    job: dict[str, int]
    outcomes: list[Outcome]

    def as_dict(self) -> dict[str, Any]:
        t = self.terms
        return {
            "terms": t.as_dict(),
            "derived": {
                "verification_share": round(verification_share(t), 4),
                "min_segments_for_5pct": min_segments(t),
                "spot_checks_for_95pct_at_f0.1": checks_for(0.95, 0.1),
                "spot_checks_for_95pct_at_f0.5": checks_for(0.95, 0.5),
                "slash_needed_at_cost_equal_price": {
                    str(f): round(bond_for(t, f), 2) for f in FRACTIONS
                },
            },
            "bench_job": self.job,
            "strategies": [asdict(o) for o in self.outcomes],
        }


# -- the bench job and the checks ----------------------------------------------------------


def _schedule() -> Any:
    from pot.schedule import Schedule

    return Schedule(
        total_steps=STEPS, steps_per_checkpoint=INTERVAL, dataset_size=DATASET, batch_size=BATCH
    )


def _context(
    job_dir: Path,
    *,
    seed: int = JOB_SEED,
    config: dict[str, object] | None = None,
) -> Any:
    from pot.seeds import derive_data_seed
    from pot.trainer import TrainContext

    return TrainContext(
        job_dir=job_dir,
        job_seed=seed,
        data_seed=derive_data_seed(seed, NONCE),
        schedule=_schedule(),
        config={**CONFIG, **(config or {})},
    )


def _train(
    job_dir: Path,
    *,
    seed: int = JOB_SEED,
    config: dict[str, object] | None = None,
    trainer: Callable[[Any], Any] | None = None,
) -> Any:
    from pot import harness
    from pot.examples.numpy_mlp import MLPTrainer

    ctx = _context(job_dir, seed=seed, config=config)
    return harness.train((trainer or MLPTrainer)(ctx), ctx, job_dir / "pot")


def _forge(
    job_dir: Path, *, steps: int = STEPS, faked: frozenset[int] = frozenset(), jump: float = 1e-6
) -> Any:
    """The provider's own loop over the library's recorder: `steps` steps, the segments in
    `faked` not trained (the weights moved by `jump`: tiny committed norms by default)."""
    from pot.examples.numpy_mlp import MLPTrainer
    from pot.recorder import ProofOfTraining

    ctx = _context(job_dir)
    trainer = MLPTrainer(ctx)
    sampler = ctx.schedule.sampler(ctx.data_seed)
    recorder = ProofOfTraining(
        job_dir / "pot", steps_per_checkpoint=INTERVAL, data_seed=ctx.data_seed
    )
    recorder.start(trainer.state())
    loss = 1.0
    for step in range(1, steps + 1):
        segment = (step - 1) // INTERVAL + 1
        indices = sampler.indices(step)
        if segment in faked:
            if step % INTERVAL == 0:
                trainer.params["W1"] += jump
        else:
            loss = trainer.train_step(step, indices)
        if recorder.record_step(indices, loss):
            recorder.commit(trainer.state())
    return recorder.finish(trainer.state())


def _spec(spot_checks: int) -> Any:
    """The bench job's spec: the numpy MLP trained by the harness over the bench schedule."""
    from proofnet.messages.jobspec import JobSpec

    return JobSpec.from_dict(
        {
            "model": {"repo_url": "https://example.org/numpy-mlp.git", "commit": "c" * 40},
            "framework": "numpy",
            "image": "python@sha256:" + "d" * 64,
            "commands": [],
            "resources": {
                "gpus": 1,
                "gpu_memory_mb": 1024,
                "cpus": 1,
                "ram_mb": 1024,
                "disk_mb": 1024,
                "max_duration_s": 3600,
            },
            "results": [{"path": "metrics.json", "kind": "json"}],
            "pricing": {"kind": "fixed", "amount": 100_000_000},
            "seed": JOB_SEED,
            "proof": {
                "trainer": "mlp:MLPTrainer",
                "config": CONFIG,
                "schedule": {"steps": STEPS, "dataset_size": DATASET, "batch_size": BATCH},
                "steps_per_checkpoint": INTERVAL,
                "spot_checks": spot_checks,
                "tolerance_ppm": 0,
            },
        }
    )


def _attestation(spec: Any, pot_root: str) -> Any:
    """What the provider signs for the proof: its root and the claim nonce."""
    from nacl.signing import SigningKey

    from oracle.service import escrow_script_hash
    from proofnet.messages.address import enterprise_address
    from proofnet.messages.attestation import Attestation, AttestationDomain, EscrowRef

    worker = SigningKey(hashlib.sha256(b"proofnet/bench/cheat/provider").digest())
    return Attestation(
        domain=AttestationDomain(
            network="devnet",
            escrow_script_hash=escrow_script_hash(),
            escrow=EscrowRef(tx_id="a" * 64, index=0),
            job_id=spec.job_id,
        ),
        worker_key=bytes(worker.verify_key).hex(),
        payout_address=enterprise_address(bytes(worker.verify_key), "devnet"),
        started_ms=1_000,
        ended_ms=601_000,
        gpu_milliseconds=600_000,
        gpu_model="NVIDIA H100 80GB HBM3",
        gpu_uuid_sha256="f" * 64,
        image_digest=spec.image_digest,
        command_hash=spec.command_hash,
        result_hashes={"metrics.json": "e" * 64},
        pot_root=pot_root,
        metrics={"loss": "0.25"},
        nonce=NONCE.hex(),
        amount=100_000_000,
    )


class _Oracle:
    """An oracle's key: `oracle.verification.proof_checks.draw_segments` signs the attestation with it."""

    def __init__(self, index: int = 0) -> None:
        from nacl.signing import SigningKey

        self.key = SigningKey(
            hashlib.sha256(b"proofnet/bench/cheat/oracle" + index.to_bytes(4, "big")).digest()
        )

    def sign(self, message: bytes) -> bytes:
        return bytes(self.key.sign(message).signature)

    def draw(self, manifest: Any, terms: Terms, first: int = 1) -> tuple[int, ...]:
        """The oracle's draw; for an attempt that resumed at `first` - 1, from its own
        segments, the first of them always among them (`oracle.verification.verifiers`)."""
        from oracle.verification.proof_checks import draw_segments

        spec = _spec(terms.spot_checks)
        att = _attestation(spec, manifest.root)
        draw = draw_segments(manifest, att, spec, self.sign, top=terms.top_by_norm, first=first)
        if first == 1:
            return tuple(draw.segments)
        return tuple(sorted({first, *draw.segments}))


@dataclass(frozen=True)
class Verdict:
    caught: bool
    by: str
    replayed: tuple[int, ...] = ()


def judge(
    pot_dir: Path,
    terms: Terms,
    *,
    trainer: Callable[[Any], Any] | None = None,
    oracle: _Oracle | None = None,
    resumed: tuple[Any, int] | None = None,
) -> Verdict:
    """What an oracle (`oracle.verification.proof_checks`) and its drawn verifier (`pot.harness.replay`)
    conclude of the proof in `pot_dir` for the bench job's spec."""
    from oracle.verification.proof_checks import ProofRejected, check_manifest
    from pot import harness
    from pot.examples.numpy_mlp import MLPTrainer
    from pot.manifest import Manifest, ProofError, check_resumed

    manifest = Manifest.load(pot_dir)
    spec = _spec(terms.spot_checks)
    try:
        check_manifest(manifest, _attestation(spec, manifest.root), spec)
    except ProofRejected as exc:
        return Verdict(True, f"oracle proof check ({exc.reason}): {exc.message}")
    first = 1
    if resumed is not None:
        # The lost attempt's committed prefix and the checkpoint the API handed over: the
        # oracle's `resume_checks.check_resumed_proof` applies this very check.
        prefix, at = resumed
        try:
            check_resumed(manifest, prefix, at, step=_schedule().leaf_step(at))
        except ProofError as exc:
            return Verdict(True, f"oracle resume check (pot_resume_mismatch): {exc}")
        first = at + 1
    segments = (oracle or _Oracle()).draw(manifest, terms, first)
    ctx = _context(pot_dir.parent)
    build = trainer or MLPTrainer
    try:
        report = harness.replay(build(ctx), ctx, pot_dir, root=manifest.root, segments=segments)
    except ProofError as exc:
        return Verdict(True, f"replay (proof cannot be replayed): {exc}", segments)
    if report.initial_weights_hash != manifest.leaves[0].weights:
        return Verdict(True, "replay: checkpoint 0 is not the trainer's", segments)
    failed = [r.segment for r in report.failures()]
    if failed:
        return Verdict(True, f"replay: segments {failed} do not replay as committed", segments)
    return Verdict(False, f"segments {list(segments)} replayed as committed", segments)


# What a saboteur submitter spends whatever happens: the escrow's lock and refund
# transactions (about 0.2 ADA each on mainnet, priced here as 0.5 NTX: a lower bound on its
# loss; it gets neither the results nor any part of a bond).
SUBMITTER_TX_COST_NTX = 0.5


def referee_saboteur(
    pot_dir: Path,
    segments: tuple[int, ...],
    trainer: Callable[[Any], Any],
    on_machine: Callable[[str], None] = lambda _role: None,
) -> dict[str, Any]:
    """The referee of a disputed segment (`oracle.verification.referee`) over a proof
    whose job code departs on replays: a second verifier replays the drawn segments in a
    fresh process, the provider's worker replays the disputed ones in a verifier's sandbox
    (a fresh process too, `worker.verifier`), and the product's rules decide."""
    from oracle.verification.referee import arbitrate, classify, departure
    from oracle.verification.spotcheck import SpotCheckVerdict
    from pot import harness
    from pot.manifest import Manifest
    from proofnet.messages.dispute import DisputeAnswer

    manifest = Manifest.load(pot_dir)

    def replayed(which: tuple[int, ...], role: str) -> dict[str, Any]:
        on_machine(role)
        ctx = _context(pot_dir.parent)
        report = harness.replay(trainer(ctx), ctx, pot_dir, root=manifest.root, segments=which)
        out: dict[str, Any] = report.to_json()
        return out

    first = departure(replayed(segments, "verifier"), manifest, segments, 0, from_scratch=True)
    second = departure(replayed(segments, "verifier"), manifest, segments, 0, from_scratch=True)
    if not first.any:
        return {"verdict": "verified", "message": "nothing departed"}
    if first != second:
        return {"verdict": "unproven", "message": "the verifiers departed differently"}
    sandbox = replayed(first.disputed or segments[:1], "provider")
    answer = DisputeAnswer.model_validate(
        {
            "status": "passed" if sandbox["passed"] else "failed",
            "initial_weights_hash": sandbox.get("initial_weights_hash"),
            "results": [
                {k: r[k] for k in ("segment", "weights_hash", "update_norm", "distance")}
                for r in sandbox["results"]
            ],
        }
    )
    said = classify(answer, first, manifest, 0)
    blank = SpotCheckVerdict(False, None, "")
    verdict = arbitrate(said, blank, first, {})
    name = "unproven" if verdict.reason == "replay_unproven" else "rejected_burnt"
    return {
        "verdict": name,
        "message": verdict.message,
        "provider_answer": said,
        "disputed_segments": list(first.disputed),
    }


def _observed_rate(manifest: Any, faked: frozenset[int], terms: Terms, first: int = 1) -> float:
    """Share of `DRAWS` oracle keys whose draw lands on a faked segment."""
    hits = sum(bool(faked & set(_Oracle(i).draw(manifest, terms, first))) for i in range(DRAWS))
    return round(hits / DRAWS, 4)


# -- the strategies ------------------------------------------------------------------------


def _proof_outcome(
    name: str, verdict: Verdict, terms: Terms, saved: float, p: float, note: str = "", **obs: Any
) -> Outcome:
    return Outcome(
        strategy=name,
        cheater="provider",
        method="check_only",
        caught=verdict.caught,
        by=verdict.by,
        detection_probability=round(p, 4),
        expected_value=round(provider_ev(saved, p, terms), 2),
        verification_share=round(verification_share(terms), 4),
        note=note,
        observed={
            "replayed_segments": list(verdict.replayed),
            "bench_verification_share": round(len(verdict.replayed) / _schedule().segments, 4),
            **obs,
        },
    )


def _run_proof_strategies(work: Path, terms: Terms) -> list[Outcome]:
    from pot.examples.numpy_mlp import MLPTrainer

    n = _schedule().segments
    out: list[Outcome] = []

    def fresh(name: str) -> Path:
        path = work / name
        path.mkdir()
        return path

    job = fresh("honest")
    _train(job)
    honest = judge(job / "pot", terms)
    control = _proof_outcome("honest_control", honest, terms, 0.0, 0.0, note="no cheat")
    out.append(replace(control, cheater="none"))

    job = fresh("zero_step")
    _forge(job, steps=0)
    out.append(_proof_outcome("zero_step_proof", judge(job / "pot", terms), terms, 1.0, 1.0))

    job = fresh("truncated")
    _forge(job, steps=STEPS // 2)
    out.append(_proof_outcome("truncated_schedule", judge(job / "pot", terms), terms, 0.5, 1.0))

    for f in FRACTIONS:
        m = faked_segments(f, n)
        # Spread the fakes over the run; the tiny committed norms keep them off the top picks.
        fakes = frozenset(1 + (i * n) // m for i in range(m))
        job = fresh(f"faked_{f}")
        manifest = _forge(job, faked=fakes)
        verdict = judge(job / "pot", terms)
        p = detection_probability(
            terms.segments, faked_segments(f, terms.segments), terms.spot_checks
        )
        out.append(
            _proof_outcome(
                f"faked_segments_f{f}_small_norms",
                verdict,
                terms,
                f,
                p,
                note=f"{m} of {n} bench segments faked; p is the reference job's random picks",
                faked=sorted(fakes),
                caught_rate_over_draws=_observed_rate(manifest, fakes, terms),
                caught_rate_model_bench=round(detection_probability(n, m, terms.spot_checks), 4),
            )
        )

    f = FRACTIONS[0]
    m = faked_segments(f, n)
    fakes = frozenset(1 + (i * n) // m for i in range(m))
    job = fresh("faked_large")
    manifest = _forge(job, faked=fakes, jump=5.0)
    out.append(
        _proof_outcome(
            f"faked_segments_f{f}_large_norms",
            judge(job / "pot", terms),
            terms,
            f,
            1.0,
            note="fakes that jump commit the largest norms: the top-by-norm picks replay them",
            faked=sorted(fakes),
            caught_rate_over_draws=_observed_rate(manifest, fakes, terms),
        )
    )

    job = fresh("wrong_lr")
    _train(job, config={"lr": "0.2"})
    out.append(
        _proof_outcome(
            "wrong_learning_rate",
            judge(job / "pot", terms),
            terms,
            0.0,
            1.0,
            note="every segment departs from the spec's trainer, so any pick exposes it",
        )
    )

    job = fresh("copied")
    _train(job, seed=JOB_SEED + 1)
    out.append(
        _proof_outcome(
            "checkpoints_from_another_job",
            judge(job / "pot", terms),
            terms,
            1.0,
            1.0,
            note="a proof trained for another job (seed) submitted for this one",
        )
    )

    job = fresh("smaller")
    _train(job, config={"hidden": 4})
    out.append(
        _proof_outcome(
            "smaller_model",
            judge(job / "pot", terms),
            terms,
            0.75,
            1.0,
            note="hidden 4 instead of the spec's 16: the spec's trainer cannot load it",
        )
    )

    # The submitter's code behaves differently only when it is replayed. The harness shows
    # it no mode (`pot.trainer.TrainContext` has none, and a segment is run the same way in
    # both directions: tests/pot/test_pot_harness.py::
    # test_a_trainer_cannot_tell_training_from_replaying), so it keys on what the harness
    # cannot hide from code in its process: its own history. Training runs every step in
    # order; a replay jumps from one drawn segment to the next.
    class OnlyOnVerifiers(MLPTrainer):  # type: ignore[misc]
        def __init__(self, ctx: Any) -> None:
            super().__init__(ctx)
            self.last_step = 0
            self.replaying = False

        def train_step(self, step: int, indices: np.ndarray) -> float:
            if step != self.last_step + 1:
                self.replaying = True  # steps were skipped: nobody trains like that
            self.last_step = step
            loss = float(super().train_step(step, indices))
            if self.replaying:
                self.params["b2"] += 1e-3  # deterministic: two replays agree with each other
            return loss

    job = fresh("verifier_only")
    _train(job, trainer=OnlyOnVerifiers)
    verdict = judge(job / "pot", terms, trainer=OnlyOnVerifiers)
    refereed = referee_saboteur(job / "pot", verdict.replayed, OnlyOnVerifiers)
    # Without the referee the provider would be blamed and slashed to the submitter, who
    # kept the results: gain = price + slash. With it, the dispute is unproven (or, had
    # the provider's sandbox reproduced its commitment, a slash that burns), the results
    # are withheld with the verdict, and the escrow refunds: the submitter gets its money
    # back and nothing else, and pays for the escrow's transactions.
    stopped = refereed["verdict"] in ("unproven", "rejected_burnt") or not verdict.caught
    out.append(
        Outcome(
            strategy="submitter_code_fails_only_on_verifiers",
            cheater="submitter",
            method="check_only",
            caught=stopped,
            by=(
                f"referee ({refereed['verdict']}): {refereed['message']}"
                if verdict.caught
                else "the sabotage missed the drawn segments: the provider is paid"
            ),
            detection_probability=1.0 if verdict.caught else 0.0,
            expected_value=round(-SUBMITTER_TX_COST_NTX if stopped else terms.price, 2),
            verification_share=round(verification_share(terms), 4),
            note=(
                "keyed on the process's history (the files around it, the clock and the "
                "machine serve as well): the first verifier's replay departs, a second "
                "verifier's departs alike, and the provider's own sandbox replay departs "
                "too, so nothing is proven: no pay, no slash, no results, a refund"
            ),
            observed={"replayed_segments": list(verdict.replayed), **refereed},
        )
    )

    # The same saboteur keyed on the machine: its checkpoints carry the provider's machine,
    # and it departs wherever it runs on another (the verifiers alike; the provider's own
    # sandbox replay, on the provider's machine, does not). The provider's claim is then
    # exactly a liar's: rejected, slashed, the share burnt. The honest provider loses; the
    # submitter gains nothing.
    machine = {"now": "provider"}

    class OnlyOffTheProvidersMachine(MLPTrainer):  # type: ignore[misc]
        def train_step(self, step: int, indices: np.ndarray) -> float:
            loss = float(super().train_step(step, indices))
            if machine["now"] != "provider":
                self.params["b2"] += 1e-3
            return loss

    job = fresh("verifier_machine")
    _train(job, trainer=OnlyOffTheProvidersMachine)
    machine["now"] = "verifier"
    verdict = judge(job / "pot", terms, trainer=OnlyOffTheProvidersMachine)
    refereed = referee_saboteur(
        job / "pot",
        verdict.replayed,
        OnlyOffTheProvidersMachine,
        on_machine=lambda role: machine.update(now=role),
    )
    stopped = refereed["verdict"] in ("unproven", "rejected_burnt")
    out.append(
        Outcome(
            strategy="submitter_code_fails_only_on_verifiers_machine_keyed",
            cheater="submitter",
            method="check_only",
            caught=stopped,
            by=f"referee ({refereed['verdict']}): {refereed['message']}",
            detection_probability=1.0,
            expected_value=round(-SUBMITTER_TX_COST_NTX if stopped else terms.price, 2),
            verification_share=round(verification_share(terms), 4),
            note=(
                "keyed on the machine: the provider's sandbox reproduces its commitment, "
                "so the provider is rejected and slashed, but the share burns and the "
                "results are withheld: the submitter gets a refund and nothing else (the "
                "honest provider's loss is the cost of looking exactly like a liar)"
            ),
            observed={"replayed_segments": list(verdict.replayed), **refereed},
        )
    )
    return out


RESUME_AT = 10  # the lost attempt committed (and uploaded) checkpoints 0..10 of 20


def _resume_strategies(work: Path, terms: Terms) -> list[Outcome]:
    """A long job's first provider is lost after checkpoint `RESUME_AT`; the API hands the
    next one that checkpoint (`api.services.resume`: the prefix's root up to it, fed to the
    oracle as the lease's resume point). The second provider resumes from a state nobody
    committed: its own made-up history up to the resume point, or the handed leaves kept
    and training continued from other weights."""
    import shutil

    from pot.examples.numpy_mlp import MLPTrainer
    from pot.manifest import Manifest, optimizer_path, rng_path, weights_path
    from pot.recorder import ProofOfTraining
    from pot.replay import load_checkpoint

    lost = work / "resume_lost"
    lost.mkdir()
    _train(lost)
    prefix = Manifest.load(lost / "pot")
    handed = (prefix, RESUME_AT)
    saved = RESUME_AT / _schedule().segments  # the lost attempt's share, not the resumer's
    out: list[Outcome] = []

    # 1. A history of its own up to the resume point: segments 1..at not trained (tiny
    # moves), so the leaves it commits there are not the prefix's.
    forged = work / "resume_forged"
    forged.mkdir()
    _forge(forged, faked=frozenset(range(1, RESUME_AT + 1)))
    verdict = judge(forged / "pot", terms, resumed=handed)
    out.append(
        _proof_outcome(
            "resume_from_forged_checkpoint",
            verdict,
            terms,
            saved,
            1.0,
            note=(
                f"resumed at checkpoint {RESUME_AT} from a state the lost attempt never "
                "committed; the oracle compares the proof's leaves 0..at with the handed root"
            ),
            # Without the resume check, the draw over its own segments never reaches them.
            unchecked_caught_rate_over_draws=_observed_rate(
                Manifest.load(forged / "pot"),
                frozenset(range(1, RESUME_AT + 1)),
                terms,
                first=RESUME_AT + 1,
            ),
        )
    )

    # 2. The handed leaves kept (so the root matches), training continued from other
    # weights (the trainer's fresh initial state, say: the lost attempt's work thrown away).
    kept = work / "resume_kept_leaves"
    pot = kept / "pot"
    pot.mkdir(parents=True)
    for i in range(RESUME_AT + 1):  # the lost attempt's uploads, as the verifier fetches them
        for path in (weights_path, optimizer_path, rng_path):
            shutil.copyfile(path(lost / "pot", i), path(pot, i))
    ctx = _context(kept)
    trainer = MLPTrainer(ctx)
    other = trainer.state()
    recorder = ProofOfTraining(pot, steps_per_checkpoint=INTERVAL, data_seed=ctx.data_seed)
    recorder.resume(prefix, RESUME_AT, load_checkpoint(lost / "pot", prefix, RESUME_AT))
    trainer.restore(other)
    sampler = ctx.schedule.sampler(ctx.data_seed)
    loss = 1.0
    for step in range(RESUME_AT * INTERVAL + 1, STEPS + 1):
        indices = sampler.indices(step)
        loss = trainer.train_step(step, indices)
        if recorder.record_step(indices, loss):
            recorder.commit(trainer.state())
    recorder.finish(trainer.state())
    verdict = judge(pot, terms, resumed=handed)
    out.append(
        _proof_outcome(
            "resume_from_forged_checkpoint_keeping_handed_leaves",
            verdict,
            terms,
            saved,
            1.0,
            note=(
                f"the first segment the resumer trained ({RESUME_AT + 1}) is always replayed "
                "from the handed checkpoint, so continuing from other weights fails there"
            ),
        )
    )
    return out


CLAIMED = "NVIDIA H100 80GB HBM3"
SUBSTITUTE = "NVIDIA L4"
ACHIEVED = 0.5  # share of its datasheet peak a GPU reaches on the challenge product
# How far a provider without the claimed GPU may be off guessing its step time on a job
# (relative): a model's achieved share of peak varies with the job's shapes and kernels.
SPOOF_GUESS_SPREAD = 0.10
REFERENCE_HOURS = 1.0  # the reference job's honest GPU time on the claimed model


def _api_config() -> Any:
    from api.config import ApiConfig

    # Only the challenge fields are read; the database and network are not used.
    return ApiConfig(database_url="sqlite://", network="preprod")


def _metering() -> tuple[float, int]:
    from dataclasses import fields

    from oracle.verification.verify import VerificationContext

    defaults = {f.name: f.default for f in fields(VerificationContext)}
    slack, allowance = defaults["metering_slack"], defaults["metering_allowance_ms"]
    assert isinstance(slack, float) and isinstance(allowance, int)
    return slack, allowance


def _spoofed_gpu(terms: Terms) -> list[Outcome]:
    from api.services.gpu_challenges import allowed_seconds, model_peak, plausible_tflops
    from worker.challenge import ChallengeSpec, run_challenge, verify_freivalds

    config = _api_config()
    n = config.gpu_challenge_n
    flops = 2 * n**3
    share = round(verification_share(terms), 4)

    # A machine that computes nothing answers a product it made up.
    small = ChallengeSpec(seed=42, n=256, dtype="float32")
    forged = np.zeros((small.n, small.n), dtype=np.float32)
    no_compute = verify_freivalds(small.seed, small.n, forged)

    # A CPU (this machine's numpy) claiming an H100: its rate measured on a smaller product,
    # then the API's rule at the API's n (the full product would take minutes here).
    probe = ChallengeSpec(seed=43, n=1024, dtype="float32")
    cpu = run_challenge(probe, backend="numpy", repeats=1)
    cpu_tflops = probe.flops / max(cpu.elapsed_s, 1e-9) / 1e12
    cpu_s = flops / (cpu_tflops * 1e12)
    allowed = allowed_seconds(config, CLAIMED, n)
    cpu_caught = cpu_s > allowed

    # A close substitute: an L4 at ACHIEVED of its peak, claiming an H100 SXM.
    l4, h100 = model_peak(SUBSTITUTE), model_peak(CLAIMED)
    assert l4 is not None and h100 is not None
    l4_s = flops / (l4.peak_tflops * ACHIEVED * 1e12)
    slower = h100.peak_tflops / l4.peak_tflops  # the L4 runs the job this many times longer
    slack, allowance_ms = _metering()
    a = allowance_ms / (REFERENCE_HOURS * 3_600_000)
    sigma_r = design_sigma(slack, a)
    # Rates taken proportional to peak: honest, the L4 earns the L4 rate for `slower` hours,
    # i.e. the price P. Spoofing, it is paid the H100 rate for the time it attests, refused
    # above the bound a real H100 verifier's step time sets: attesting its own time is
    # refused; attesting what it guesses an H100 takes risks the guess (it has no H100 to
    # time the job on) on top of the timing noise an honest provider faces.
    caught_attesting_own_time = slower > slack + a
    honest_x, honest_paid = best_attested(slack, a, sigma_r, terms.price)
    guess = math.sqrt(sigma_r**2 + SPOOF_GUESS_SPREAD**2)
    spoof_x, spoof_paid = best_attested(slack, a, guess, terms.price)
    gain = spoof_paid - honest_paid
    return [
        Outcome(
            strategy="spoofed_gpu_model_no_compute",
            cheater="provider",
            method="check_only",
            caught=not no_compute.ok,
            by=f"GPU challenge (Freivalds): {no_compute.reason}",
            detection_probability=1.0 - 2.0**-32,
            expected_value=round(provider_ev(1.0, 1.0, terms), 2),
            verification_share=share,
            note="a machine claiming an H100 that cannot compute the challenge product",
        ),
        Outcome(
            strategy="spoofed_gpu_model_cpu_claims_h100",
            cheater="provider",
            method="check_only",
            caught=cpu_caught,
            by=(
                f"GPU challenge timing (API): {cpu_s:.1f} s for n={n} at the measured "
                f"{cpu_tflops:.3f} TFLOP/s; an H100 is allowed {allowed:.2f} s"
            ),
            detection_probability=1.0 if cpu_caught else 0.0,
            expected_value=0.0 if cpu_caught else round(terms.price, 2),
            verification_share=share,
            note=(
                "not offered, so never leased: nothing earned. A CPU above "
                f"{flops / allowed / 1e12:.2f} TFLOP/s (a large AVX-512 server) would pass"
            ),
            observed={"cpu_tflops": round(cpu_tflops, 4), "allowed_s": round(allowed, 3)},
        ),
        Outcome(
            strategy="spoofed_gpu_model_close_substitute_rate_card",
            cheater="provider",
            method="check_only",
            caught=caught_attesting_own_time,
            by=(
                f"metering against a verifier of the claimed model (oracle): an L4 runs the "
                f"job {slower:.2f}x an H100's time, beyond the x{slack:g} slack, so attesting "
                f"its own GPU time is refused (gpu_time_exceeds_proof). Its challenge ("
                f"{l4_s:.2f} s of the {allowed:.2f} s an H100 is allowed at n={n}) is not "
                "compute-bound and passes"
            ),
            detection_probability=1.0 if caught_attesting_own_time else 0.0,
            expected_value=round(gain, 2),
            verification_share=share,
            note=(
                "best response: attest what an H100 would take (paid the H100 rate for it, "
                f"refused above the bound): attested {1 + spoof_x:.3f} T, expected pay "
                f"{spoof_paid:.2f} against {honest_paid:.2f} for the L4 attesting its own "
                f"time as an L4 ({1 + honest_x:.3f} T); the guess of the H100's time without an "
                f"H100 spreads {SPOOF_GUESS_SPREAD:.0%} (rates taken proportional to datasheet "
                "peak; with a perfect guess the spoof earns what honest work does)"
            ),
            observed={
                "slower": round(slower, 3),
                "l4_challenge_s": round(l4_s, 3),
                "h100_allowed_s": round(allowed, 3),
                "h100_band_tflops": list(plausible_tflops(CLAIMED)),
                "l4_band_tflops": list(plausible_tflops(SUBSTITUTE)),
            },
        ),
    ]


TIMING_ROUNDS = 7  # replays of the bench job timed to measure the step-time spread here


def measured_step_spread(work: Path) -> float:
    """The relative spread (standard deviation / mean) of the step time a verifier measures
    on this machine: the bench job's segments replayed `TIMING_ROUNDS` times as a verifier
    times them (the drawn run less the first segment's run alone, each from a fresh
    trainer). A shared, loaded CPU spreads far more than a leased GPU does."""
    import statistics
    import time

    from pot import harness
    from pot.examples.numpy_mlp import MLPTrainer
    from pot.manifest import Manifest

    job = work / "timing"
    job.mkdir()
    config: dict[str, object] = {"hidden": 128}
    _train(job, config=config)
    manifest = Manifest.load(job / "pot")
    drawn = list(range(1, _schedule().segments + 1))

    def timed(segments: list[int]) -> float:
        ctx = _context(job, config=config)
        started = time.perf_counter()
        harness.replay(MLPTrainer(ctx), ctx, job / "pot", root=manifest.root, segments=segments)
        return time.perf_counter() - started

    steps = [
        (timed(drawn) - timed([1])) / ((len(drawn) - 1) * INTERVAL) for _ in range(TIMING_ROUNDS)
    ]
    return statistics.stdev(steps) / statistics.mean(steps)


def _idle_lease(terms: Terms, spread: float) -> list[Outcome]:
    """A rate-card job of `REFERENCE_HOURS` of honest GPU time, paid `terms.price` for it;
    the provider attests idle time on top, met by the oracle's metering bound: the committed
    steps at the step time a same-model verifier measured (start-up taken out), times the
    slack, plus the allowance (`oracle.verification.metering`). The verifier's measurement
    is off the provider's by the ratio noise the default slack is sized for."""
    from oracle.verification.metering import ProofTiming, proof_bound_ms

    slack, allowance_ms = _metering()
    steps = terms.segments * INTERVAL_REFERENCE
    honest_ms = int(REFERENCE_HOURS * 3_600_000)
    replayed = (terms.spot_checks + terms.top_by_norm + 1) * INTERVAL_REFERENCE
    first = INTERVAL_REFERENCE
    startup_ms = 30_000  # the verifier's container and trainer start-up, taken out again
    step = honest_ms / steps
    timing = ProofTiming(
        committed_steps=steps,
        replayed_steps=replayed,
        replay_ms=int(startup_ms + replayed * step),
        first_steps=first,
        first_ms=int(startup_ms + first * step),
    )
    bound = proof_bound_ms(timing, gpus=1, slack=slack, allowance_ms=allowance_ms)
    assert bound is not None
    share = round(verification_share(terms), 4)
    a = (bound - honest_ms * slack) / honest_ms  # start-up and allowance, as a share of T
    sigma_r = design_sigma(slack, a)
    padded = 3 * honest_ms
    rule = f"x{slack:g} the verifier's step time + start-up + {allowance_ms} ms"
    to_bound = bound / honest_ms - 1
    refused = padding_refusal(to_bound, slack, a, sigma_r)
    best_x, best_ev = best_padding(slack, a, sigma_r, terms.price)
    old = 2.0 * honest_ms * (1 + startup_ms / honest_ms) + 600_000  # 12.6's x2 + 10 min
    needed = slack_for(math.sqrt(2) * spread, a)
    return [
        Outcome(
            strategy="idle_lease_on_rate_card_job_padded_3x",
            cheater="provider",
            method="check_only",
            caught=padded > bound,
            by=(
                f"metering bounded by proof (oracle): {padded} GPU-ms attested, the proof backs "
                f"{bound} ({steps} steps {rule})"
            ),
            detection_probability=1.0,
            expected_value=round(-terms.price, 2),
            verification_share=share,
            note="the attestation is refused (gpu_time_exceeds_proof): unpaid, not slashed",
        ),
        Outcome(
            strategy="idle_lease_on_rate_card_job_within_slack",
            cheater="provider",
            method="check_only",
            caught=False,
            by=(
                f"refused with probability {refused:.2f}: padded to the bound's expected "
                f"{bound} GPU-ms for {honest_ms} worked ({rule}), it is refused whenever the "
                "verifier's GPU measures faster than the provider's"
            ),
            detection_probability=round(refused, 4),
            expected_value=round(padding_ev(to_bound, slack, a, sigma_r, terms.price), 2),
            verification_share=share,
            note=(
                f"the slack x{slack:g} is sized for a verifier/provider step-time ratio noise "
                f"of {sigma_r:.1%} (honest refusal {padding_refusal(0, slack, a, sigma_r):.2%}),"
                f" so padding into it risks the whole payment; the old rule (x2 + 10 min) let "
                f"{old / honest_ms - 1:.0%} through unseen. Best response: pad "
                f"{best_x:.1%}, expected gain {best_ev:.2f} (below the timing noise)"
            ),
            observed={
                "bound_ms": bound,
                "design_ratio_noise": round(sigma_r, 4),
                "best_response_padding": best_x,
                "best_response_ev": round(best_ev, 2),
                "measured_step_spread_here": round(spread, 4),
                "slack_needed_at_measured_spread": None if needed is None else round(needed, 3),
            },
        ),
    ]


def _model_only(terms: Terms) -> list[Outcome]:
    share = round(verification_share(terms), 4)
    return [
        Outcome(
            strategy="job_code_reads_verifier_or_oracle_files",
            cheater="submitter",
            method="model_only",
            caught=True,
            by=(
                "contained: no job code on an oracle, and a verifier runs it in the job's "
                "container without network, key or settings (played end to end under Docker "
                "by --end-to-end where an engine and the job image are present, "
                "benchmarks/cheat_e2e_snoop.py; its unisolated twin, reaching both, in "
                "tests/worker/test_verifier_units.py)"
            ),
            detection_probability=1.0,
            expected_value=round(-terms.price, 2),
            verification_share=share,
            note="nothing to read: the submitter pays for the job and learns nothing",
        ),
    ]


def _end_to_end(outcomes: list[Outcome], loop: list[Any], terms: Terms) -> list[Outcome]:
    """The rows of the strategies the loop played, as the loop saw them: caught when the
    oracle rejected the attestation (its reason is the `by`) and nothing was paid; the
    model's p and EV, and the in-process check's verdict, kept from the check-only row."""
    from benchmarks.cheat_e2e_more import PhaseRow

    played = {r.strategy: r for r in loop}
    out = []
    for o in outcomes:
        r = played.get(o.strategy)
        if r is None:
            out.append(o)
            continue
        if isinstance(r, PhaseRow):
            out.append(_phase_outcome(o, r))
            continue
        paid = r.paid_ntx > 0
        ev = o.expected_value
        if o.cheater == "submitter":
            # The submitter's cheat is stopped when the verdict blames the job, or proves
            # nothing (unproven: no pay, no slash, no results), not the honest provider.
            caught = (r.status == "rejected" and r.fault == "job") or r.status == "unproven"
            if not caught and r.status == "rejected":
                # The provider blamed: the submitter keeps the results it was served, is
                # refunded, and receives the slash of a bonded provider.
                ev = round(terms.price + terms.slashed, 2)
        else:
            # Rejected; or unproven for the provider's fault (two drawn verifiers replayed a
            # disputed segment alike and not to the commitment, and the provider's worker,
            # asked for its sandbox replay, conceded or stayed silent: unpaid, not slashed);
            # or refused by a co-signer whose own draw caught it.
            stopped = r.status == "rejected" or (r.status == "unproven" and r.fault == "provider")
            caught = (stopped or bool(r.quorum_refusal)) and not paid
        verdict = f"oracle: {r.status}"
        if r.reason:
            verdict += f" ({r.reason}, fault {r.fault or '-'}): {r.message}"
        if r.quorum_refusal and paid:
            verdict += (
                f" after a co-signer's own draw refused it ({r.quorum_refusal}): the "
                "proposer's draw had missed it, and another co-signer's, asked next, did too"
            )
        elif r.quorum_refusal:
            verdict += (
                " by the proposer, whose draw missed it; refused by a co-signer's own "
                f"draw ({r.quorum_refusal}), so never signed"
            )
        if r.settlement_tx:
            verdict += f"; settled in tx {r.settlement_tx[:16]}..."
        if r.verification == "drawn_verifiers":
            verdict += " [replayed by drawn verifier workers, a disputed replay refereed]"
        out.append(
            replace(
                o,
                method="end_to_end",
                caught=caught,
                by=verdict,
                expected_value=ev,
                paid_on_chain=paid,
                observed={
                    **o.observed,
                    "check_only_caught": o.caught,
                    "check_only_by": o.by,
                    "oracle_status": r.status,
                    "oracle_reason": r.reason,
                    "quorum_refusal": r.quorum_refusal,
                    "fault": r.fault,
                    "paid_ntx": r.paid_ntx,
                    "settlement_tx": r.settlement_tx,
                    "job_id": r.job_id,
                    "loop_s": r.seconds,
                    "verification": r.verification,
                    **({"honest_twin": r.twin} if r.twin else {}),
                },
            )
        )
    # A phase's strategy with no in-process twin: a row of its own.
    named = {o.strategy for o in outcomes}
    share = round(verification_share(terms), 4)
    for r in loop:
        if isinstance(r, PhaseRow) and r.strategy not in named:
            base = Outcome(
                strategy=r.strategy,
                cheater="provider",
                method="end_to_end",
                caught=r.caught,
                by=r.by,
                detection_probability=1.0 if r.caught else 0.0,
                # Refused and unpaid: the job's pay lost, as the padded check-only row's.
                expected_value=round(-terms.price, 2) if r.caught else round(terms.price, 2),
                verification_share=share,
            )
            out.append(_phase_outcome(base, r))
    return out


def _phase_outcome(o: Outcome, r: Any) -> Outcome:
    """The row of a strategy one of `benchmarks.cheat_e2e_more`'s phases played: its own
    verdict (`r.caught`, `r.by`), the payment read from the chain, the check-only row's
    verdict kept beside it."""
    return replace(
        o,
        method="end_to_end",
        caught=r.caught,
        by=r.by,
        expected_value=o.expected_value if r.expected_value is None else r.expected_value,
        detection_probability=1.0 if r.caught else o.detection_probability,
        paid_on_chain=r.paid_ntx > 0,
        observed={
            **o.observed,
            **(
                {"check_only_caught": o.caught, "check_only_by": o.by}
                if o.method != "end_to_end"
                else {}
            ),
            "oracle_status": r.status,
            "oracle_reason": r.reason,
            "fault": r.fault,
            "paid_ntx": r.paid_ntx,
            "claimed_ntx": r.claimed_ntx,
            "settlement_tx": r.settlement_tx,
            "job_id": r.job_id,
            # The wall time the phases added after the providers' loop was done.
            "phases_added_s": r.seconds,
            "verification": r.verification,
            **r.observed,
        },
    )


# -- a cluster node -------------------------------------------------------------------------

CLUSTER_NODES = 3
CLUSTER_CHEATER = 1


def _cluster_spec(spot_checks: int) -> Any:
    """The bench job as a 3-node data-parallel cluster (the trainer verifiers replay with)."""
    from proofnet.messages.jobspec import JobSpec

    data = _spec(spot_checks).model_dump(mode="json")
    data["proof"]["trainer"] = "dp:DataParallelMLP"
    data["commands"] = [["python", "train_dp.py"]]
    share = data["pricing"]["amount"] // CLUSTER_NODES
    data["pricing"]["amount"] = share * CLUSTER_NODES
    data["topology"] = {"kind": "multi_node", "nodes": CLUSTER_NODES, "node_amount": share}
    return JobSpec.from_dict(data)


def _cluster_strategies(work: Path, terms: Terms) -> list[Outcome]:
    """Node 1 of a 3-node data-parallel run contributes zeros instead of its shard's
    gradient (it saves its whole share of the compute), met by the oracle's node checks
    (`oracle.verification.cluster_checks`), its draw, and the replay a verifier runs
    (`pot.cluster_harness.replay_node`, every rank's contribution recomputed)."""
    from oracle.verification.cluster_checks import check_node_proof, judge_node
    from oracle.verification.proof_checks import ProofRejected, draw_segments
    from pot.cluster import cluster_data_seed
    from pot.cluster_harness import LocalCluster, load_evidence, load_node, replay_node, train_node
    from pot.examples.numpy_dp import DataParallelMLP
    from pot.trainer import TrainContext
    from proofnet.messages.topology import Unit

    class FakesItsShard(DataParallelMLP):  # type: ignore[misc]
        def gradient(self, step: int, rank: int, indices: np.ndarray) -> Any:
            return 0.0, {k: np.zeros_like(v) for k, v in self.params.items()}

    spec = _cluster_spec(terms.spot_checks)
    nonces = [hashlib.sha256(b"bench/cluster" + bytes([r])).digest()[:16] for r in range(3)]
    seed = cluster_data_seed(JOB_SEED, nonces)

    def ctx(rank: int | str) -> Any:
        return TrainContext(
            job_dir=work / "cluster" / f"node{rank}",
            job_seed=JOB_SEED,
            data_seed=seed,
            schedule=_schedule(),
            config=dict(CONFIG),
        )

    def train(rank: int, gather: Any) -> Any:
        build = FakesItsShard if rank == CLUSTER_CHEATER else DataParallelMLP
        c = ctx(rank)
        return train_node(build(c), c, c.job_dir / "pot", rank=rank, nonces=nonces, gather=gather)

    proofs = LocalCluster(CLUSTER_NODES).run(train)
    pots = {r: ctx(r).job_dir / "pot" for r in proofs}
    leases = {r: n.hex() for r, n in enumerate(nonces)}
    verdicts: dict[int, str] = {}
    replayed: tuple[int, ...] = ()
    for rank, proof in sorted(proofs.items()):
        _, manifest = load_node(pots[rank], root=proof.root)
        att = _attestation(spec, proof.root).model_copy(update={"nonce": nonces[rank].hex()})
        unit = Unit(rank, "node", (), (), (), spec.topology.node_amount, rank=rank)
        try:
            check_node_proof(proof, manifest, att, spec, unit, leases)
        except ProofRejected as exc:
            verdicts[rank] = f"oracle node check ({exc.reason}): {exc.message}"
            continue
        draw = draw_segments(manifest, att, spec, _Oracle().sign, top=terms.top_by_norm)
        c = ctx("verifier")
        report = replay_node(
            DataParallelMLP(c), c, pots[rank], root=proof.root, segments=draw.segments
        ).to_json()
        evidence = {
            s: {q: load_evidence(pots[q], s, root=p.root) for q, p in proofs.items()}
            for s in draw.segments
        }
        verdict = judge_node(report, rank, manifest, evidence, draw)
        if rank == CLUSTER_CHEATER:
            replayed = draw.segments
        if not verdict.passed:
            verdicts[rank] = f"cluster replay ({verdict.reason}): {verdict.message}"
    caught = CLUSTER_CHEATER in verdicts
    others = sorted(r for r in verdicts if r != CLUSTER_CHEATER)
    by = verdicts.get(CLUSTER_CHEATER, "every drawn segment replayed as committed")
    return [
        Outcome(
            strategy="cluster_node_fakes_its_shard",
            cheater="provider",
            method="check_only",
            caught=caught,
            by=by,
            detection_probability=1.0,
            expected_value=round(provider_ev(1.0, 1.0 if caught else 0.0, terms), 2),
            verification_share=round(verification_share(terms), 4),
            note=(
                f"node {CLUSTER_CHEATER} of {CLUSTER_NODES} contributes zeros in every step; "
                "any drawn segment's replay shows its contribution is not its shard's "
                "gradient, and only it is blamed"
            ),
            observed={
                "replayed_segments": list(replayed),
                "honest_nodes_blamed": others,
                "nodes": CLUSTER_NODES,
            },
        )
    ]


def run_cheat_bench(
    terms: Terms | None = None, *, end_to_end: bool = False, snoop_image: str | None = None
) -> CheatReport:
    """The cheat table; with `end_to_end`, the strategies `benchmarks.cheat_e2e` can play
    are also played through the whole loop on a local devnet, and their rows say so; with
    `snoop_image` too, the snooping job code is played under Docker in that image
    (`benchmarks.cheat_e2e_snoop`; the row stays the model's where it cannot run)."""
    terms = terms or Terms.defaults()
    with tempfile.TemporaryDirectory(prefix="proofnet-cheat-") as tmp:
        outcomes = _run_proof_strategies(Path(tmp), terms)
        outcomes += _resume_strategies(Path(tmp), terms)
        outcomes += _cluster_strategies(Path(tmp), terms)
        spread = measured_step_spread(Path(tmp))
    outcomes += _spoofed_gpu(terms)
    outcomes += _idle_lease(terms, spread)
    outcomes += _model_only(terms)
    if end_to_end:
        from benchmarks.cheat_e2e import run_loop
        from benchmarks.cheat_e2e_more import MoreLoop
        from benchmarks.cheat_e2e_snoop import SNOOP_STRATEGY, SnoopUnavailable, run_snoop

        loop = run_loop(loop_type=MoreLoop)
        if snoop_image:
            try:
                loop.append(run_snoop(snoop_image))
            except SnoopUnavailable as exc:
                # The row stays the model's, saying why it was not played.
                outcomes = [
                    replace(o, observed={**o.observed, "snoop_unavailable": str(exc)})
                    if o.strategy == SNOOP_STRATEGY
                    else o
                    for o in outcomes
                ]
        outcomes = _end_to_end(outcomes, loop, terms)
    schedule = _schedule()
    job = {
        "steps": schedule.total_steps,
        "steps_per_checkpoint": schedule.steps_per_checkpoint,
        "segments": schedule.segments,
        "draws_counted": DRAWS,
    }
    return CheatReport(terms=replace(terms), job=job, outcomes=outcomes)
