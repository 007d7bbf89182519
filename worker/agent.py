"""The worker's run loop: claim a job, run it with proof of training, return results, attest.

One job at a time:

1. claim a job from the API (the API matches it to this worker's GPUs); check the spec
   hashes to its id, that the worker can be paid for it (escrow known, pricing possible) and
   has the GPUs; otherwise release it;
2. keep the lease alive from a background thread; a lost lease stops the job, which is
   then never attested;
3. check out the model repository at the pinned commit, fetch the data, prepare the image;
4. run the spec's commands in order in the runtime, then (when the spec names a trainer)
   the network's proof-of-training harness (`worker.harness`), under the spec's limits,
   with the proof-of-training environment, streaming logs to the API and a local file,
   metered by the telemetry sampler;
5. a failed run (non-zero exit, OOM, timeout) is reported via /fail and never attested; a
   successful one has its declared results hashed and uploaded (with its `pot/` proof files
   when the spec declares `pot/**`, for the oracles' spot checks), and its attestation (PoT
   root from the job's manifest, result hashes, GPU time, nonce, amount) signed and put in
   the on-disk outbox; the lease is completed with it (the oracle checks the attestation
   against the API's completed job), and then it is sent to the oracle.

A claim may hand out one *unit* of a topology job (a relay stage, evaluation or
aggregation, or a cluster node; docs/topologies.md). The same steps run it, with what
`worker.units` adds (verified input checkpoints, the unit's data and environment, its
checkpoint or metrics) and, for a node, `worker.cluster`'s wait for the whole cluster and
torchrun; its attestation names the unit and claims the unit's planned amount. The worker
claims cluster nodes only when its runtime can network them (`Runtime.cluster_networking`).

`request_stop()` (SIGTERM/SIGINT) lets the current job finish within the grace period, else
kills it and releases the lease. The loop backs off with jitter on errors and never dies of
one.

Whose fault a failure is decides what the lease becomes (`worker.faults`): the job's own
(its code, repository, data or image) fails the lease and counts against the job's
attempts; this machine's (work dir, git mirror cache, disk, container engine, GPU runtime:
a `HostFault`) releases it without counting, is logged as an error for the provider with
what to fix, and makes the loop wait (backing off) before it claims again.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import random
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from proofnet.messages.attestation import (
    Attestation,
    AttestationDomain,
    SegmentClaim,
    SignedAttestation,
    StopClaim,
    UnitWork,
    sign_attestation,
)
from proofnet.messages.envelope import worker_private_key
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.segment_share import segment_cap, stopped_share
from proofnet.messages.topology import MultiNode
from proofnet.redaction import redact_credentials
from proofnet.settings import absolute
from worker import harness, units
from worker.api_client import (
    ApiClient,
    ApiClientError,
    ApiRefused,
    ApiUnavailable,
    ClaimedJob,
    InputRejected,
    LeaseLost,
)
from worker.checkpoint_upload import CheckpointUploader, SignClaim
from worker.cluster import (
    ClusterError,
    Rendezvous,
    network_environ,
    node_commands,
    wait_for_cluster,
)
from worker.data_fetch import DataFetchPolicy, fetch_data
from worker.delivery import DeliveryPolicy, deliver
from worker.faults import HostFault
from worker.held_results import MAX_TRIES, HeldJob, HeldResults
from worker.identity import WorkerKey
from worker.key_grants import GrantResponder
from worker.lease_keeper import LeaseKeeper
from worker.log_shipper import LogShipper
from worker.oracle_client import OracleClient, Outbox, OutboxEntry, send_with_retries
from worker.pricing import PricingError, RateCard
from worker.rate_cards import RateCardBook
from worker.results import (
    CollectedResult,
    ResultsError,
    collect_results,
    committed_checkpoint,
    declares_proof,
    final_metrics,
    pot_root,
    promote_prefix,
    seal_results,
    seals,
    split_proof_files,
)
from worker.runtime.base import (
    PullProgress,
    Resources,
    RunHandle,
    RunReason,
    RunResult,
    RunSpec,
    Runtime,
    RuntimeErrorBase,
)
from worker.seal_keys import SealKeyError, SealKeys
from worker.sealed_resume import SealedResumeError, check_against_leaf, open_checkpoint
from worker.sealing_check import SealingKeyRefused, SealingKeyUnverified, verify_sealing_key
from worker.telemetry import JobUsage, TelemetrySampler
from worker.unit_claim import ClusterState, UnitAssignment
from worker.verifier import Verifier, VerifierLoop, VerifierRefused
from worker.workspace import RepoCache, WorkspaceError, WorkspaceUnavailable

log = logging.getLogger(__name__)

# An upload gives up after this many tries in a row that moved it on by no byte.
UPLOAD_STALLS = 5


@dataclass
class _Stalls:
    """Tries of one upload since the last that moved it on (the API's offset grew): the
    retry's stop (UPLOAD_STALLS of them) and its wait (2 s, 4 s, ... up to the maximum)."""

    max_backoff_s: float
    count: int = 0
    reached: int = -1

    def progressed(self, offset: int) -> None:
        if offset > self.reached:
            self.count, self.reached = 0, offset

    def stop(self, _state: RetryCallState) -> bool:
        return self.count >= UPLOAD_STALLS

    def wait(self, _state: RetryCallState) -> float:
        return float(min(self.max_backoff_s, 2**self.count))


CPU_MODEL_NAME = "CPU"
# host_fault: this machine could not run the job; the lease was released without counting.
Status = Literal["attested", "failed", "released", "lost", "host_fault"]


@dataclass(frozen=True)
class AgentConfig:
    work_dir: Path
    network: str
    payout_address: str
    heartbeat_s: float = 5.0
    # Wait between claims while the queue has nothing for this worker.
    poll_interval_s: float = 5.0
    max_backoff_s: float = 60.0
    # After SIGTERM: how long the current job may still run before it is killed.
    grace_s: float = 30.0
    log_batch_lines: int = 200
    log_flush_s: float = 1.0
    oracle_attempts: int = 5
    oracle_retry_base_s: float = 0.5
    pids_limit: int | None = 4096
    rate_cards: Mapping[str, RateCard] = field(default_factory=dict)
    keep_workspaces: bool = False
    # How often a whole job's newly committed checkpoints are uploaded while it trains
    # (worker.checkpoint_upload); 0 uploads them only at the end (or when released).
    checkpoint_upload_s: float = 10.0
    # How long a claim resuming a sealed checkpoint waits for the submitter's resume grant
    # (worker.sealed_resume) before releasing the job, and how often it asks.
    resume_grant_wait_s: float = 600.0
    resume_grant_poll_s: float = 5.0
    # Where this machine can be reached by the other nodes of a multi-node job (node 0
    # hosts the rendezvous there), and how long a node waits for its cluster to form.
    advertise_host: str = "127.0.0.1"
    cluster_wait_s: float = 300.0
    # Oracles whose key requests for this worker's sealed proof files it answers (for the
    # verifiers they draw), and how often it looks for them (worker.key_grants).
    trusted_oracle_keys: tuple[str, ...] = ()
    key_request_poll_s: float = 30.0
    # Replay segments of other providers' proofs when an oracle draws this worker
    # (worker.verifier): only under an isolating runtime, for the trusted oracles above.
    verify: bool = True
    verification_poll_s: float = 30.0
    # Contribute verification only (`proofnet worker run --verify-only`): the verifier loop
    # and the duties of earlier jobs (held results, the outbox), never a claim.
    verify_only: bool = False
    # The local demo on the devnet only (`PROOFNET_WORKER_DEMO_PROCESS_VERIFY`, refused
    # elsewhere by `proofnet worker run`): verify under the process runtime.
    demo_process_verify: bool = False
    # How often the worker asks whether results held for the submitter's own destinations
    # are released by the oracles' verdict (worker.held_results).
    release_poll_s: float = 15.0
    # How job data reaches this host (schemes, addresses, size and time limits).
    data: DataFetchPolicy = field(default_factory=DataFetchPolicy)
    # Whether jobs that ask for network egress (`egress: true`) may have it here; without
    # it such a job is handed back, never run without the network it asked for.
    allow_egress: bool = False
    # How often, between jobs, the worker asks the API which GPUs' checks are due and runs
    # the API's challenge round on them (worker.api_challenge): the API offers a GPU only
    # while its last round passed within the API's interval. 0 turns it off.
    gpu_check_s: float = 600.0

    def __post_init__(self) -> None:
        # Absolute once and for all: git runs inside job dirs, runtimes mount them by path.
        object.__setattr__(self, "work_dir", absolute(self.work_dir))

    @property
    def jobs_dir(self) -> Path:
        return self.work_dir / "jobs"

    @property
    def logs_dir(self) -> Path:
        return self.work_dir / "logs"

    @property
    def outbox_dir(self) -> Path:
        return self.work_dir / "outbox"

    @property
    def held_dir(self) -> Path:
        """Results held for the submitter's destinations until released (held_results)."""
        return self.work_dir / "held"

    @property
    def repo_cache_dir(self) -> Path:
        return self.work_dir / "cache" / "repos"

    @property
    def data_cache_dir(self) -> Path:
        return self.work_dir / "cache" / "data"

    @property
    def harness_dir(self) -> Path:
        """Where the worker's copy of the proof-of-training library is kept for jobs."""
        return self.work_dir / "harness"

    @property
    def seal_keys_dir(self) -> Path:
        return self.work_dir / "seal-keys"


@dataclass(frozen=True)
class JobOutcome:
    job_id: str
    attempt: int
    status: Status
    reason: str = ""
    signed: SignedAttestation | None = None
    result_hashes: Mapping[str, str] = field(default_factory=dict)
    pot_root: str | None = None
    usage: JobUsage | None = None
    run: RunResult | None = None
    # The unit of a topology job this outcome is for (None: a single-unit job).
    unit: int | None = None
    # A stage's, aggregation's or node's checkpoint hash (what its attestation names).
    output: str | None = None


@dataclass(frozen=True)
class AgentStats:
    jobs: int
    outcomes: tuple[JobOutcome, ...]
    stopped_by_signal: bool


class _Released(Exception):
    """Give the job back without fault (this worker cannot take it, or is shutting down)."""


class _Failed(Exception):
    """The job failed on this worker; report it via /fail and do not attest."""


class _HostFault(Exception):
    """This machine cannot run the job (not the job's fault): release it uncounted, tell the
    provider, and wait before claiming again."""


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        *,
        api: ApiClient,
        oracle: OracleClient,
        runtime: Runtime,
        sampler: TelemetrySampler,
        key: WorkerKey,
        repos: RepoCache | None = None,
        sleep: Callable[[float], Any] | None = None,
    ) -> None:
        self.config = config
        self.api = api
        self.oracle = oracle
        self.runtime = runtime
        self.sampler = sampler
        self.key = key
        self.repos = repos or RepoCache(config.repo_cache_dir)
        self.outbox = Outbox(config.outbox_dir)
        self.held = HeldResults(config.held_dir)
        self.seal_keys = SealKeys(config.seal_keys_dir)
        self.rate_cards = RateCardBook(config.rate_cards, api, key.public_key_hex)
        self._stop = threading.Event()
        self._stop_deadline: float | None = None
        self._sleep = sleep

    # --- lifecycle ------------------------------------------------------------------------

    def request_stop(self, grace_s: float | None = None) -> None:
        """Stop after the current job; kill it if it outlives the grace period. Safe to call
        from a signal handler; a second call does not extend the deadline."""
        if self._stop_deadline is None:
            grace = self.config.grace_s if grace_s is None else grace_s
            self._stop_deadline = time.monotonic() + grace
        self._stop.set()

    def stop_now(self) -> None:
        """Stop at once: kill the current job and release its lease (a second signal)."""
        self._stop_deadline = time.monotonic()
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _past_grace(self) -> bool:
        return self._stop_deadline is not None and time.monotonic() >= self._stop_deadline

    def _pause(self, seconds: float) -> None:
        """Sleep with ±50% jitter, waking at once on stop."""
        delay = seconds * random.uniform(0.5, 1.5)
        if self._sleep is not None:
            self._sleep(delay)
        else:
            self._stop.wait(delay)

    def run(self, *, max_jobs: int | None = None, once: bool = False) -> AgentStats:
        """Claim and run jobs until stopped, `max_jobs` jobs ran, or (`once`) the first claim
        attempt found no job or its job ended."""
        responder = self._grant_responder()
        verifying = None
        try:
            verifying = self._verifier_loop()
            if self.config.verify_only:
                return self._verify_only()
            return self._run(max_jobs=max_jobs, once=once)
        finally:
            if responder is not None:
                responder.stop()
            if verifying is not None:
                verifying.stop()

    def _verify_only(self) -> AgentStats:
        """Until stopped: the verifier loop replays and answers disputes in the background;
        this thread only keeps earlier jobs' duties (held results, the outbox). No claim."""
        log.info("verify-only: this worker verifies and claims no job")
        self.flush_outbox()
        while not self._stop.is_set():
            self.deliver_released()
            self._stop.wait(self.config.release_poll_s)
        self.flush_outbox(attempts=1)
        return AgentStats(jobs=0, outcomes=(), stopped_by_signal=True)

    def _verifier_loop(self) -> VerifierLoop | None:
        """Replay what oracles draw this worker for, in the background (worker.verifier).
        A verify-only worker that cannot verify is refused (VerifierRefused), not idle."""
        if not self.config.verify or not self.config.trusted_oracle_keys:
            if self.config.verify_only:
                raise VerifierRefused(
                    "a verify-only worker needs verification on and the keys of the oracles "
                    "it trusts (--oracle-key or PROOFNET_WORKER_ORACLE_KEYS)"
                )
            return None
        try:
            verifier = Verifier(
                self.api,
                self.runtime,
                self.key,
                self.config.work_dir,
                self.repos,
                trusted_oracle_keys=self.config.trusted_oracle_keys,
                pids_limit=self.config.pids_limit,
                data_policy=self.config.data,
                payout_address=self.config.payout_address,
                allow_unisolated=self.config.demo_process_verify,
            )
        except VerifierRefused as e:
            if self.config.verify_only:
                raise
            log.info("not verifying other providers' proofs: %s", e)
            return None
        loop = VerifierLoop(verifier, interval_s=self.config.verification_poll_s)
        loop.start()
        return loop

    def _grant_responder(self) -> GrantResponder | None:
        """Answer key requests for this worker's sealed proof files in the background, so a
        verifier is not kept waiting by whatever job runs here."""
        if not self.config.trusted_oracle_keys:
            log.info(
                "no trusted oracle keys: key requests for sealed proof files go unanswered "
                "(set PROOFNET_WORKER_ORACLE_KEYS or --oracle-key)"
            )
            return None
        responder = GrantResponder(
            self.api,
            self.seal_keys,
            self.config.trusted_oracle_keys,
            self.key.public_key_hex,
            interval_s=self.config.key_request_poll_s,
        )
        responder.start()
        return responder

    def _challenge_due_gpus(self) -> None:
        """Between jobs (the GPUs are idle): run the API's challenge round on every GPU whose
        check is due. Never fatal: a GPU that is not offered is simply not leased."""
        from worker.api_challenge import challenge_due

        try:
            for outcome in challenge_due(self.api, datetime.now(UTC)):
                if outcome.status == "passed":
                    log.info("GPU %s passed the API's challenge", outcome.gpu_uuid)
                else:
                    log.warning(
                        "GPU %s failed the API's challenge: %s", outcome.gpu_uuid, outcome.reason
                    )
        except Exception as e:  # the API, the GPU or its driver: retried next period
            log.warning("the API's GPU challenge could not run: %s", e)

    def _run(self, *, max_jobs: int | None, once: bool) -> AgentStats:
        outcomes: list[JobOutcome] = []
        failures = 0
        self.flush_outbox()
        next_gpu_check = next_release_check = 0.0
        while not self._stop.is_set():
            if self.config.gpu_check_s > 0 and time.monotonic() >= next_gpu_check:
                next_gpu_check = time.monotonic() + self.config.gpu_check_s
                self._challenge_due_gpus()
            if time.monotonic() >= next_release_check:
                next_release_check = time.monotonic() + self.config.release_poll_s
                self.deliver_released()
            try:
                outcome = self.run_once()
                failures = 0
            except ApiUnavailable as e:
                failures += 1
                log.warning("API unavailable: %s", e)
                self._pause(min(self.config.max_backoff_s, 2 ** min(failures, 10)))
                continue
            except Exception:  # keep serving: one bad job or bug must not end the worker
                failures += 1
                log.exception("worker loop error")
                self._pause(min(self.config.max_backoff_s, 2 ** min(failures, 10)))
                continue
            if outcome is None:
                if once:
                    break
                self._pause(self.config.poll_interval_s)
                continue
            outcomes.append(outcome)
            if once or (max_jobs is not None and len(outcomes) >= max_jobs):
                break
            if outcome.status == "host_fault":
                # Claiming again at once would only bounce the next job too.
                failures += 1
                self._pause(min(self.config.max_backoff_s, 2 ** min(failures, 10)))
                continue
            if outcome.status == "released":
                self._pause(self.config.poll_interval_s)  # not straight back to the same job
            self.flush_outbox()
        self.flush_outbox(attempts=1)
        return AgentStats(
            jobs=len(outcomes), outcomes=tuple(outcomes), stopped_by_signal=self._stop.is_set()
        )

    def run_once(self) -> JobOutcome | None:
        """Claim one job and see it through; None when no job is queued for this worker."""
        claimed = self.api.claim(
            accepts_cluster=self.runtime.cluster_networking,
            accepts_egress=self.config.allow_egress,
        )
        if claimed is None:
            return None
        return self.process(claimed)

    # --- the outbox -----------------------------------------------------------------------

    def flush_outbox(self, attempts: int | None = None) -> int:
        """Finish what earlier runs (or crashes) left: complete leases, send attestations.
        Returns how many entries are still pending."""
        pending = 0
        for entry in self.outbox.pending():
            current: OutboxEntry | None = self._complete(entry)
            assert current is not None
            if not current.delivered:
                current = send_with_retries(
                    self.oracle,
                    self.outbox,
                    current,
                    attempts=attempts or self.config.oracle_attempts,
                    base_delay_s=self.config.oracle_retry_base_s,
                )
                if current is None:  # refused for good: moved out of the outbox
                    continue
            if current.delivered and current.lease_done:
                self.outbox.remove(current)
            else:
                pending += 1
        return pending

    # --- one job --------------------------------------------------------------------------

    def _assign_gpus(self, spec: JobSpec) -> tuple[tuple[str, ...], str]:
        wanted = spec.resources.gpus
        if wanted == 0:
            return (), CPU_MODEL_NAME
        uuids = self.sampler.gpu_uuids
        if len(uuids) < wanted:
            raise _Released(f"this worker has {len(uuids)} GPU(s); the job needs {wanted}")
        assigned = tuple(uuids[:wanted])
        names = self.sampler.gpu_names()
        return assigned, names.get(assigned[0], "unknown GPU")

    def _precheck(self, claimed: ClaimedJob) -> tuple[tuple[str, ...], str]:
        if claimed.escrow is None:
            raise _Released(
                "the API did not say which escrow pays for this job, so it cannot be attested"
            )
        if claimed.escrow.network != self.config.network:
            raise _Released(
                f"the job's escrow is on {claimed.escrow.network}; this worker is on "
                f"{self.config.network}"
            )
        if (
            claimed.unit is not None
            and claimed.unit.kind == "node"
            and not self.runtime.cluster_networking
        ):
            # Only an API that ignored this worker's claim body gets here.
            raise _Released(
                f"this worker's {self.runtime.name} runtime does not run cluster nodes "
                "(they need the host's network: --allow-cluster-networking)"
            )
        if claimed.spec.egress and not self.config.allow_egress:
            # Only an API that ignored this worker's claim body gets here.
            raise _Released(
                "the job asks for network egress, which this provider does not allow "
                "(PROOFNET_WORKER_ALLOW_EGRESS)"
            )
        assigned, model = self._assign_gpus(claimed.spec)
        try:
            self.rate_cards.check(claimed.spec, model)
        except PricingError as e:
            raise _Released(f"cannot price this job: {e}") from e
        if claimed.sealing is not None:
            try:  # before sealing anything to it: is it the on-chain submitter's key?
                verify_sealing_key(
                    claimed.sealing,
                    tx_id=claimed.escrow.ref.tx_id,
                    index=claimed.escrow.ref.index,
                    job_id=claimed.job_id,
                    oracle=self.oracle,
                )
            except SealingKeyUnverified as e:
                raise _Released(str(e)) from e
            except SealingKeyRefused as e:
                raise _Failed(str(e)) from e
        return assigned, model

    def process(self, claimed: ClaimedJob) -> JobOutcome:
        cfg = self.config
        tag = _tag(claimed)
        unit = None if claimed.unit is None else claimed.unit.index
        job_dir = cfg.jobs_dir / tag
        keeper = LeaseKeeper(
            self.api,
            claimed.lease_token,
            interval_s=max(0.2, min(cfg.heartbeat_s, claimed.lease_ttl_s / 3)),
            ttl_s=claimed.lease_ttl_s,
        )
        shipper = LogShipper(
            self.api, claimed.lease_token, batch_lines=cfg.log_batch_lines, flush_s=cfg.log_flush_s
        )
        keeper.start()
        shipper.start()
        what = "" if claimed.unit is None else f" {claimed.unit.kind} unit {claimed.unit.index} of"
        shipper.note(
            f"worker {self.key.key_id} claimed{what} job {claimed.job_id} "
            f"(attempt {claimed.attempt})"
        )
        try:
            return self._process(claimed, tag, job_dir, keeper, shipper)
        except _Released as e:
            shipper.note(f"releasing the job: {e}")
            self._leave_checkpoint(claimed, job_dir, shipper)
            shipper.flush()
            self._end_lease("release", claimed.lease_token, str(e))
            return JobOutcome(claimed.job_id, claimed.attempt, "released", str(e), unit=unit)
        except _Failed as e:
            shipper.note(f"job failed: {e}")
            shipper.flush()
            self._end_lease("fail", claimed.lease_token, str(e))
            return JobOutcome(claimed.job_id, claimed.attempt, "failed", str(e), unit=unit)
        except _HostFault as e:
            reason = f"the provider's machine could not run the job: {e}"
            shipper.note(f"{reason}; handing the job back (this does not count against it)")
            shipper.flush()
            self._end_lease("release", claimed.lease_token, reason)
            log.error(
                "THIS MACHINE cannot run jobs: %s. The job %s went back to the queue without "
                "counting against it; fix this machine (work dir %s), or the worker keeps "
                "handing jobs back.",
                e,
                claimed.job_id,
                cfg.work_dir,
            )
            return JobOutcome(claimed.job_id, claimed.attempt, "host_fault", str(e), unit=unit)
        except LeaseLost as e:
            return JobOutcome(claimed.job_id, claimed.attempt, "lost", str(e), unit=unit)
        finally:
            keeper.stop()
            shipper.close()
            if not cfg.keep_workspaces:
                shutil.rmtree(job_dir, ignore_errors=True)
                shutil.rmtree(_sealed_dir(job_dir), ignore_errors=True)

    def _end_lease(self, how: Literal["release", "fail"], token: str, reason: str) -> None:
        retrying = Retrying(
            stop=stop_after_attempt(5),
            wait=wait_exponential(multiplier=1, max=self.config.max_backoff_s),
            retry=retry_if_exception_type(ApiUnavailable),
            sleep=self._pause,
            before_sleep=lambda state: log.warning(
                "could not %s the lease yet: %s", how, state.outcome and state.outcome.exception()
            ),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    (self.api.release if how == "release" else self.api.fail)(token, reason)
        except LeaseLost as e:
            log.warning("could not %s the lease: it is already gone (%s)", how, e)
        except ApiRefused as e:
            log.error("the API refused to %s the lease: %s", how, e)
        except ApiUnavailable:
            log.error("gave up trying to %s the lease; it will expire on its own", how)

    def _leave_checkpoint(self, claimed: ClaimedJob, job_dir: Path, shipper: LogShipper) -> None:
        """Before releasing a whole job stopped mid-run, upload its committed prefix and last
        checkpoint so the next provider resumes there (`api.services.resume`), not at step
        0. Best effort: a unit, a sealed job (its uploader already shipped each checkpoint
        sealed while it trained) or a job that declares no proof files leaves nothing."""
        if claimed.unit is not None or claimed.sealing is not None:
            return
        if not declares_proof(claimed.spec.results):
            return
        files = committed_checkpoint(job_dir)
        if not files:
            return
        try:
            self._upload(claimed, files, shipper, quiet=True)
        except (ApiClientError, LeaseLost, _Failed, OSError) as e:
            shipper.note(f"could not leave the committed checkpoint for the next provider: {e}")
            return
        shipper.note(f"left checkpoint {files[1].name} and the committed prefix to resume from")

    def _checkpoint_uploader(
        self,
        claimed: ClaimedJob,
        job_dir: Path,
        shipper: LogShipper,
        start: int,
        sign_claim: SignClaim | None = None,
    ) -> CheckpointUploader | None:
        """Uploads each committed checkpoint while a whole job trains (so a provider that
        vanishes leaves one to resume from), sealed when the job is; None for units, jobs
        that declare no proof files, or when turned off."""
        interval = self.config.checkpoint_upload_s
        if claimed.unit is not None or interval <= 0 or not declares_proof(claimed.spec.results):
            return None
        seal = None
        sealing = claimed.sealing
        if sealing is not None:
            try:
                secret = self.seal_keys.secret_for(claimed.job_id, claimed.nonce)
            except SealKeyError as e:
                raise _HostFault(str(e)) from e

            def seal(files: list[CollectedResult]) -> list[CollectedResult]:
                kept = [f for f in files if not seals(f.name)]
                hidden = seal_results(
                    [f for f in files if seals(f.name)],
                    _sealed_dir(job_dir) / "pot",
                    secret=secret,
                    recipients=[sealing.public_key],
                )
                return [*kept, *hidden]

        return CheckpointUploader(
            job_dir,
            lambda files: self._upload(claimed, files, shipper, quiet=True),
            snapshot_dir=_sealed_dir(job_dir) / "prefix",
            seal=seal,
            interval_s=interval,
            start=start,
            note=shipper.note,
            sign_claim=sign_claim,
        )

    def _claim_signer(
        self, claimed: ClaimedJob, assigned: tuple[str, ...], gpu_model: str, start: int
    ) -> SignClaim:
        """Signs this attempt's claim for its segments up to a checkpoint it uploads
        (`worker.checkpoint_upload`): what it is paid if it is lost and the job resumes
        there. Its GPU time is its wall time so far on its GPUs; its amount its share of
        the price for those segments."""
        spec = claimed.spec
        started_ms = int(time.time() * 1000)

        def sign(at: int, root: str) -> bytes | None:
            ended_ms = max(started_ms, int(time.time() * 1000))
            gpu_ms = (ended_ms - started_ms) * len(assigned)
            try:
                price = self.rate_cards.amount(spec, gpu_ms, gpu_model)
            except PricingError:
                return None
            amount = segment_cap(spec, price, start + 1, at)
            if amount < 1:
                return None
            segments = SegmentClaim(attempt=claimed.attempt, first=start + 1, last=at)
            return self._attest(
                claimed,
                assigned,
                gpu_model,
                started_ms,
                ended_ms,
                gpu_ms,
                [],
                root,
                {},
                amount,
                segments=segments,
            ).cose

        return sign

    def _fetch_resume(
        self, claimed: ClaimedJob, job_dir: Path, keeper: LeaseKeeper, shipper: LogShipper
    ) -> int:
        """Download the lost attempt's prefix and checkpoint files into RESUME_DIR, each
        refused unless its SHA-256 is the one the claim pinned; the checkpoint index."""
        resume = claimed.resume
        assert resume is not None
        if claimed.spec.proof.trainer is None:
            raise _Failed("the claim resumes a job that trains without the harness")
        keeper.message = f"fetching checkpoint {resume.at} of attempt {resume.from_attempt}"
        dest_dir = job_dir / harness.RESUME_DIR
        dest_dir.mkdir(parents=True, exist_ok=True)
        sealed: dict[str, Path] = {}
        for position, item in enumerate(resume.files):
            name = Path(item.name).name
            if not name or name in (".", ".."):
                raise _Failed(f"the claim names a resume file {item.name!r}")
            # A sealed checkpoint's files (all but the prefix, first) arrive as ciphertexts.
            dest = dest_dir / (name + ".sealed" if resume.sealed and position else name)
            try:
                self.api.download_resume_file(claimed.lease_token, position, dest, item.sha256)
            except InputRejected as e:
                raise _Failed(f"resume file {item.name}: {e}") from e
            if resume.sealed and position:
                sealed[item.name] = dest
        if resume.sealed:
            self._open_sealed_resume(claimed, sealed, dest_dir, keeper, shipper)
        shipper.note(
            f"resuming attempt {resume.from_attempt} at checkpoint {resume.at} "
            f"(step {resume.step}, prefix root {resume.prefix_root})"
        )
        return resume.at

    def _open_sealed_resume(
        self,
        claimed: ClaimedJob,
        sealed: dict[str, Path],
        dest_dir: Path,
        keeper: LeaseKeeper,
        shipper: LogShipper,
    ) -> None:
        """Wait for the submitter's resume grant, open the sealed checkpoint with it and check
        it against the prefix's leaf (worker.sealed_resume) before anything trains on it."""
        resume = claimed.resume
        assert resume is not None
        keeper.message = "waiting for the submitter to grant the sealed checkpoint's keys"
        shipper.note(keeper.message)
        deadline = time.monotonic() + self.config.resume_grant_wait_s
        grants = self.api.resume_grant(claimed.lease_token)
        while grants is None:
            if time.monotonic() >= deadline or self.stopping:
                raise _Released("the submitter did not grant the sealed checkpoint's keys")
            self._pause(self.config.resume_grant_poll_s)
            self._check_lease(keeper)
            grants = self.api.resume_grant(claimed.lease_token)
        try:
            opened = open_checkpoint(
                sealed, dest_dir, grants, worker_private_key(self.key.signing_key)
            )
            check_against_leaf(
                dest_dir / Path(resume.files[0].name).name,
                resume.prefix_root,
                resume.at,
                opened,
                dest_dir / Path(resume.files[3].name).name,
            )
        except SealedResumeError as e:
            raise _Failed(f"the sealed checkpoint to resume from: {e}") from e

    def _process(
        self,
        claimed: ClaimedJob,
        tag: str,
        job_dir: Path,
        keeper: LeaseKeeper,
        shipper: LogShipper,
    ) -> JobOutcome:
        cfg, spec, unit = self.config, claimed.spec, claimed.unit
        assigned, gpu_model = self._precheck(claimed)
        shards, inputs = self._prepare_workspace(claimed, job_dir, keeper, shipper)

        keeper.message = "preparing image"
        try:
            self.runtime.prepare(spec.image, progress=self._pull_logger(shipper))
        except HostFault as e:
            raise _HostFault(f"{self.runtime.name} runtime: {e}") from e
        except RuntimeErrorBase as e:
            raise _Failed(f"image {spec.image}: {e}") from e
        self._check_lease(keeper)

        resume_at = None
        if claimed.resume is not None and unit is not None:
            raise _Failed("the claim resumes a unit: only a whole job resumes")
        if claimed.resume is not None:
            resume_at = self._fetch_resume(claimed, job_dir, keeper, shipper)
        commands: Sequence[Sequence[str]] = harness.training_commands(spec, resume_at)
        extra_env: dict[str, str] = {}
        if unit is not None:
            commands, extra_env = self._unit_run(
                claimed, unit, job_dir, inputs, shards, keeper, shipper
            )
        # A node's last command is its torchrun: the one that must reach the other nodes.
        networked = len(commands) if unit is not None and unit.kind == "node" else None

        signer = None
        if unit is None and claimed.attempt >= 1:
            signer = self._claim_signer(claimed, assigned, gpu_model, resume_at or 0)
        uploader = self._checkpoint_uploader(claimed, job_dir, shipper, resume_at or 0, signer)
        if uploader is not None:
            uploader.start()
        try:
            run, usage, started_ms, ended_ms = self._run_commands(
                claimed, tag, job_dir, assigned, keeper, shipper, commands, extra_env, networked
            )
        finally:
            if uploader is not None:
                uploader.stop()
        with contextlib.suppress(ApiClientError):
            self.api.report_usage(claimed.lease_token, _usage_report(usage))
        self._check_lease(keeper)
        stop = keeper.stop_order if unit is None else None
        committed: int | None = None
        if stop is not None:
            # The oracles found the job's code at fault: attest what was committed (the
            # prefix becomes the manifest), paid its share; the results go to the submitter.
            shipper.note(f"the lease was stopped ({stop.reason}): {stop.message[:300]}")
            try:
                committed = promote_prefix(job_dir)
            except ResultsError as e:
                raise _Failed(f"stopped for the job's fault, with nothing to attest: {e}") from e
            shipper.note(f"attesting the {committed} segment(s) committed before the stop")
        elif run.reason is RunReason.KILLED_BY_REQUEST and self.stopping:
            raise _Released(f"the worker is shutting down and stopped the job: {run.message}")
        elif not run.ok:
            raise _Failed(f"{run.reason.value}: {run.message}")

        keeper.message = "returning results"
        results, proof, root, metrics, outputs = self._collect(
            claimed, job_dir, shipper, partial=stop is not None
        )
        self._upload(claimed, results, shipper)
        if proof:
            keeper.message = "returning the proof of training"
            self._upload(claimed, proof, shipper, quiet=True)
            shipper.note(f"uploaded {len(proof)} proof-of-training files (PoT root {root})")
        elif (unit is None or units.collects_declared_results(unit)) and not declares_proof(
            spec.results
        ):
            shipper.note(
                "the spec declares no pot/** result: the proof-of-training files stay here, "
                "and oracles that spot-check will not verify this job"
            )
        shipper.flush()
        if spec.destinations:
            keeper.message = "delivering results"
            self._deliver(claimed, results, shipper)
            if unit is None and any(d.kind != "api" for d in spec.destinations):
                # The submitter's own destinations get the results only once the oracles'
                # verdict releases them: held here until then (worker.held_results).
                self.held.hold(
                    claimed.job_id,
                    spec.destinations,
                    results,
                    sealed=claimed.sealing is not None,
                )
                shipper.note(
                    "the results go to the submitter's own destinations once the oracles' "
                    "verdict releases them"
                )

        # A last synchronous renewal: never attest a job whose lease has already gone.
        if not keeper.beat():
            raise LeaseLost(keeper.lost_reason)
        gpu_ms = round(usage.gpu_seconds * 1000)
        if unit is not None:
            # A unit is paid its planned share of the escrow, never the whole job's price.
            amount = unit.amount
        else:
            try:
                amount = self.rate_cards.amount(spec, gpu_ms, gpu_model)
            except PricingError as e:  # checked before the run; only a changed card gets here
                raise _Failed(f"cannot price the job: {e}") from e
            first = 1 if claimed.resume is None else claimed.resume.at + 1
            if stop is not None:
                # Stopped: paid for the segments committed by the stop (and its grace).
                amount = stopped_share(spec, amount, first, stop.segments, committed)
            elif claimed.resume is not None:
                # Resumed: paid for the segments this attempt proved, not the lost one's.
                amount = segment_cap(spec, amount, first)
        segments = None
        if unit is None and claimed.resume is not None and spec.schedule is not None:
            # Named, so the lost attempt's claim on the same escrow is paid beside it.
            segments = SegmentClaim(
                attempt=claimed.attempt,
                first=claimed.resume.at + 1,
                last=spec.schedule.segments,
            )
        signed = self._attest(
            claimed,
            assigned,
            gpu_model,
            started_ms,
            ended_ms,
            gpu_ms,
            results,
            root,
            metrics,
            amount,
            None if unit is None or outputs is None else _unit_work(unit, outputs),
            segments=segments,
            # Stopped for the job's fault: the attestation claims the stopped share.
            stop=None if unit is not None or stop is None else StopClaim(segments=stop.segments),
        )
        hashes = {r.name: r.sha256 for r in results}
        completion: dict[str, Any] = {
            "attestation": signed.hex(),
            "pot_root": root,
            "result_hashes": hashes,
            "gpu_milliseconds": gpu_ms,
            "amount": amount,
            "metrics": metrics,
        }
        if unit is not None and outputs is not None:
            completion["unit"] = units.completion(unit, outputs)
        entry = self.outbox.put(
            OutboxEntry(
                job_id=claimed.job_id,
                attempt=claimed.attempt,
                lease_token=claimed.lease_token,
                cose_hex=signed.hex(),
                completion=completion,
                created_at=time.time(),
                unit=None if unit is None else unit.index,
            )
        )
        shipper.note(f"attestation signed (PoT root {root}); completing the job")
        shipper.flush()
        # The lease is completed before the attestation goes out: the oracle verifies it
        # against the API's record of the completed job, and would refuse it before.
        entry = self._complete(entry)
        sent = send_with_retries(
            self.oracle,
            self.outbox,
            entry,
            attempts=cfg.oracle_attempts,
            base_delay_s=cfg.oracle_retry_base_s,
        )
        if sent is not None and sent.delivered and sent.lease_done:
            self.outbox.remove(sent)
        return JobOutcome(
            claimed.job_id,
            claimed.attempt,
            "attested",
            "delivered" if sent is not None and sent.delivered else "queued in the outbox",
            signed=signed,
            result_hashes=hashes,
            pot_root=root,
            usage=usage,
            run=run,
            unit=None if unit is None else unit.index,
            output=None if outputs is None else outputs.output,
        )

    def _prepare_workspace(
        self, claimed: ClaimedJob, job_dir: Path, keeper: LeaseKeeper, shipper: LogShipper
    ) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
        """Check out the code, fetch the data (a unit's own) and a unit's input checkpoints.
        Returns (data files, input checkpoints), as host paths."""
        cfg, spec, unit = self.config, claimed.spec, claimed.unit
        keeper.message = "preparing workspace"
        shipper.note(
            f"checking out {redact_credentials(spec.model.repo_url)} at {spec.model.commit}"
        )
        data = list(spec.data) if unit is None else units.unit_data(spec, unit)
        self._check_disk(spec)
        try:
            cfg.jobs_dir.mkdir(parents=True, exist_ok=True)
            if job_dir.exists():
                shutil.rmtree(job_dir)
        except OSError as e:
            raise _HostFault(f"the work dir {cfg.jobs_dir} is unusable: {e}") from e
        try:
            self.repos.checkout(spec.model.repo_url, spec.model.commit, job_dir)
            shards: list[Path] = []
            if data:
                shipper.note(f"fetching {len(data)} data shard(s)")
                shards = fetch_data(
                    data,
                    job_dir / "data",
                    disk_mb=spec.resources.disk_mb,
                    policy=cfg.data,
                    cache_dir=cfg.data_cache_dir,
                )
        except WorkspaceUnavailable as e:
            raise _HostFault(f"workspace: {e}") from e
        except WorkspaceError as e:
            raise _Failed(f"workspace: {e}") from e
        if unit is None or not unit.inputs:
            return tuple(shards), ()
        keeper.message = "fetching input checkpoints"
        try:
            inputs = units.fetch_inputs(
                self.api, claimed.lease_token, unit, job_dir, pause=self._pause
            )
        except InputRejected as e:
            raise _Failed(str(e)) from e
        for item, path in zip(unit.inputs, inputs, strict=True):
            shipper.note(
                f"input checkpoint of unit {item.unit} verified ({path.stat().st_size} bytes, "
                f"sha256 {item.sha256})"
            )
        self._check_lease(keeper)
        return tuple(shards), inputs

    def _check_disk(self, spec: JobSpec) -> None:
        """Before any of the job's bytes land: has this machine the disk the job declares?
        (So that a disk filling up later is the job's doing, not this machine's.)"""
        probe = self.config.work_dir
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        try:
            free_mb = shutil.disk_usage(probe).free // 2**20
        except OSError as e:
            raise _HostFault(f"cannot read the free space of {probe}: {e}") from e
        if free_mb < spec.resources.disk_mb:
            # Not a fault of this machine's (the job may simply be large), nor the job's.
            log.warning(
                "the work dir %s has %d MB free; job %s declares %d MB of disk",
                self.config.work_dir,
                free_mb,
                spec.job_id,
                spec.resources.disk_mb,
            )
            raise _Released(
                f"this worker has {free_mb} MB of disk free; the job declares "
                f"{spec.resources.disk_mb} MB"
            )

    def _unit_run(
        self,
        claimed: ClaimedJob,
        unit: UnitAssignment,
        job_dir: Path,
        inputs: tuple[Path, ...],
        shards: tuple[Path, ...],
        keeper: LeaseKeeper,
        shipper: LogShipper,
    ) -> tuple[tuple[tuple[str, ...], ...], dict[str, str]]:
        """A unit's commands and environment; a node's only once its cluster is ready."""
        spec = claimed.spec
        commands = units.unit_commands(spec, unit)
        endpoint = None
        if unit.kind == "node":
            topo = units.topology_of(spec)
            assert isinstance(topo, MultiNode) and unit.rank is not None
            rdzv = self._join_cluster(unit.rank, keeper, shipper)
            endpoint = rdzv.endpoint
            commands = node_commands(commands, rdzv, topo.nproc_per_node)
        try:
            environ = units.unit_env(
                spec,
                unit,
                job_dir=job_dir,
                seen_as=self._seen_job_dir(job_dir),
                inputs=inputs,
                shards=shards,
                endpoint=endpoint,
            )
        except units.UnitError as e:
            raise _Failed(str(e)) from e
        if unit.kind == "node":
            environ.update(network_environ(self.config.advertise_host))
        return commands, environ

    def _join_cluster(self, rank: int, keeper: LeaseKeeper, shipper: LogShipper) -> Rendezvous:
        keeper.message = "waiting for the cluster"
        shipper.note(f"node {rank}: waiting for every node of the cluster to be leased")

        def on_wait(state: ClusterState | None) -> None:
            if state is not None:
                shipper.note(
                    f"cluster {state.rdzv_id}: {state.state}, endpoint {state.endpoint or '-'}"
                )

        try:
            rdzv = wait_for_cluster(
                keeper,
                rank=rank,
                advertise_host=self.config.advertise_host,
                timeout_s=self.config.cluster_wait_s,
                stopping=self._past_grace,
                sleep=self._stop.wait,
                on_wait=on_wait,
            )
        except ClusterError as e:
            raise _Released(f"node {rank}: {e}") from e
        except ValueError as e:  # node 0 cannot open a port on its advertised host
            raise _Released(f"node {rank}: {e}") from e
        shipper.note(f"node {rank}: the cluster is ready; rendezvous at {rdzv.endpoint}")
        return rdzv

    def _collect(
        self, claimed: ClaimedJob, job_dir: Path, shipper: LogShipper, *, partial: bool = False
    ) -> tuple[
        list[CollectedResult],
        list[CollectedResult],
        str,
        Mapping[str, int | str],
        units.UnitOutputs | None,
    ]:
        """(results to attest, proof files, PoT root, metrics, a unit's outputs)."""
        spec, unit = claimed.spec, claimed.unit
        declared = unit is None or units.collects_declared_results(unit)
        try:
            results: list[CollectedResult] = []
            proof: list[CollectedResult] = []
            if declared:
                collected = collect_results(job_dir, spec.results, partial=partial)
                results, proof = split_proof_files(collected)
                root = pot_root(job_dir)
            else:
                root = _pot_root_if_any(job_dir)
            metrics: Mapping[str, int | str] = final_metrics(results)
            if claimed.sealing is not None and declared:
                # Sealed: upload and attest the ciphertexts; metrics would reveal the
                # plaintext in the attestation, so a sealed job attests none. The proof
                # files hold the weights every k steps: sealed too, all but the manifest
                # (commitments the oracles check). The lease's secret stays here, so the
                # verifiers the oracles draw can be granted the keys they need later.
                try:
                    secret = self.seal_keys.secret_for(claimed.job_id, claimed.nonce)
                except SealKeyError as e:
                    raise _HostFault(str(e)) from e
                to = [claimed.sealing.public_key]
                sealed_dir = _sealed_dir(job_dir)
                results = seal_results(
                    results, sealed_dir / "results", secret=secret, recipients=to
                )
                kept = [p for p in proof if not seals(p.name)]
                hidden = seal_results(
                    [p for p in proof if seals(p.name)],
                    sealed_dir / "pot",
                    secret=secret,
                    recipients=to,
                )
                proof = sorted([*kept, *hidden], key=lambda r: r.name)
                metrics = {}
                shipper.note(
                    f"sealed {len(results)} results and {len(hidden)} proof files to the "
                    "submitter's key"
                )
        except ResultsError as e:
            raise _Failed(str(e)) from e
        if unit is None:
            return results, proof, root, metrics, None
        try:
            outputs = units.collect_outputs(spec, unit, job_dir)
        except units.UnitError as e:
            raise _Failed(str(e)) from e
        if unit.kind == "eval":
            metrics = outputs.metrics
            shipper.note(f"evaluation of unit {unit.evaluates}: {dict(metrics)}")
        else:
            outputs = units.UnitOutputs(checkpoint=outputs.checkpoint, metrics=metrics)
        if outputs.checkpoint is not None:
            # Never sealed: the next unit's provider must read it.
            results = sorted([*results, outputs.checkpoint], key=lambda r: r.name)
        return results, proof, root, metrics, outputs

    def _seen_job_dir(self, job_dir: Path) -> Path:
        """Where the job's commands see their work dir."""
        return Path(MOUNT_POINT) if self.runtime.isolated else job_dir.resolve()

    def _complete(self, entry: OutboxEntry) -> OutboxEntry:
        """Complete the entry's lease unless done; the entry as it stands afterwards."""
        if entry.lease_done:
            return entry
        try:
            self.api.complete(entry.lease_token, entry.completion)
        except (LeaseLost, ApiRefused) as e:
            log.warning("job %s: the lease could not be completed: %s", entry.job_id, e)
        except ApiUnavailable as e:
            log.warning("job %s: completing the lease deferred: %s", entry.job_id, e)
            return entry
        return self.outbox.update(entry, lease_done=True)

    @staticmethod
    def _check_lease(keeper: LeaseKeeper) -> None:
        if keeper.lost.is_set():
            raise LeaseLost(keeper.lost_reason)

    @staticmethod
    def _pull_logger(shipper: LogShipper) -> Callable[[PullProgress], None]:
        last: dict[str | None, float] = {}

        def report(p: PullProgress) -> None:
            # Layer downloads report many times a second; one line per layer per second.
            now = time.monotonic()
            if p.current is not None and now - last.get(p.layer, 0.0) < 1.0:
                return
            last[p.layer] = now
            size = f" {p.current}/{p.total} bytes" if p.current is not None else ""
            layer = f" {p.layer}" if p.layer else ""
            shipper.note(f"image {p.image}:{layer} {p.status}{size}")

        return report

    def _run_commands(
        self,
        claimed: ClaimedJob,
        tag: str,
        job_dir: Path,
        assigned: tuple[str, ...],
        keeper: LeaseKeeper,
        shipper: LogShipper,
        commands: Sequence[Sequence[str]],
        extra_env: Mapping[str, str],
        networked: int | None = None,
    ) -> tuple[RunResult, JobUsage, int, int]:
        """Run `commands` in order; command number `networked` (1-based) as a cluster node."""
        cfg, spec = self.config, claimed.spec
        mount_point = MOUNT_POINT
        job_env = spec.job_env(self._seen_job_dir(job_dir), bytes.fromhex(claimed.nonce))
        try:
            python_lib = harness.provide_library(cfg.harness_dir)
        except OSError as e:
            raise _Failed(f"cannot provide the proof-of-training harness: {e}") from e
        resources = Resources(
            cpus=float(spec.resources.cpus),
            memory_bytes=spec.resources.ram_mb * 2**20,
            pids_limit=cfg.pids_limit,
            # An empty device list would still ask the engine for the GPU driver.
            gpus=assigned or 0,
        )
        log_file = cfg.logs_dir / f"{tag}.log"
        deadline = time.monotonic() + spec.resources.max_duration_s
        started_ms = int(time.time() * 1000)
        self.sampler.start_job(tag, assigned)
        run: RunResult | None = None
        try:
            for i, argv in enumerate(commands, 1):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    run = RunResult(
                        None,
                        RunReason.KILLED_TIMEOUT,
                        f"the job's {spec.resources.max_duration_s}s limit ran out before "
                        f"command {i}",
                        0.0,
                    )
                    break
                if self._past_grace():
                    run = RunResult(None, RunReason.KILLED_BY_REQUEST, "worker shutting down", 0.0)
                    break
                if keeper.stopped.is_set():
                    run = RunResult(None, RunReason.KILLED_BY_REQUEST, "the lease was stopped", 0.0)
                    break
                keeper.message = f"running command {i}/{len(commands)}"
                shipper.note(f"command {i}/{len(commands)}: {harness.describe(argv)[:300]}")
                run_spec = RunSpec(
                    image=spec.image,
                    argv=tuple(argv),
                    work_dir=job_dir,
                    env={**job_env.to_environ(), **extra_env},
                    resources=resources,
                    network_egress=spec.egress,
                    cluster_node=i == networked,
                    wall_clock_limit_s=remaining,
                    mount_point=mount_point,
                    job_id=f"{_tag(claimed, short=True)}-c{i}",
                    python_lib=python_lib,
                )
                try:
                    handle = self.runtime.run(run_spec, on_log=shipper.add, log_file=log_file)
                except HostFault as e:
                    raise _HostFault(f"{self.runtime.name} runtime: {e}") from e
                except RuntimeErrorBase as e:
                    run = RunResult(None, RunReason.RUNTIME_ERROR, f"{type(e).__name__}: {e}", 0.0)
                    break
                try:
                    run = self._supervise(handle, keeper)
                finally:
                    self.runtime.cleanup(handle)
                if run.reason is RunReason.KILLED_TIMEOUT:
                    run = RunResult(
                        run.exit_code,
                        run.reason,
                        f"command {i} exceeded the job's {spec.resources.max_duration_s}s "
                        f"limit: {run.message}",
                        run.duration_s,
                        run.peak_memory_bytes,
                    )
                shipper.note(f"command {i} ended: {run.reason.value} ({run.message})")
                if not run.ok:
                    break
        finally:
            usage = self.sampler.stop_job(tag)
        ended_ms = max(started_ms, int(time.time() * 1000))
        assert run is not None  # commands has at least one entry
        return run, usage, started_ms, ended_ms

    def _supervise(self, handle: RunHandle, keeper: LeaseKeeper) -> RunResult:
        while True:
            result = self.runtime.poll(handle)
            if result is not None:
                return result
            if keeper.lost.is_set():
                log.warning("stopping the job: the lease is lost (%s)", keeper.lost_reason)
                self.runtime.kill(handle)
                return self.runtime.wait(handle)
            if keeper.stopped.is_set():
                log.warning("stopping the job: the lease was stopped for the job's fault")
                self.runtime.kill(handle)
                return self.runtime.wait(handle)
            if self._past_grace():
                log.warning("stopping the job: the shutdown grace period is over")
                self.runtime.kill(handle)
                return self.runtime.wait(handle)
            keeper.lost.wait(0.2)

    def _upload(
        self,
        claimed: ClaimedJob,
        results: list[CollectedResult],
        shipper: LogShipper,
        *,
        quiet: bool = False,
    ) -> None:
        for r in results:
            # Streamed in resumable chunks: a retry carries on from the API's offset, and
            # only retries that move nothing count towards giving up.
            stalls = _Stalls(max_backoff_s=self.config.max_backoff_s)

            def once(result: CollectedResult = r, stalls: _Stalls = stalls) -> None:
                try:
                    self.api.upload_file(
                        claimed.lease_token,
                        result.name,
                        result.path,
                        result.sha256,
                        size=result.size,
                        on_progress=stalls.progressed,
                    )
                except ApiUnavailable as e:
                    stalls.count += 1
                    log.warning("upload of %s broke off (will resume): %s", result.name, e)
                    raise

            retrying = Retrying(
                stop=stalls.stop,
                wait=stalls.wait,
                retry=retry_if_exception_type(ApiUnavailable),
                sleep=self._pause,
                reraise=True,
            )
            try:
                retrying(once)
            except LeaseLost:
                raise
            except ApiRefused as e:
                raise _Failed(f"the API refused result {r.name}: {e}") from e
            except OSError as e:
                raise _Failed(f"cannot read result {r.name}: {e}") from e
            if not quiet:
                shipper.note(f"uploaded {r.name} ({r.size} bytes, sha256 {r.sha256})")

    def _deliver(
        self, claimed: ClaimedJob, results: Sequence[CollectedResult], shipper: LogShipper
    ) -> None:
        """Report the API's store destination (the uploads) to the API, which completes the
        job only when it is acknowledged; the submitter's own destinations wait for the
        verdict (`deliver_released`)."""
        data = self.config.data
        reports = deliver(
            claimed.spec.destinations,
            results,
            job_id=claimed.job_id,
            sealed=claimed.sealing is not None,
            policy=DeliveryPolicy(egress=data.egress, resolver=data.resolver, verify=data.verify),
            phase="store",
        )
        if not reports:
            return
        for r in reports:
            said = "acknowledged" if r.acknowledged else f"NOT acknowledged: {r.reason}"
            shipper.note(f"result destination {r.index} ({r.kind}): {said}")
        shipper.flush()
        try:
            pending = self.api.report_deliveries(claimed.lease_token, reports)
        except ApiClientError as e:
            raise _Failed(f"cannot report the result deliveries: {e}") from e
        if pending:
            raise _Failed("results not delivered: " + "; ".join(pending))

    def deliver_released(self) -> int:
        """Deliver the held results of every job whose results the oracles' verdict released
        to the submitter's own destinations, and report each answer; drop the ones the
        verdict withholds. Never raises (the loop calls it); returns how many it delivered."""
        delivered = 0
        for held in self.held.pending():
            try:
                delivered += self._deliver_held(held)
            except Exception:  # one job's delivery must not stop the worker
                log.exception("held results of job %s not delivered", held.job_id)
        return delivered

    def _deliver_held(self, held: HeldJob) -> int:
        try:
            state = self.api.job_release(held.job_id)
        except ApiRefused as e:
            completing = any(entry.job_id == held.job_id for entry in self.outbox.pending())
            if e.status == 404 and not completing:
                # Not completed by this worker (a failed attempt), and no completion of it
                # waits in the outbox: it never will be.
                log.info("dropping the held results of job %s: %s", held.job_id, e)
                self.held.drop(held.job_id)
            else:
                log.warning("cannot ask whether job %s is released: %s", held.job_id, e)
            return 0
        except ApiClientError as e:
            log.warning("cannot ask whether job %s is released: %s", held.job_id, e)
            return 0
        if state == "waiting":
            return 0
        if state == "withheld":
            log.info(
                "the oracles' verdict withholds the results of job %s: not delivered",
                held.job_id,
            )
            self.held.drop(held.job_id)
            return 0
        data = self.config.data
        reports = deliver(
            held.destinations,
            held.results,
            job_id=held.job_id,
            sealed=held.sealed,
            policy=DeliveryPolicy(egress=data.egress, resolver=data.resolver, verify=data.verify),
            phase="external",
        )
        pending = self.api.report_released_deliveries(held.job_id, reports)
        if pending and held.tries + 1 < MAX_TRIES:
            log.warning("job %s: %s; trying again", held.job_id, "; ".join(pending))
            self.held.tried(held)
            return 0
        self.held.drop(held.job_id)
        return 0 if pending else 1

    def _attest(
        self,
        claimed: ClaimedJob,
        assigned: tuple[str, ...],
        gpu_model: str,
        started_ms: int,
        ended_ms: int,
        gpu_ms: int,
        results: list[CollectedResult],
        root: str,
        metrics: Mapping[str, int | str],
        amount: int,
        unit: UnitWork | None = None,
        *,
        segments: SegmentClaim | None = None,
        stop: StopClaim | None = None,
    ) -> SignedAttestation:
        escrow = claimed.escrow
        assert escrow is not None  # _precheck
        spec = claimed.spec
        if assigned:
            uuid_hash = hashlib.sha256(",".join(sorted(assigned)).encode()).hexdigest()
        else:
            # No GPU: the hash still links this machine's CPU jobs, via the worker key.
            uuid_hash = hashlib.sha256(b"proofnet/cpu/" + self.key.public_key).hexdigest()
        attestation = Attestation(
            domain=AttestationDomain(
                network=escrow.network,  # type: ignore[arg-type]
                escrow_script_hash=escrow.script_hash,
                escrow=escrow.ref,
                job_id=claimed.job_id,
            ),
            worker_key=self.key.public_key_hex,
            payout_address=self.config.payout_address,
            started_ms=started_ms,
            ended_ms=ended_ms,
            gpu_milliseconds=gpu_ms,
            gpu_model=gpu_model[:128],
            gpu_uuid_sha256=uuid_hash,
            image_digest=spec.image_digest,
            command_hash=spec.command_hash,
            result_hashes={r.name: r.sha256 for r in results},
            pot_root=root,
            metrics=dict(metrics),
            nonce=claimed.nonce,
            amount=amount,
            unit=unit,
            segments=segments,
            stop=stop,
        )
        return sign_attestation(attestation, self.key.signing_key)


MOUNT_POINT = "/work"


def _tag(claimed: ClaimedJob, *, short: bool = False) -> str:
    """The name of a claim's work dir and log: job, unit (if any) and attempt."""
    job = claimed.job_id[:32] if short else claimed.job_id
    unit = "" if claimed.unit is None else f"-u{claimed.unit.index}"
    return f"{job}{unit}-a{claimed.attempt}"


def _unit_work(unit: UnitAssignment, outputs: units.UnitOutputs) -> UnitWork:
    return UnitWork(
        index=unit.index, kind=unit.kind, inputs=unit.input_hashes, output=outputs.output
    )


def _pot_root_if_any(job_dir: Path) -> str:
    """The job's PoT root when it left a manifest, else the root of no training."""
    if (job_dir / "pot" / "manifest.json").exists():
        return pot_root(job_dir)
    return units.NO_TRAINING_POT_ROOT


def _sealed_dir(job_dir: Path) -> Path:
    # Beside the job dir, not in it: a job's own files can never be mistaken for sealed ones.
    return job_dir.parent / f"{job_dir.name}.sealed"


def _usage_report(usage: JobUsage) -> dict[str, Any]:
    return {
        "duration_s": usage.duration_s,
        "gpu_seconds": usage.gpu_seconds,
        "gpu_busy_seconds": usage.gpu_busy_seconds,
        "gpu_count": len(usage.gpu_uuids),
        "energy_j": usage.energy_j,
        "energy_source": usage.energy_source,
        "samples": usage.samples,
        "running": usage.running,
    }
