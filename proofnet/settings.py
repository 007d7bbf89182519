"""The one settings class. Built by `build_settings()`; nothing reads the environment at import.

Paths are absolute once built: a relative one (from the environment, `.env` or an override)
is taken relative to the working directory of the process that builds the settings, at that
moment, so no component downstream (git run in another directory, a child process) can read
it differently. Defaults live in the per-user directories (platformdirs): what a role keeps
under `data_dir` (`~/.local/share/proofnet` on Linux; `PROOFNET_DATA_DIR` moves all of it),
what can be fetched again under `cache_dir` (`~/.cache/proofnet`, `PROOFNET_CACHE_DIR`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from platformdirs import user_cache_path, user_data_path
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ChainBackend = Literal["devnet", "blockfrost", "ogmios"]
Network = Literal["devnet", "preprod", "preview", "mainnet"]
# The devnet's parameter profiles (chain.devnet.profiles.PROFILE_NAMES).
DevnetProfile = Literal["mainnet", "preprod", "pv10"]

APP_NAME = "proofnet"


def user_data_dir() -> Path:
    """Where a role keeps what it must not lose, for this user (no I/O)."""
    return user_data_path(APP_NAME, appauthor=False)


def user_cache_dir() -> Path:
    """Where a role keeps what it can fetch again, for this user (no I/O)."""
    return user_cache_path(APP_NAME, appauthor=False)


def absolute(path: os.PathLike[str] | str) -> Path:
    """`path` with `~` expanded, made absolute against the current directory (no I/O:
    symlinks are kept, as the user named them)."""
    return Path(os.path.abspath(os.path.expanduser(path)))


# Defaults under `data_dir` / `cache_dir` for settings not given explicitly.
_UNDER_DATA_DIR = {
    "devnet_data_dir": "devnet",
    "worker_key_file": "worker.skey",
    "worker_work_dir": "worker",
}
_UNDER_CACHE_DIR = {"git_cache_dir": "git"}
_SQLITE_FILE = "proofnet.db"


# sqlite[+driver]:///<file>[?query]: a relative <file> is relative to the current directory.
_SQLITE_URL = re.compile(r"(?P<head>sqlite(?:\+\w+)?:///)(?P<file>[^?]*)(?P<query>\?.*)?", re.S)


def absolute_sqlite_url(url: str) -> str:
    """A SQLite URL whose file is absolute (other URLs as they are)."""
    match = _SQLITE_URL.fullmatch(url)
    if match is None:
        return url
    file = match["file"]
    if not file or file == ":memory:" or file.startswith("file:") or os.path.isabs(file):
        return url
    return f"{match['head']}{absolute(file)}{match['query'] or ''}"


class Settings(BaseSettings):
    """Every tunable of every role. Environment variables use the `PROOFNET_` prefix."""

    model_config = SettingsConfigDict(
        env_prefix="PROOFNET_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    # --- chain backend -------------------------------------------------------------
    chain_backend: ChainBackend = "devnet"
    network: Network = "devnet"
    devnet_url: str = "http://127.0.0.1:3030/api/v0"
    blockfrost_project_id: str = ""
    ogmios_url: str = "ws://127.0.0.1:1337"
    kupo_url: str = "http://127.0.0.1:1442"

    # --- where things are kept (per user; every path below defaults under these) ------
    data_dir: Path = Field(default_factory=user_data_dir)
    cache_dir: Path = Field(default_factory=user_cache_dir)
    # One git mirror cache for every job of this machine's worker (and its verifiers).
    git_cache_dir: Path = Field(default_factory=lambda: user_cache_dir() / "git")

    # --- devnet ----------------------------------------------------------------------
    devnet_data_dir: Path = Field(default_factory=lambda: user_data_dir() / "devnet")
    devnet_host: str = "127.0.0.1"
    devnet_port: int = 3030
    devnet_block_time: float = 1.0
    devnet_enable_faults: bool = False
    devnet_admin_token: str = ""
    # Parameters a new devnet starts with; set on an existing one, it switches to them.
    devnet_profile: DevnetProfile | None = None

    # --- protocol deployment (script hashes, reference scripts, config; see builders) ---
    deployment_file: Path | None = None
    # Provider bond terms (parameters of the bond script: every party must agree on them).
    bond_unbonding_delay_ms: int = Field(default=7 * 24 * 3_600_000, ge=0)
    bond_slash_permille: int = Field(default=500, ge=1, le=1000)

    # --- NTX ---------------------------------------------------------------------------
    # Which unit counts as NTX is configuration: policy id hex + asset name hex.
    ntx_policy_id: str = ""
    ntx_asset_name: str = "4e5458"
    # How people read NTX amounts: base units / 10**decimals (NTX has 6, as ADA does).
    ntx_decimals: int = Field(default=6, ge=0, le=18)
    ntx_ticker: str = Field(default="NTX", min_length=1, max_length=12)

    # --- storage -------------------------------------------------------------------------
    database_url: str = Field(default_factory=lambda: f"sqlite:///{user_data_dir() / _SQLITE_FILE}")

    # --- API -----------------------------------------------------------------------------
    approval_endorsements: int = Field(default=5, ge=1)
    api_max_body_bytes: int = 1_048_576
    # Per file: results, checkpoints and proof files stream to the store in resumable
    # chunks, so this is not bounded by memory (api_max_body_bytes limits JSON bodies).
    api_max_upload_bytes: int = Field(default=10 * 2**30, ge=1)
    api_upload_session_ttl_s: int = Field(default=24 * 3600, ge=60)
    api_rate_limit_per_minute: int = 600
    api_challenge_ttl_s: int = 300
    api_token_ttl_s: int = 86_400
    api_lease_ttl_s: int = 120
    # A rate-card lease lives at most the spec's max_duration_s plus this grace: heartbeats
    # past it are refused and the lease ends (api/services/leases.py).
    api_lease_grace_s: int = Field(default=300, ge=0)
    # The API's own GPU challenge (api/services/gpu_challenges.py): with `required`, a GPU
    # is offered only while a challenge of the API passed within `interval_s`; a failed one
    # (or a failed container runtime check) keeps a GPU off the market either way. The
    # matrix size n, the rows revealed, and the time allowed beyond the claimed model's
    # minimum throughput for generating the matrices, hashing C and the round trips.
    api_gpu_challenge_required: bool = True
    api_gpu_challenge_n: int = Field(default=8192, ge=2, le=16384)
    api_gpu_challenge_rows: int = Field(default=4, ge=1, le=16)
    api_gpu_challenge_interval_s: int = Field(default=24 * 3600, ge=60)
    api_gpu_challenge_overhead_s: float = Field(default=3.0, ge=0)
    # A GPU whose round started and did not pass (failed, or abandoned after the clock
    # started) gets its next round only this long after that start: no retrying the timing
    # until lucky.
    api_gpu_challenge_retry_s: int = Field(default=600, ge=0)
    api_job_max_attempts: int = 3
    api_settlement_window_s: int = 24 * 3600
    # How long an auction-priced job takes bid reveals after its bidding window closes.
    api_auction_reveal_s: int = 300
    # Comma-separated Ed25519 public keys (hex) of oracles allowed to read the oracle feed.
    api_oracle_keys: str = ""
    # How many distinct oracles of `api_oracle_keys` must post a releasing verdict (verified,
    # or the job's fault) before a lease's results are served to the submitter. Unset (0):
    # the settlement quorum (`settlement_threshold`), whose co-signers each post their own
    # verdict as they sign the payment, so one oracle alone cannot release results.
    api_result_release_quorum: int = Field(default=0, ge=0)
    # A multi-node job's nodes wait at most this long for the rest of their cluster; then the
    # waiting leases are handed back and the cluster is not offered again for the backoff.
    api_cluster_wait_s: int = 600
    api_cluster_backoff_s: int = 60
    # `proofnet api serve` migrates once before starting its processes; workers never do.
    api_auto_migrate: bool = True
    api_workers: int = 1
    api_access_log: bool = True
    # The chain watcher (api.services.chain_watch): records this deployment's payouts,
    # refunds and cancels from the chain (needs `deployment_file`); one API process at a
    # time watches (a lease in the database), each pass every interval.
    api_chain_watch: bool = True
    api_chain_watch_interval_s: float = Field(default=10.0, gt=0)
    api_chain_watch_lease_ttl_s: float = Field(default=60.0, gt=0)
    # Settled/refunded notifications wait until the transaction is this many blocks deep.
    api_chain_watch_confirmations: int = Field(default=3, ge=1)
    # Oracles (comma-separated base URLs) the API asks to co-sign a submitter's escrow
    # cancel (oracle.settlement.cancel); empty: `oracle_url` alone.
    api_cancel_oracle_urls: str = ""

    # --- notifications (email over SMTP; empty host = email off) ---------------------------
    smtp_host: str = ""
    smtp_port: int = 25
    smtp_from: str = "proofnet@localhost"
    smtp_starttls: bool = False
    smtp_username: str = ""
    smtp_password: str = ""

    # --- result store (content-addressed; S3-compatible needs the `s3` extra) ---------
    result_store: Literal["local", "s3"] = "local"
    result_store_s3_bucket: str = ""
    result_store_s3_endpoint_url: str = ""
    result_store_s3_region: str = ""
    result_store_s3_access_key: str = ""
    result_store_s3_secret_key: str = ""
    result_store_s3_prefix: str = ""

    # --- services --------------------------------------------------------------------
    api_url: str = "http://127.0.0.1:8000"
    oracle_url: str = "http://127.0.0.1:8100"
    oracle_key_file: Path | None = None

    # --- every served HTTP process (API, oracle, devnet: proofnet.serving) ----------------
    # A client must send a request's head within `http_header_timeout_s` of starting it,
    # and its body with no pause longer than `http_body_timeout_s` (and all of it within
    # `http_request_timeout_s`); an idle kept-alive connection closes after
    # `http_keep_alive_s`. At most `http_max_connections` connections are open at once:
    # more are closed at once (HTTP 503), so slow clients cannot exhaust the server.
    http_header_timeout_s: float = Field(default=10.0, gt=0)
    http_body_timeout_s: float = Field(default=30.0, gt=0)
    http_request_timeout_s: float = Field(default=120.0, gt=0)
    http_keep_alive_s: float = Field(default=5.0, gt=0)
    http_max_connections: int = Field(default=1000, ge=1)

    # --- oracle intake (oracle.app) --------------------------------------------------------
    # Attestations are taken only from workers registered with the API, at most this big,
    # at most so many per minute per worker key and per client address.
    oracle_max_attestation_bytes: int = Field(default=128 * 1024, ge=1024)
    oracle_attestations_per_minute_per_key: int = Field(default=60, ge=1)
    oracle_attestations_per_minute_per_address: int = Field(default=600, ge=1)
    # The public escrow look-up (`GET /api/v1/escrows/...`): per client address, and how
    # many chain answers the oracle keeps (for `oracle_chain_cache_ttl_s` seconds).
    oracle_escrow_lookups_per_minute_per_address: int = Field(default=120, ge=1)
    oracle_chain_cache_size: int = Field(default=10_000, ge=1)
    oracle_chain_cache_ttl_s: float = Field(default=10.0, gt=0)
    # The local demo only (refused on any network but the devnet): the oracle replays
    # spot-checked segments itself, in a subprocess on its host, instead of drawing a
    # verifier worker (`oracle.verification.verifiers`). Never set it where job code is not your own.
    oracle_demo_local_replay: bool = False
    # Longest wait before a postponed verification (a drawn verifier or a disputed provider
    # not answered yet, the chain or API unreachable) is tried again: the delay doubles per
    # attempt up to this. A local devnet loop, whose verifiers answer in seconds, waits less.
    oracle_max_retry_delay_s: float = Field(default=300.0, gt=0)
    # Spot checks by drawn verifiers (oracle.verification.verifiers, .referee): how long a
    # drawn verifier has to answer its task before the next round's verifier is drawn (round
    # r's until r + 1 windows after the first task), and how long a disputed provider has to
    # commit to and reveal its sandbox replay (silence after it concedes: unproven, unpaid).
    # At least a second, at most a week. A local devnet loop, whose workers answer in
    # seconds, sets both short so a caught cheater's dispute ends in seconds.
    oracle_verifier_answer_within_s: float = Field(default=3600.0, ge=1.0, le=7 * 86400.0)
    oracle_dispute_within_s: float = Field(default=3600.0, ge=1.0, le=7 * 86400.0)
    # Spot checks fetch a job's repository and a stage's data on the oracle's host, by the
    # rules a provider's host keeps (proofnet.shard_fetch, proofnet.pinned_git): https from
    # public addresses only. Repository mirrors the operator chose (comma-separated
    # PREFIX=REPLACEMENT, like git's insteadOf); plain http for data; networks (CIDRs,
    # comma-separated) let back in; local directories (os.pathsep-separated) whose files
    # jobs may name as file:// shards.
    oracle_repo_rewrites: str = ""
    oracle_data_allow_http: bool = False
    oracle_data_allow_networks: str = ""
    oracle_local_data_dirs: str = ""
    # S3 credentials `proofnet job store` writes copies to storage providers with (none:
    # unsigned writes, which only a devnet endpoint accepts).
    storage_access_key: str | None = None
    storage_secret_key: str | None = None
    # Retrieval challenges to storage providers (oracle.retrieval): seconds between rounds
    # (0: none), the networks a provider's S3 endpoint may be on besides public addresses
    # (comma-separated CIDRs; "127.0.0.1/32" on a devnet), and the S3 credentials the
    # oracle writes a re-replicated copy with (none: unsigned writes).
    oracle_storage_challenge_interval_s: float = Field(default=0.0, ge=0)
    oracle_storage_allow_networks: str = ""
    oracle_storage_access_key: str | None = None
    oracle_storage_secret_key: str | None = None
    # A copy is declared lost after this many consecutive failed challenges within the
    # window (a timeout or an unreachable endpoint is a strike; a chunk or proof that does
    # not verify against the committed root ends the copy at once).
    oracle_storage_max_strikes: int = Field(default=3, ge=1, le=100)
    oracle_storage_strike_window_s: float = Field(default=3 * 86400.0, gt=0)
    # How long a verified job whose spec keeps storage waits for its first placement, and
    # how long past a copy's term its last challenge round may take, before its escrow is
    # settled with what was proven (oracle.retrieval.ledger).
    oracle_storage_placement_grace_s: float = Field(default=3600.0, ge=0)
    oracle_storage_final_round_grace_s: float = Field(default=3600.0, ge=0)
    # Metering bounded by proof (oracle/verification/metering.py): a rate-card attestation is
    # paid for at most committed steps x the verifier's step time x slack, plus the replay's
    # measured start-up and this allowance, per GPU (defaults: docs/benchmarks.md).
    oracle_metering_slack: float = Field(default=1.15, ge=1.0)
    oracle_metering_allowance_s: int = Field(default=60, ge=0)

    # --- oracle settlement (oracle.settlement.service.SettlementConfig) --------------------
    settlement_enabled: bool = False
    settlement_deployment_file: Path | None = None
    settlement_batch_size: int = Field(default=16, ge=1)
    settlement_max_wait_s: float = Field(default=30.0, ge=0)
    settlement_interval_s: float = Field(default=2.0, gt=0)
    settlement_confirmation_depth: int = Field(default=3, ge=1)
    settlement_max_submit_attempts: int = Field(default=3, ge=1)
    settlement_lease_ttl_s: float = Field(default=30.0, gt=0)
    # Co-signers as JSON: [{"url": "http://...", "key_hash": "<28-byte hex>"}, ...]
    settlement_cosigners: str = "[]"
    # Topology jobs (oracle.settlement.readiness): once a job is over, how long its escrow
    # waits for attestations of completed units still missing or being verified; and how
    # close to its deadline an escrow is settled with what is verified, job over or not.
    settlement_unit_grace_s: float = Field(default=600.0, ge=0)
    settlement_unit_deadline_margin_s: float = Field(default=1800.0, ge=0)
    settlement_threshold: int = Field(default=1, ge=1)
    settlement_holder: str = ""

    # --- worker ------------------------------------------------------------------------
    worker_key_file: Path = Field(default_factory=lambda: user_data_dir() / "worker.skey")
    worker_runtime: Literal["docker", "process"] = "docker"
    worker_work_dir: Path = Field(default_factory=lambda: user_data_dir() / "worker")
    worker_heartbeat_s: float = Field(default=5.0, gt=0)
    # How often a verifying worker asks the API for verification tasks.
    worker_verification_poll_s: float = Field(default=30.0, gt=0)
    # The local demo only (refused on any network but the devnet): verify other providers'
    # proofs and answer disputes of this worker's own under the process runtime, which does
    # not isolate job code (worker.verifier). Never set it where job code is not your own.
    worker_demo_process_verify: bool = False
    # Contribute verification only: replay what trusted oracles draw this worker for and
    # answer disputes, never claim a job (`proofnet worker run --verify-only`).
    worker_verify_only: bool = False
    # Address the other nodes of a multi-node job reach this machine at (node 0 hosts the
    # torchrun rendezvous there).
    worker_advertise_host: str = "127.0.0.1"
    # Comma-separated Ed25519 keys (hex) of the oracles whose requests for the keys of this
    # worker's sealed proof files (for a drawn verifier) it answers; empty: it answers none.
    worker_oracle_keys: str = ""
    # Docker runtime: run cluster nodes with the host's network (and so its egress), which
    # multi-node training needs; without it the worker claims no cluster nodes.
    worker_allow_cluster_networking: bool = False
    # Jobs that ask for network egress (`egress: true`) run here only with this; without it
    # the worker hands them back.
    worker_allow_egress: bool = False
    # Job data and repositories (worker.data_fetch, worker.workspace): fetched over https
    # from public addresses only. Plain http only with DATA_ALLOW_HTTP; networks (CIDRs,
    # comma-separated) let back in, e.g. a dataset mirror on the provider's LAN; local
    # directories (os.pathsep-separated) whose files jobs may name as file:// shards; at
    # most DATA_MAX_MB (or the job's disk_mb, if smaller) and DATA_TIMEOUT_S per job.
    worker_data_allow_http: bool = False
    worker_data_allow_networks: str = ""
    worker_local_data_dirs: str = ""
    worker_data_max_mb: int = Field(default=50 * 1024, ge=1)
    worker_data_timeout_s: float = Field(default=1800.0, gt=0)

    # --- every path absolute, defaults under data_dir / cache_dir ---------------------------

    @field_validator(
        "data_dir",
        "cache_dir",
        "git_cache_dir",
        "devnet_data_dir",
        "deployment_file",
        "oracle_key_file",
        "settlement_deployment_file",
        "worker_key_file",
        "worker_work_dir",
    )
    @classmethod
    def _absolute_path(cls, value: Any) -> Any:
        return None if value is None else absolute(value)

    @field_validator("database_url")
    @classmethod
    def _absolute_sqlite(cls, value: str) -> str:
        return absolute_sqlite_url(value)

    @model_validator(mode="after")
    def _defaults_under_given_dirs(self) -> Settings:
        # PROOFNET_DATA_DIR (or CACHE_DIR) alone moves everything not named on its own.
        given = self.model_fields_set
        for name, rel in _UNDER_DATA_DIR.items():
            if name not in given:
                setattr(self, name, self.data_dir / rel)
        for name, rel in _UNDER_CACHE_DIR.items():
            if name not in given:
                setattr(self, name, self.cache_dir / rel)
        if "database_url" not in given:
            self.database_url = f"sqlite:///{self.data_dir / _SQLITE_FILE}"
        return self


def build_settings(**overrides: object) -> Settings:
    """Read the environment (and `.env`) now; explicit overrides win."""
    return Settings(**overrides)  # type: ignore[arg-type]
