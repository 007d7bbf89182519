"""`proofnet bench cheat --end-to-end`: the proof cheats played through the whole loop.

The loop is `proofnet demo`'s (`demos.demo`), every role its own process: a local devnet
with the protocol deployed (2-of-3 oracles), the API, three oracles with settlement on, and
one provider per strategy, each the product's worker (`proofnet worker run --once`) with its
harness bent as the strategy says (`benchmarks.cheat_provider`, `benchmarks.cheat_harness`):
it claims a job, trains it its way, uploads, attests, and is paid or not. The oracle's
verdict (status, reason) is read back from the proposer's API, the payment from the chain
(the provider's payout address). One job per provider, all posted at once and locked in one
escrow transaction with the saboteur's and its twin's; every verified one is settled in one
batch.

No oracle replays job code (issue 12, item 3): the oracles draw verifier workers from the
start, as everywhere outside the demo, and referee a disputed replay
(oracle/verification/referee.py). The pool is three honest verify-only workers
(`proofnet worker run --verify-only`, verifying under the process runtime as the local
devnet allows, `PROOFNET_WORKER_DEMO_PROCESS_VERIFY`): they replay and never claim, so the
cheaters' jobs go to the cheaters. The windows are oracle settings, short here
(`ORACLE_WINDOWS`): a caught cheater's worker exits after its one job, so its dispute ends
when `PROOFNET_ORACLE_DISPUTE_WITHIN_S` passes in silence (unproven: unpaid, not slashed).

The submitter whose code departs only when replayed is played in the same phase: its job and
an honest twin (the demo's trainer, another seed) are queued behind the providers' jobs, and
once those are claimed two honest workers (`proofnet worker run`, verifying too) take them.
The first verifier's replay of the saboteur's segments departs, so the referee draws a
second and asks the provider's worker for its sandbox replay
(`worker.verifier.Verifier.answer_disputes`), which departs alike: unproven, nobody paid.

The spoofed GPU, an idle lease on a rate-card job and a resume from a forged checkpoint are
played beside the providers by `benchmarks.cheat_e2e_more.MoreLoop` (`run_loop`'s
`loop_type`). The job code that reads a verifier's or an oracle's files is played after this
loop, in one of its own whose provider and verifier run on Docker
(`benchmarks.cheat_e2e_snoop`): here the workers verify under the process runtime.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from benchmarks.cheat_harness import STRATEGIES
from demos import job as demo_job
from demos.demo import DemoError, DemoOptions, _Demo, _Job, _Wallet, _Worker
from proofnet.processes import RoleProcess, run_role_command

# The e2e bench job: the demo job over the check-only bench's schedule (20 segments of 5
# steps), so a faked fraction is a handful of segments, not one of four.
STEPS, INTERVAL, DATASET, BATCH, HIDDEN = 100, 5, 256, 32, 16
# Ten escrows out of the demo submitter's 10,000,000 test NTX.
PRICE, BUDGET = 800_000, 900_000
FINAL = ("rejected", "unproven", "settled")
SUBMITTER_STRATEGY = "submitter_code_fails_only_on_verifiers"
# Honest workers that only verify (`proofnet worker run --verify-only`): the pool every
# oracle draws from, a disputed replay's second verifier other than the first. Two more
# honest workers take the saboteur's job and its twin (and verify as well).
VERIFY_ONLY_WORKERS = 3
SABOTEUR_WORKERS = 2
# Short windows (oracle settings), as a loop whose workers answer in seconds allows: a
# drawn verifier that has not answered in VERIFIER_ANSWER_S is replaced by the next
# round's, and a disputed provider silent for DISPUTE_S concedes (a cheater's worker exits
# after its one job, so each caught cheater's dispute waits this long, all at once). The
# saboteur's honest provider answers its dispute in seconds.
VERIFIER_ANSWER_S, DISPUTE_S = 90, 20
ORACLE_WINDOWS = {
    "PROOFNET_ORACLE_VERIFIER_ANSWER_WITHIN_S": str(VERIFIER_ANSWER_S),
    "PROOFNET_ORACLE_DISPUTE_WITHIN_S": str(DISPUTE_S),
}

# The submitter's saboteur: the demo's trainer, but departing once its process sees steps
# skipped (what a replay of drawn segments does and training never does): the harness shows
# it no mode, so it keys on its own history (benchmarks.cheat, the check-only twin).
SABOTEUR_PY = '''"""A trainer that trains honestly and departs only when replayed."""

from pot.examples.numpy_mlp import MLPTrainer as _Honest


class MLPTrainer(_Honest):
    def __init__(self, ctx):
        super().__init__(ctx)
        self.last_step = 0
        self.replaying = False

    def train_step(self, step, indices):
        if step != self.last_step + 1:
            self.replaying = True
        self.last_step = step
        loss = float(super().train_step(step, indices))
        if self.replaying:
            self.params["b2"] += 1e-3
        return loss
'''
LOOP_TIMEOUT_S = 420.0
# A claim the quorum refuses is retried after the co-signers' cooldown (60 s): no change
# for this long once every provider has attested means none is coming.
STALL_S = 75.0


@dataclass(frozen=True)
class LoopResult:
    """What the loop showed of one cheating provider."""

    strategy: str
    status: str  # the oracle's last status for its attestation ("none": it never attested)
    reason: str
    message: str
    fault: str
    paid_ntx: int  # NTX at its payout address after the loop (it starts with none)
    settlement_tx: str
    job_id: str
    seconds: float
    # A co-signer's refusal to sign a batch paying it (its own draw rejected it): then
    # never signed, or signed by another co-signer whose draw missed.
    quorum_refusal: str = ""
    # Who replayed the drawn segments: drawn verifier workers, a disputed replay refereed
    # (`drawn_verifiers`: every row of this loop), or the oracles themselves
    # (`local_replay`, the demo's way; this loop no longer plays it).
    verification: str = "drawn_verifiers"
    # The saboteur's honest twin, verified by the same drawn workers in the same phase:
    # its status, payment and settlement (what makes "caught" mean something).
    twin: dict[str, Any] = field(default_factory=dict)


def job_spec(commit: str, seed: int, repo_url: str = demo_job.REPO_URL) -> dict[str, Any]:
    spec = demo_job.job_spec(commit, seed=seed)
    spec["model"] = {"repo_url": repo_url, "commit": commit}
    spec["pricing"] = {"kind": "fixed", "amount": PRICE}
    # The spec's default number of random picks (the demo job asks for 2): the table's k.
    del spec["proof"]["spot_checks"]
    spec["proof"] = {
        **spec["proof"],
        "config": {"hidden": HIDDEN, "lr": "0.05"},
        "schedule": {"steps": STEPS, "dataset_size": DATASET, "batch_size": BATCH},
        "steps_per_checkpoint": INTERVAL,
    }
    return spec


class _CheatProcess(RoleProcess):
    """`python -m benchmarks.cheat_provider STRATEGY <argv>`: the worker, harness bent."""

    strategy: str = ""

    def start(self) -> RoleProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.cwd is not None:
            self.cwd.mkdir(parents=True, exist_ok=True)
        import os

        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.cheat_provider", self.strategy, *self.argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                cwd=self.cwd,
                start_new_session=True,
            )
        return self


class _CheatLoop(_Demo):
    """The demo's loop with one cheating provider per strategy in place of its workers."""

    def __init__(
        self, workdir: Path, console: Console, strategies: tuple[str, ...], saboteur: bool
    ) -> None:
        super().__init__(
            workdir,
            console,
            DemoOptions(
                # One settlement batch for every job: the providers', the saboteur's and
                # its twin's.
                jobs=len(strategies) + (2 if saboteur else 0),
                loop_timeout_s=LOOP_TIMEOUT_S,
                confirmation_depth=1,
            ),
        )
        self.strategies = strategies
        self.saboteur = saboteur
        self.by_worker: dict[str, str] = {}  # payout address -> strategy
        # The honest verifying workers: verify-only ones, and those that took the
        # saboteur's job and its twin.
        self.verifiers: list[_Worker] = []

    def start_workers(self, strategies: tuple[str, ...] | None = None) -> None:
        """One provider per strategy (its harness bent so), each onboarded, then running
        for one job. A submitter's strategy gets an honest provider."""
        assert self.state.repo is not None
        strategies = self.strategies if strategies is None else strategies
        first = len(self.state.workers)
        workers = [
            _Worker(
                f"cheat-{first + i}-{s}", self.workdir / f"cheat-{first + i}", _Wallet.generate()
            )
            for i, s in enumerate(strategies)
        ]
        env = {**self._base_env(), "PROOFNET_WORKER_RUNTIME": "process"}
        self.onboard(workers, env)
        for worker, strategy in zip(workers, strategies, strict=True):
            self.state.workers.append(worker)
            self.by_worker[worker.payout.address] = strategy
            process = _CheatProcess(
                worker.name,
                [*self.run_argv(worker), "--once"],
                self.logs / f"{worker.name}.log",
                env=env,
                cwd=worker.dir,
            )
            process.strategy = "honest_control" if strategy == SUBMITTER_STRATEGY else strategy
            # Not in self.roles: a provider that exits after its one job is not a failure.
            worker.process = process.start()

    def start_verifying_workers(self, count: int, *, verify_only: bool = False) -> list[_Worker]:
        """`count` honest workers (`proofnet worker run`, not bent, not `--once`) that
        verify: each asks for verification tasks every second (so it is a candidate
        verifier) and answers the disputes of its own proofs, under the process runtime as
        the local devnet allows (`PROOFNET_WORKER_DEMO_PROCESS_VERIFY`). They take jobs too,
        unless `verify_only` (`--verify-only`: never a claim)."""
        first = len(self.verifiers)
        kind = "verify-only" if verify_only else "verifier"
        workers = [
            _Worker(f"{kind}-{first + i}", self.workdir / f"{kind}-{first + i}", _Wallet.generate())
            for i in range(count)
        ]
        env = self.verifier_env()
        self.onboard(workers, env)
        for worker in workers:
            worker.process = RoleProcess(
                worker.name,
                [*self.run_argv(worker), *(["--verify-only"] if verify_only else [])],
                self.logs / f"{worker.name}.log",
                env=env,
                cwd=worker.dir,
            ).start()
        self.verifiers.extend(workers)
        return workers

    def verifier_env(self) -> dict[str, str]:
        """A verifying worker's environment: it asks for tasks every second and verifies
        under the process runtime, as the local devnet allows."""
        return {
            **self._base_env(),
            "PROOFNET_WORKER_RUNTIME": "process",
            "PROOFNET_WORKER_DEMO_PROCESS_VERIFY": "true",
            "PROOFNET_WORKER_VERIFICATION_POLL_S": "1",
            "PROOFNET_WORKER_ORACLE_KEYS": ",".join(o.public_key for o in self.state.oracles),
        }

    def run_argv(self, worker: _Worker) -> list[str]:
        assert self.state.repo is not None
        return [
            "worker",
            "run",
            "--api-url",
            self.state.api_url,
            "--oracle-url",
            self.state.oracles[0].url,
            "--runtime",
            "process",
            "--network",
            "devnet",
            "--repo-rewrite",
            self.state.repo.rewrite,
            "--poll-interval",
            "0.5",
            "--grace",
            "5",
            "--key-file",
            str(worker.dir / "worker.skey"),
            "--work-dir",
            str(worker.dir / "work"),
        ]

    def onboard(self, workers: list[_Worker], env: dict[str, str]) -> None:
        def onboard(worker: _Worker) -> None:
            out = run_role_command(
                f"{worker.name} onboard",
                self.onboard_argv(worker),
                self.logs / f"{worker.name}.log",
                env=env,
                cwd=worker.dir,
            )
            report = json.loads(out)
            if not report.get("registered"):
                raise DemoError(f"{worker.name} did not register: {report.get('problems')}")
            worker.key_id = str(report.get("key_id", ""))

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(onboard, workers))

    def start_network(self) -> dict[str, str]:
        """The demo's repository, the devnet with the protocol deployed, the API, and the
        oracles drawing verifier workers (none replays job code) with the loop's short
        windows; returns the approved submitter's headers."""
        from proofnet.processes import free_port

        self.state.repo = demo_job.create_repo(self.workdir / "git")
        self.start_devnet()
        self.oracle_keys()
        self.state.api_url = f"http://127.0.0.1:{free_port()}"
        self.seed_seniors()
        self.start_api()
        self.deploy_chain()
        self.start_oracles(drawn_verifiers=True, extra_env=ORACLE_WINDOWS)
        return self.approve_submitter()

    def post_job(self, spec: dict[str, Any], headers: dict[str, str], budget: int = BUDGET) -> _Job:
        """Submit `spec` as the submitter (not locked yet, not in `state.jobs`)."""
        posted = self.http.post(
            f"{self.state.api_url}/api/v1/jobs", json={"spec": spec}, headers=headers
        )
        if posted.status_code != 201:
            raise DemoError(f"job submission: {posted.status_code} {posted.text[:300]}")
        return _Job(posted.json()["job_id"], spec, budget)

    def post_jobs(self, headers: dict[str, str]) -> None:
        """One job per strategy (not locked yet: `lock_escrows`)."""
        assert self.state.repo is not None
        for i in range(len(self.strategies)):
            spec = job_spec(self.state.repo.commit, demo_job.SEED + i)
            self.state.jobs.append(self.post_job(spec, headers))

    def post_saboteur(self, headers: dict[str, str], *, lock: bool = True) -> tuple[_Job, _Job]:
        """The saboteur's job and its honest twin (the demo's trainer, another seed), posted
        after the providers' jobs (so queued behind them) and, with `lock`, locked in an
        escrow transaction of their own (else with the others': `lock_escrows`):
        (saboteur's, twin)."""
        assert self.state.repo is not None
        repo = demo_job.commit_repo(
            self.state.repo.root, "saboteur.git", {"mlp.py": SABOTEUR_PY}, "departs on replay"
        )
        specs = (
            job_spec(repo.commit, demo_job.SEED + 1000, demo_job.URL_PREFIX + "saboteur.git"),
            job_spec(self.state.repo.commit, demo_job.SEED + 2000),
        )
        jobs = [self.post_job(spec, headers) for spec in specs]
        if not lock:
            self.state.jobs.extend(jobs)
            return jobs[0], jobs[1]
        earlier, self.state.jobs = self.state.jobs, jobs
        try:
            self.lock_escrows(headers)
        finally:
            self.state.jobs = [*earlier, *jobs]
        return jobs[0], jobs[1]

    def wait_claimed(self, jobs: list[_Job], headers: dict[str, str]) -> None:
        """Until none of `jobs` is queued any more (each claimed), or every provider
        started so far has exited (none is left to claim), or the loop's timeout."""
        deadline = time.monotonic() + self.options.loop_timeout_s

        def queued(job: _Job) -> bool:
            st = self.http.get(
                f"{self.state.api_url}/api/v1/jobs/{job.job_id}/status", headers=headers
            )
            # An answer that is not the job's status (a busy API) counts as still queued.
            return st.status_code != 200 or st.json().get("status") == "queued"

        while time.monotonic() < deadline:
            left = [job for job in jobs if queued(job)]
            gone = all(w.process is None or w.process.exited for w in self.state.workers)
            if not left or gone:
                return
            time.sleep(0.5)

    def follow_jobs(self, jobs: dict[str, _Job]) -> dict[str, dict[str, Any]]:
        """The latest attestation of each job (by name) once all are final (or whatever
        they are at the loop's timeout); `{}` for a job none came for."""
        deadline = time.monotonic() + self.options.loop_timeout_s
        shown: dict[str, str] = {}
        while True:
            latest: dict[str, dict[str, Any]] = {}
            for name, job in jobs.items():
                atts = self._attestations(job)
                att = latest[name] = atts[-1] if atts else {}
                said = f"{att.get('status')}: {str(att.get('message') or '')[:120]}"
                if att and said != shown.get(name):
                    shown[name] = said
                    self.console.print(f"  {name}: {said}", soft_wrap=True, markup=False)
            done = all(str(a.get("status")) in FINAL for a in latest.values())
            if done or time.monotonic() > deadline:
                return latest
            time.sleep(1.0)

    def verdicts(self) -> dict[str, dict[str, Any]]:
        """The latest attestation of each provider (by payout address), over every job."""
        seen: dict[str, dict[str, Any]] = {}
        for job in self.state.jobs:
            for att in self._attestations(job):
                seen[str(att.get("payout_address"))] = att
        return seen

    def follow(self) -> dict[str, dict[str, Any]]:
        """Until every provider's attestation is final (rejected, or settled on chain) or
        its worker exited without attesting, or nothing has changed for `STALL_S` (a claim
        the quorum keeps refusing stays verified at the proposer: `refusals`), or the loop
        times out."""
        deadline = time.monotonic() + self.options.loop_timeout_s
        last, changed = None, time.monotonic()
        while True:
            seen = self.verdicts()
            pending = [
                w
                for w in self.state.workers
                if seen.get(w.payout.address, {}).get("status") not in FINAL
                and not (
                    w.payout.address not in seen and w.process is not None and w.process.exited
                )
            ]
            now = time.monotonic()
            # A claim the quorum keeps refusing goes batched -> verified every round: no
            # progress, so both count as one state here.
            shown = sorted(
                (a, str(v.get("status")).replace("batched", "verified")) for a, v in seen.items()
            )
            if shown != last:
                last, changed = shown, now
            attested = all(
                w.payout.address in seen or (w.process is not None and w.process.exited)
                for w in self.state.workers
            )
            if not pending or now > deadline or (attested and now - changed > STALL_S):
                return seen
            time.sleep(1.0)

    def refusals(self) -> dict[str, str]:
        """Escrow ("tx#index") -> the last refusal naming it that the proposer logged (a
        co-signer whose own verifier rejected the attestation refuses to sign its batch)."""
        out: dict[str, str] = {}
        log_path = self.logs / f"{self.state.oracles[0].name}.log"
        for line in log_path.read_text(errors="replace").splitlines():
            if '"co-signer refused' not in line:
                continue
            try:
                msg = str(json.loads(line).get("msg", ""))
            except ValueError:
                continue
            found = re.search(r"escrow ([0-9a-f]{64}#\d+) (rejected: .*?)\"?}?$", msg)
            if found:
                out[found.group(1)] = found.group(2)
        return out

    def play(self) -> list[LoopResult]:
        """Every strategy in one phase, every replay by drawn verifier workers: the oracles
        draw from the start (none replays job code), three verify-only workers are the
        pool, one provider per strategy claims the first jobs of the queue, and once they
        are claimed two honest workers take the saboteur's job and its twin, queued
        behind them. Rows: the providers', then the saboteur's (its twin inside)."""
        started = time.monotonic()
        headers = self.start_network()
        self.post_jobs(headers)
        providers_jobs = list(self.state.jobs)
        sabotage = honest = None
        if self.saboteur:
            sabotage, honest = self.post_saboteur(headers, lock=False)
        self.lock_escrows(headers)
        self.console.print(
            f"loop up, {len(self.state.jobs)} jobs locked: {VERIFY_ONLY_WORKERS} verify-only "
            "workers and the providers"
        )
        # Candidates before any proof is attested: each asks for tasks as it starts.
        self.start_verifying_workers(VERIFY_ONLY_WORKERS, verify_only=True)
        self.start_workers()
        twinned: dict[str, Any] = {}
        sabotaged: dict[str, Any] = {}
        if sabotage is not None and honest is not None:
            # The providers' jobs are first in the queue: once each is claimed, the two
            # honest workers can take only the saboteur's job and its twin.
            self.wait_claimed(providers_jobs, headers)
            self.console.print(
                f"providers' jobs claimed: {SABOTEUR_WORKERS} honest workers for the "
                "saboteur's job and its twin"
            )
            self.start_verifying_workers(SABOTEUR_WORKERS)
        seen = self.follow()
        phase_s = time.monotonic() - started
        if sabotage is not None and honest is not None:
            phase = self.follow_jobs({"saboteur's job": sabotage, "honest twin": honest})
            sabotaged, twinned = phase["saboteur's job"], phase["honest twin"]
            # Read again: a claim verified when `follow` returned may be settled by now.
            seen = self.verdicts()
        results = []
        refused = self.refusals()
        for worker in self.state.workers:
            att = seen.get(worker.payout.address, {})
            settled = ""
            job = next((j for j in self.state.jobs if j.job_id == att.get("job_id")), None)
            if att.get("status") == "settled" and job is not None:
                from oracle.settlement.audit import settlement_tx_of

                settled = settlement_tx_of(self.state.devnet_url, job.escrow) or ""
            results.append(
                LoopResult(
                    strategy=self.by_worker[worker.payout.address],
                    status=str(att.get("status", "none")),
                    reason=str(att.get("reason") or ""),
                    message=str(att.get("message") or "")[:300],
                    fault=str(att.get("fault") or ""),
                    # A cheating provider verifies nothing: all it holds is its pay.
                    paid_ntx=self.balances(worker.payout.address).ntx,
                    settlement_tx=settled,
                    job_id=str(att.get("job_id") or ""),
                    seconds=round(phase_s, 1),
                    quorum_refusal="" if job is None else refused.get(job.escrow, ""),
                )
            )
        if self.saboteur:
            twin = self.saboteur_result(twinned, refused, started)
            results.append(
                replace(
                    self.saboteur_result(sabotaged, refused, started),
                    twin={
                        "status": twin.status,
                        "reason": twin.reason,
                        "message": twin.message[:200],
                        "paid_ntx": twin.paid_ntx,
                        "settlement_tx": twin.settlement_tx,
                        "job_id": twin.job_id,
                    },
                )
            )
        return results

    def saboteur_result(
        self, att: dict[str, Any], refused: dict[str, str], started: float
    ) -> LoopResult:
        payout = str(att.get("payout_address") or "")
        job = next((j for j in self.state.jobs if j.job_id == att.get("job_id")), None)
        settled = ""
        if att.get("status") == "settled" and job is not None:
            from oracle.settlement.audit import settlement_tx_of

            settled = settlement_tx_of(self.state.devnet_url, job.escrow) or ""
        # What the job's own settlement paid its provider: these workers also verify, and
        # a verifier's fee from another job lands at the same payout address.
        paid = self.paid_in(settled, payout) if settled and payout else 0
        return LoopResult(
            strategy=SUBMITTER_STRATEGY,
            status=str(att.get("status", "none")),
            reason=str(att.get("reason") or ""),
            message=str(att.get("message") or "")[:600],
            fault=str(att.get("fault") or ""),
            paid_ntx=paid,
            settlement_tx=settled,
            job_id=str(att.get("job_id") or ""),
            seconds=round(time.monotonic() - started, 1),
            quorum_refusal="" if job is None else refused.get(job.escrow, ""),
        )

    def paid_in(self, tx_id: str, address: str) -> int:
        """NTX that transaction `tx_id` paid to `address`."""
        response = self._devnet_get(f"/txs/{tx_id}/utxos")
        response.raise_for_status()
        unit = self.state.deployment.ntx_unit
        return sum(
            int(a["quantity"])
            for o in response.json()["outputs"]
            if o["address"] == address
            for a in o["amount"]
            if a["unit"] == unit
        )

    def stop_workers(self) -> None:
        for worker in [*self.state.workers, *self.verifiers]:
            if worker.process is not None and not worker.process.exited:
                worker.process.stop()


def run_loop(
    strategies: tuple[str, ...] = STRATEGIES,
    *,
    saboteur: bool = True,
    data_dir: Path | None = None,
    console: Console | None = None,
    loop_type: type[_CheatLoop] | None = None,
) -> list[LoopResult]:
    """Play the providers' `strategies` through the loop, then (`saboteur`) the
    submitter's job that departs on replay with an honest provider; every process started
    is stopped on return. `loop_type`: a `_CheatLoop` playing more beside them
    (`benchmarks.cheat_e2e_more.MoreLoop`)."""
    console = console or Console(stderr=True)
    if data_dir is None:
        with tempfile.TemporaryDirectory(
            prefix="proofnet-cheat-e2e-", ignore_cleanup_errors=True
        ) as tmp:
            return run_loop(
                strategies,
                saboteur=saboteur,
                data_dir=Path(tmp),
                console=console,
                loop_type=loop_type,
            )
    workdir = data_dir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    loop = (loop_type or _CheatLoop)(workdir, console, strategies, saboteur)
    try:
        with loop.roles:
            try:
                return loop.play()
            finally:
                loop.stop_workers()
    finally:
        loop.http.close()
