"""More cheats played through `proofnet bench cheat --end-to-end`'s loop, beside its providers.

`benchmarks.cheat_e2e` plays the proof cheats (one bent provider each) and the submitter's
saboteur through `proofnet demo`'s loop. This module plays, in the same loop and while those
providers run, the cheats whose rows were `check_only` until now, each through the real
processes (the API's onboarding and challenge, the worker, the oracles, the chain):

- `spoofed_gpu_model_cpu_claims_h100`: a provider on this CPU machine whose worker claims an
  H100 (`benchmarks.cheat_provider.spoof_gpu`: NVML answers with an H100, the challenge is
  computed on the CPU and labelled as the H100's) onboards through the API's own challenge
  round (the API issues the seed and times the round on its own clock), then runs the
  product's worker while a job asking for one GPU waits in the queue. Caught when the API
  does not offer the GPU, the job is never leased and nothing is paid.
- `idle_lease_on_rate_card_job_idle_100s`: a provider publishes a rate card
  (`worker.rate_card_cli.publish_rates`) for its one GPU (an L4 in its NVML, offered
  unchecked: this loop's API does not require the challenge, so the CPU can stand in for a
  GPU; a GPU that failed its challenge is never offered either way), takes a rate-card job
  naming that card and holds the lease idle for 100 s before it trains
  (`benchmarks.cheat_harness.IDLE_LEASE`), attesting that time as GPU time: the lease's
  clock agrees (an attested time beyond the lease's wall time is refused before any
  replay, `gpu_time_implausible`, which a padder that only inflates the count meets, as a
  first run of this phase did). The oracles replay it as they replay the others
  and bound the payable time by the committed steps at the step time their replay measured
  (`oracle.verification.metering`). Caught when the attestation is refused
  (`gpu_time_exceeds_proof`) and nothing is paid; the row shows what was claimed.
- `resume_from_forged_checkpoint`: a job asking for one 32 GB GPU is claimed by a provider
  (an L40S in its NVML, unchecked) whose run is lost after checkpoint 10: stopped (SIGTERM)
  while its harness hangs there, its worker leaves the committed prefix and checkpoint and
  releases the lease (`worker.agent`). A second such provider claims the job again, is
  handed checkpoint 10 by the API (`api.services.resume`) and resumes from a history of its
  own instead (`benchmarks.cheat_harness.bent_resume`). Caught when the oracles reject its
  attestation and nothing is paid.

Each phase is a pair of `MoreLoop` methods: one started in a thread as the providers start
(`start_workers`), one joined once they are done (`follow`), so a phase adds wall time only
where it outlasts them. Each returns a `PhaseRow` (a `LoopResult` with the verdict the phase
itself reached); `benchmarks.cheat` turns them into `end_to_end` rows.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from benchmarks.cheat_e2e import FINAL, LoopResult, _CheatLoop, _CheatProcess, job_spec
from benchmarks.cheat_harness import (
    FORGED_RESUME,
    IDLE_LEASE,
    IDLE_S,
    LOST_AT,
    LOST_ATTEMPT,
    LOST_MARK,
)
from benchmarks.cheat_provider import (
    L4_VERIFIER,
    PADDED_MODEL,
    RESUME_MODEL,
    SPOOF_GPU,
    SPOOFED_MODEL,
)
from demos import job as demo_job
from demos.demo import _Job, _Wallet, _Worker

# The API's challenge at a small deployment's size: n=4096 (2 x 4096^3 = 137 GFLOP, a few
# seconds of this CPU's numpy, 3 ms of an H100's) with 1 s for hashing C and the round trips
# (a GPU hashes 4096 rows of C in well under that). The defaults (n=8192, 3 s) hold a CPU
# for a minute or more per round here; at n=4096 they would let a fast CPU through in the
# 3 s allowance, which is why the allowance shrinks with n.
CHALLENGE_N, CHALLENGE_OVERHEAD_S = 4096, 1.0
# The spoofer's own (self-reported) challenge: small, it is its own word anyway.
LOCAL_CHALLENGE_N = 512
# The job asking for one GPU of 64 GB (only the spoofed H100 80GB has that much: the other
# phases' GPUs, an L4 24GB and two L40S 48GB, cannot take it): no GPU that failed its check
# is offered, so nobody can claim it
# (priced low: the providers' and the saboteur's escrows hold most of the submitter's NTX).
GPU_PRICE, GPU_BUDGET = 10_000, 10_000
# The padder's rate card: 180,000 NTX units per GPU-hour (50 a second), so its few seconds of
# training are worth a few hundred and its two idle minutes 6,000; the job caps it at 40,000.
PAD_RATE, PAD_MAX = 180_000, 40_000
# A phase's thread gives up waiting for the providers' jobs to be leased after this long.
LEASED_WAIT_S = 300.0
# ... and `follow` for a phase's verdict, once the providers' loop is done. The padder attests
# last (it idles 100 s after the providers are leased), then waits on its L4 verifier's replay.
VERDICT_WAIT_S = 360.0
# The resume phase's job: one GPU of 32 GB (only its two providers' L40S have that much).
RESUME_PRICE = 10_000


@dataclass(frozen=True)
class PhaseRow(LoopResult):
    """A phase's row: what the loop showed, and the verdict the phase reached from it."""

    caught: bool = False
    by: str = ""
    expected_value: float | None = None  # None: the model's, from the check-only row
    claimed_ntx: int = 0
    observed: dict[str, Any] = field(default_factory=dict)


class MoreLoop(_CheatLoop):
    """`_CheatLoop` with this module's phases played beside its providers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.headers: dict[str, str] = {}
        self.gpu_job: _Job | None = None
        self.spoofer: _Worker | None = None
        self.spoof_onboarding: dict[str, Any] = {}
        self.spoof_polled_from = 0.0
        self.padder: _Worker | None = None
        self.pad_job: _Job | None = None
        self.pad_onboarding: dict[str, Any] = {}
        self.pad_verifier: _Worker | None = None
        self.lost: _Worker | None = None
        self.forger: _Worker | None = None
        self.resume_job: _Job | None = None
        self.resume_notes: dict[str, Any] = {}
        self._lock_mutex = threading.Lock()
        self.phase_rows: list[PhaseRow] = []
        self._phase_threads: list[threading.Thread] = []
        self._phase_errors: list[BaseException] = []

    # -- the loop's hooks -----------------------------------------------------------------

    def _api_env(self) -> dict[str, str]:
        return {
            **super()._api_env(),
            # Offered GPUs: never one that failed its challenge; unchecked ones too (the
            # rate-card provider's, which a CPU stands in for).
            "PROOFNET_API_GPU_CHALLENGE_REQUIRED": "false",
            "PROOFNET_API_GPU_CHALLENGE_N": str(CHALLENGE_N),
            "PROOFNET_API_GPU_CHALLENGE_OVERHEAD_S": str(CHALLENGE_OVERHEAD_S),
        }

    def post_jobs(self, headers: dict[str, str]) -> None:
        """The providers' jobs, then the phases' own (locked in the same escrow tx)."""
        super().post_jobs(headers)
        self.headers = headers
        assert self.state.repo is not None
        spec = job_spec(self.state.repo.commit, demo_job.SEED + 3000)
        spec["resources"] = {**spec["resources"], "gpus": 1, "gpu_memory_mb": 64_000}
        spec["pricing"] = {"kind": "fixed", "amount": GPU_PRICE}
        self.gpu_job = self._post(spec, GPU_BUDGET)

    def start_workers(self, strategies: tuple[str, ...] | None = None) -> None:
        if strategies is None and not self._phase_threads:
            for phase in (self.spoof_phase, self.pad_phase, self.resume_phase):
                thread = threading.Thread(target=self._phase, args=(phase,), daemon=True)
                thread.start()
                self._phase_threads.append(thread)
        super().start_workers(strategies)

    def follow(self) -> dict[str, dict[str, Any]]:
        seen = super().follow()
        waited = time.monotonic()
        for thread in self._phase_threads:
            thread.join(timeout=LEASED_WAIT_S)
        if self._phase_errors:
            raise self._phase_errors[0]
        self.phase_rows.append(self.spoof_result())
        self.phase_rows.append(self.pad_result())
        self.phase_rows.append(self.resume_result())
        # The wall time the phases added after the providers' loop was done (their threads
        # ran beside it until then).
        added = round(time.monotonic() - waited, 1)
        self.phase_rows = [replace(r, seconds=added) for r in self.phase_rows]
        # The phases' workers are done with: none may take a later phase's job.
        self.stop_phase_workers()
        return seen

    def verdicts(self) -> dict[str, dict[str, Any]]:
        """The providers' verdicts only: a phase's job changing status must not hold the
        providers' loop open (`follow` waits for no change for `STALL_S`)."""
        phase_jobs = {j.job_id for j in (self.gpu_job, self.pad_job, self.resume_job) if j}
        seen: dict[str, dict[str, Any]] = {}
        for job in self.state.jobs:
            if job.job_id in phase_jobs:
                continue
            for att in self._attestations(job):
                seen[str(att.get("payout_address"))] = att
        return seen

    def play(self) -> list[LoopResult]:
        results = super().play()
        return [*results, *self.phase_rows]

    def stop_workers(self) -> None:
        super().stop_workers()
        self.stop_phase_workers()

    def stop_phase_workers(self) -> None:
        for worker in (self.spoofer, self.padder, self.pad_verifier, self.lost, self.forger):
            if worker is not None and worker.process is not None and not worker.process.exited:
                worker.process.stop()

    # -- plumbing -------------------------------------------------------------------------

    def _post(self, spec: dict[str, Any], budget: int) -> _Job:
        job = self.post_job(spec, self.headers, budget)
        self.state.jobs.append(job)
        return job

    def job_status(self, job: _Job) -> dict[str, Any]:
        got = self.http.get(f"{self.state.api_url}/api/v1/jobs/{job.job_id}", headers=self.headers)
        got.raise_for_status()
        return dict(got.json())

    def _phase(self, phase: Any) -> None:
        try:
            phase()
        except BaseException as e:  # raised again in `follow`
            self._phase_errors.append(e)

    def onboard_bent(self, worker: _Worker, strategy: str, *extra: str) -> dict[str, Any]:
        """`proofnet worker onboard` in the bent process of `strategy`: its report."""
        worker.dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self._base_env(), "PROOFNET_WORKER_RUNTIME": "process"}
        log = self.logs / f"{worker.name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        argv = [*self.onboard_argv(worker), "--skip-runtime-check", *extra]
        started = time.monotonic()
        with log.open("ab") as err:
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.cheat_provider", strategy, *argv],
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                cwd=worker.dir,
                timeout=LEASED_WAIT_S,
                check=False,
            )
        try:
            report = json.loads(done.stdout)
        except ValueError:
            report = {"registered": False, "problems": [done.stdout.decode(errors="replace")]}
        worker.key_id = str(report.get("key_id", ""))
        return {
            "exit_code": done.returncode,
            "registered": bool(report.get("registered")),
            "problems": list(report.get("problems") or []),
            "onboarding_s": round(time.monotonic() - started, 1),
        }

    def run_bent(self, worker: _Worker, strategy: str) -> None:
        """`proofnet worker run --once` in the bent process of `strategy`."""
        process = _CheatProcess(
            worker.name,
            [*self.run_argv(worker), "--once"],
            self.logs / f"{worker.name}.log",
            env={**self._base_env(), "PROOFNET_WORKER_RUNTIME": "process"},
            cwd=worker.dir,
        )
        process.strategy = strategy
        worker.process = process.start()

    def worker_api(self, worker: _Worker) -> Any:
        """An `ApiClient` signing as `worker` (its key file)."""
        from worker.api_client import ApiClient
        from worker.identity import load_or_create_key

        key, _ = load_or_create_key(worker.dir / "worker.skey")
        return ApiClient(self.state.api_url, key, "devnet")

    def lock(self, jobs: list[_Job]) -> None:
        """Lock `jobs`' budgets in one escrow transaction of their own (as `lock_escrows`
        does for the loop's jobs) and record each escrow with the API."""
        submitter, deployment = self.state.submitter, self.state.deployment
        assert submitter is not None and deployment is not None
        with self._lock_mutex:  # the submitter's UTxOs: one lock transaction at a time
            self._lock(jobs, submitter, deployment)

    def _lock(self, jobs: list[_Job], submitter: Any, deployment: Any) -> None:
        from pycardano import Address

        from chain.offchain.builders import EscrowJob, KeyWallet, lock_escrows
        from chain.offchain.builders.wallet import await_output
        from oracle.settlement.scenario import Devnet

        context = Devnet(self.state.devnet_url).context()
        deadline = int(time.time() * 1000) + 3_600_000
        escrows = [
            EscrowJob(
                job_id=bytes.fromhex(job.job_id),
                budget=job.budget,
                deadline=deadline,
                submitter=Address.from_primitive(submitter.address),
                nonce=100 + i,
            )
            for i, job in enumerate(jobs)
        ]
        result = lock_escrows(context, deployment, escrows, KeyWallet(submitter.signing_key))
        await_output(context, deployment.escrow_address, result.tx_id)
        for job, ref in zip(jobs, result.escrow_refs, strict=True):
            tx_id, _, index = ref.partition("#")
            recorded = self.http.post(
                f"{self.state.api_url}/api/v1/jobs/{job.job_id}/escrow",
                json={"tx_id": tx_id, "index": int(index)},
                headers=self.headers,
            )
            recorded.raise_for_status()
            job.escrow = ref

    def _wait_providers_leased(self) -> None:
        """Until no CPU job of the loop (the providers', the saboteur's when it is posted
        with them) is still queued: a phase's `--once` worker started earlier could take
        one of them (its GPU does not keep it from CPU jobs)."""
        deadline = time.monotonic() + LEASED_WAIT_S
        theirs = [j for j in self.state.jobs if not j.spec["resources"].get("gpus")]
        while time.monotonic() < deadline:
            if all(self.job_status(j).get("status") != "queued" for j in theirs):
                return
            time.sleep(1.0)

    # -- a. the spoofed GPU ---------------------------------------------------------------

    def spoof_phase(self) -> None:
        """Onboard a CPU worker claiming an H100 through the API's challenge, then run it
        once the providers' jobs are leased (the GPU job alone left in the queue)."""
        worker = self.spoofer = _Worker("spoofer", self.workdir / "spoofer", _Wallet.generate())
        self.spoof_onboarding = self.onboard_bent(
            worker, SPOOF_GPU, "--challenge-n", str(LOCAL_CHALLENGE_N)
        )
        if not self.spoof_onboarding["registered"]:
            return
        self._wait_providers_leased()
        self.spoof_polled_from = time.monotonic()
        self.run_bent(worker, SPOOF_GPU)

    def spoof_gpus(self) -> list[dict[str, Any]]:
        """The API's answer to the spoofer's worker: its GPUs, offered or not, and why."""
        assert self.spoofer is not None
        with self.worker_api(self.spoofer) as client:
            answer = client.request("GET", "/api/v1/worker/gpus").json()
        return list(answer.get("gpus") or [])

    def spoof_result(self) -> PhaseRow:
        assert self.gpu_job is not None and self.spoofer is not None
        polled = time.monotonic() - self.spoof_polled_from if self.spoof_polled_from else 0.0
        registered = self.spoof_onboarding.get("registered", False)
        gpus = self.spoof_gpus() if registered else []
        job = self.job_status(self.gpu_job)
        paid = self.balances(self.spoofer.payout.address).ntx
        offered = any(g.get("offered") for g in gpus)
        status = str(job.get("status"))
        never_leased = status == "queued" and not job.get("attempts")
        ran = self.spoofer.process is not None
        why = "; ".join(f"{g.get('model')}: {g.get('why')}" for g in gpus) or "; ".join(
            self.spoof_onboarding.get("problems") or ["not registered"]
        )
        by = (
            f"API GPU challenge (n={CHALLENGE_N}, {CHALLENGE_OVERHEAD_S:g} s allowance): "
            f"{'offered' if offered else 'not offered'}: {why}; the 1-GPU job stayed "
            f"{status} ({job.get('attempts') or 0} attempts)"
            + (f" while the spoofer's worker polled {polled:.0f} s" if ran else "")
        )
        return PhaseRow(
            strategy=SPOOF_GPU,
            status="not_offered" if not offered else "offered",
            reason="gpu_challenge_failed" if not offered else "",
            message=why[:300],
            fault="provider" if not offered else "",
            paid_ntx=paid,
            settlement_tx="",
            job_id=self.gpu_job.job_id,
            seconds=round(polled, 1),
            verification="api_gpu_challenge",
            caught=not offered and never_leased and paid == 0,
            by=by,
            expected_value=0.0 if never_leased and paid == 0 else None,
            observed={
                "claimed_model": SPOOFED_MODEL,
                "api_challenge_n": CHALLENGE_N,
                "api_challenge_overhead_s": CHALLENGE_OVERHEAD_S,
                "onboarding": self.spoof_onboarding,
                "gpus": gpus,
                "gpu_job_status": status,
                "gpu_job_attempts": job.get("attempts") or 0,
                "worker_polled_s": round(polled, 1),
            },
        )

    # -- b. the idle lease on a rate-card job ---------------------------------------------

    def pad_phase(self) -> None:
        """Onboard the padder (its L4 offered unchecked), publish its rate card, post and
        lock a rate-card job naming it, then run the padder once the providers' jobs are
        leased."""
        from worker.rate_card_cli import publish_rates

        worker = self.padder = _Worker("padder", self.workdir / "padder", _Wallet.generate())
        self.pad_onboarding = self.onboard_bent(worker, IDLE_LEASE, "--skip-challenge")
        if not self.pad_onboarding["registered"]:
            return
        self.start_pad_verifier()
        with self.worker_api(worker) as client:
            card = publish_rates(client, {PADDED_MODEL: PAD_RATE})
        assert card is not None
        assert self.state.repo is not None
        spec = job_spec(self.state.repo.commit, demo_job.SEED + 4000)
        spec["resources"] = {**spec["resources"], "gpus": 1, "gpu_memory_mb": 16_000}
        spec["pricing"] = {"kind": "rate_card", "rate_card": card.digest, "max_amount": PAD_MAX}
        self.pad_job = self._post(spec, PAD_MAX)
        self.lock([self.pad_job])
        self._wait_providers_leased()
        self.run_bent(worker, IDLE_LEASE)

    def start_pad_verifier(self) -> None:
        """An honest verify-only worker on an L4 (`L4_VERIFIER`): the padder's proof, made
        on an L4, can be replayed only by a worker with one, and the pool's are CPUs."""
        verifier = self.pad_verifier = _Worker(
            "l4-verifier", self.workdir / "l4-verifier", _Wallet.generate()
        )
        self.pad_onboarding["verifier"] = self.onboard_bent(
            verifier, L4_VERIFIER, "--skip-challenge"
        )
        process = _CheatProcess(
            verifier.name,
            [*self.run_argv(verifier), "--verify-only"],
            self.logs / f"{verifier.name}.log",
            env=self.verifier_env(),
            cwd=verifier.dir,
        )
        process.strategy = L4_VERIFIER
        verifier.process = process.start()

    def final_attestation(self, job: _Job | None, worker: _Worker | None) -> dict[str, Any]:
        """`job`'s latest attestation once final, or as it is `VERDICT_WAIT_S` from now, or
        20 s after `worker` exited without one."""
        att: dict[str, Any] = {}
        deadline = time.monotonic() + VERDICT_WAIT_S
        gone: float | None = None  # when the worker was first seen exited, unattested
        while job is not None and worker is not None:
            atts = self._attestations(job)
            att = atts[-1] if atts else {}
            now = time.monotonic()
            if not att and (worker.process is None or worker.process.exited):
                gone = gone or now
            if str(att.get("status")) in FINAL or now > deadline:
                break
            if gone is not None and now - gone > 20:
                break
            time.sleep(1.0)
        return att

    def pad_result(self) -> PhaseRow:
        """The padder's verdict, once final (or `VERDICT_WAIT_S` after the providers')."""
        assert self.padder is not None
        job = self.pad_job
        att = self.final_attestation(job, self.padder)
        status = str(att.get("status", "none"))
        paid = self.balances(self.padder.payout.address).ntx
        claimed = int(att.get("amount") or 0)
        message = str(att.get("message") or "")
        bound = re.search(r"attested, but the proof backs at most (\d+)", message)
        payable = re.search(r"at most (\d+) is payable", message)
        attested = re.search(r"(\d+) GPU-ms attested", message)
        refused = status == "rejected" and att.get("reason") == "gpu_time_exceeds_proof"
        by = (
            f"metering bounded by proof (oracle): {status}"
            + (f" ({att.get('reason')}): {message}" if att.get("reason") else "")
            + f"; claimed {claimed:,} NTX units for its job and {IDLE_S:.0f} s idle on the "
            f"lease, paid {paid:,}"
        )
        if not att:
            by = f"not played: {self.pad_onboarding or 'the padder never attested'}"
        return PhaseRow(
            strategy=IDLE_LEASE,
            status=status,
            reason=str(att.get("reason") or ""),
            message=message[:300],
            fault=str(att.get("fault") or ""),
            paid_ntx=paid,
            settlement_tx="",
            job_id="" if job is None else job.job_id,
            seconds=0.0,
            caught=refused and paid == 0,
            by=by,
            claimed_ntx=claimed,
            observed={
                "gpu_model": PADDED_MODEL,
                "rate_ntx_per_gpu_hour": PAD_RATE,
                "max_amount": PAD_MAX,
                "idle_s": IDLE_S,
                "onboarding": self.pad_onboarding,
                "attested_gpu_ms": int(attested.group(1)) if attested else None,
                "proof_bound_ms": int(bound.group(1)) if bound else None,
                "payable_ntx": int(payable.group(1)) if payable else None,
            },
        )

    # -- c. the resume from a forged checkpoint -------------------------------------------

    def resume_phase(self) -> None:
        """Onboard the lost provider and the forger, post and lock the 1-GPU job, run the
        first until its checkpoint `LOST_AT` is committed, stop it, then run the forger."""
        lost = self.lost = _Worker("lost", self.workdir / "lost", _Wallet.generate())
        forger = self.forger = _Worker("forger", self.workdir / "forger", _Wallet.generate())
        for worker, strategy in ((lost, LOST_ATTEMPT), (forger, FORGED_RESUME)):
            onboarded = self.onboard_bent(worker, strategy, "--skip-challenge")
            self.resume_notes[f"{worker.name}_onboarding"] = onboarded
            if not onboarded["registered"]:
                return
        assert self.state.repo is not None
        spec = job_spec(self.state.repo.commit, demo_job.SEED + 5000)
        spec["resources"] = {**spec["resources"], "gpus": 1, "gpu_memory_mb": 32_000}
        spec["pricing"] = {"kind": "fixed", "amount": RESUME_PRICE}
        self.resume_job = self._post(spec, RESUME_PRICE)
        self.lock([self.resume_job])
        self._wait_providers_leased()
        self.run_bent(lost, LOST_ATTEMPT)
        deadline = time.monotonic() + LEASED_WAIT_S
        while not any(lost.dir.rglob(LOST_MARK)):
            if time.monotonic() > deadline or (lost.process and lost.process.exited):
                self.resume_notes["lost"] = "the first provider never reached its checkpoint"
                return
            time.sleep(0.5)
        # The machine is lost: the worker leaves its committed checkpoint and releases.
        assert lost.process is not None
        lost.process.stop(timeout=60)
        self.resume_notes["lost"] = f"stopped after checkpoint {LOST_AT}"
        self.run_bent(forger, FORGED_RESUME)

    def resume_result(self) -> PhaseRow:
        job = self.resume_job
        att = self.final_attestation(job, self.forger)
        status = str(att.get("status", "none"))
        paid = 0 if self.forger is None else self.balances(self.forger.payout.address).ntx
        history = [] if job is None else list(self.job_status(job).get("history") or [])
        reason = str(att.get("reason") or "")
        by = f"oracle: {status}" + (f" ({reason}): {att.get('message')}" if reason else "")
        if not att:
            by = f"not played: the forger never attested ({self.resume_notes})"
        return PhaseRow(
            strategy=FORGED_RESUME,
            status=status,
            reason=reason,
            message=str(att.get("message") or "")[:300],
            fault=str(att.get("fault") or ""),
            paid_ntx=paid,
            settlement_tx="",
            job_id="" if job is None else job.job_id,
            seconds=0.0,
            caught=status == "rejected" and paid == 0,
            by=by,
            claimed_ntx=int(att.get("amount") or 0),
            observed={
                "gpu_model": RESUME_MODEL,
                "lost_at": LOST_AT,
                "attempt": att.get("attempt"),
                "history": [
                    {k: h.get(k) for k in ("attempt", "outcome", "resumed_at")} for h in history
                ],
                **self.resume_notes,
            },
        )
