"""The API's tunables, read once from `proofnet.settings.Settings`.

Fields the shared Settings class does not (yet) carry are read with a default, so the API
keeps working whichever version of Settings it meets.
"""

from __future__ import annotations

from dataclasses import dataclass

from proofnet.settings import Settings


@dataclass(frozen=True)
class ApiConfig:
    database_url: str
    network: str
    approval_endorsements: int = 5
    # The JSON body limit of every route but the streaming uploads (api.middleware).
    max_body_bytes: int = 1_048_576
    # The per-file limit of a result, checkpoint or proof file upload (streamed to disk in
    # chunks, never held in memory, so it can be far larger than max_body_bytes).
    max_upload_bytes: int = 10 * 2**30
    # An upload session nobody wrote to for this long is removed with its staged bytes.
    upload_session_ttl_s: int = 24 * 3600
    rate_limit_per_minute: int = 600
    challenge_ttl_s: int = 300
    token_ttl_s: int = 24 * 3600
    lease_ttl_s: int = 120
    # A lease lives at most its spec's max_duration_s plus this grace (heartbeats past it
    # are refused and the lease ends): GPU time beyond what the submitter allowed is unpaid.
    lease_grace_s: int = 300
    max_attempts: int = 3
    # The API's GPU challenge (api/services/gpu_challenges.py). Required: a GPU is offered
    # only while its last API challenge passed within `gpu_challenge_interval_s`. `proofnet
    # api serve` reads it from the settings (default on); bare ApiConfig(...) leaves it off
    # so queue tests need no challenge round. A failed check keeps a GPU off either way.
    gpu_challenge_required: bool = False
    gpu_challenge_n: int = 8192
    gpu_challenge_rows: int = 4
    gpu_challenge_interval_s: int = 24 * 3600
    gpu_challenge_overhead_s: float = 3.0
    gpu_challenge_retry_s: int = 600
    # A provider counts as online while its last heartbeat is younger than this.
    provider_online_s: int = 60
    # A worker is drawn as verifier while it asked for verification tasks this recently
    # (workers ask every 30 s by default: worker.agent.AgentConfig.verification_poll_s).
    verifier_online_s: int = 120
    # Signed worker requests are accepted within this clock skew.
    worker_request_skew_s: int = 120
    sweep_interval_s: float = 5.0
    auto_migrate: bool = True
    # Ed25519 public keys (hex) of the oracles allowed to read the oracle feed.
    oracle_keys: tuple[str, ...] = ()
    # How many of `oracle_keys` must sign an early job-fault verdict before the API stops a
    # lease (api.services.job_faults): the deployment's oracle quorum, as settlements need.
    oracle_threshold: int = 1
    # How many of those oracles must post a releasing verdict on a lease's attestation
    # before its results reach the submitter (api.services.result_release).
    result_release_quorum: int = 1
    # Hand out only jobs whose escrow the submitter recorded: a worker can attest (and be
    # paid for) nothing else, and a job it must give back would head the queue forever.
    # `proofnet api serve` always sets it; bare ApiConfig(...) leaves it off so queue tests
    # need no chain.
    claim_requires_escrow: bool = False
    # After the last attempt's full duration, how long the oracles have to settle before
    # the submitter may refund (part of every escrow's deadline).
    settlement_window_s: int = 24 * 3600
    # A multi-node cluster whose nodes are not all leased this long after its first node
    # was releases the waiting nodes, and is not offered again for `cluster_backoff_s`
    # (api/services/clusters.py): idle providers must not wait on it forever.
    cluster_wait_s: int = 600
    cluster_backoff_s: int = 60
    # An auction-priced job takes reveals this long after its bidding window closes
    # (api/services/auctions.py); bids still sealed then are out.
    auction_reveal_s: int = 300
    # The chain watcher (api.services.chain_watch). `proofnet api serve` turns it on from
    # the settings; bare ApiConfig(...) leaves it off so tests need no chain.
    chain_watch: bool = False
    chain_watch_interval_s: float = 10.0
    chain_watch_lease_ttl_s: float = 60.0
    chain_watch_confirmations: int = 3
    # Oracles asked to co-sign escrow cancels (api.services.cancel_quorum), base URLs.
    cancel_oracle_urls: tuple[str, ...] = ()
    # How amounts are shown: NTX = base units / 10**ntx_decimals.
    ntx_decimals: int = 6
    ntx_ticker: str = "NTX"
    # Provider bond terms (parameters of the bond script; api.services.bonds).
    bond_unbonding_delay_ms: int = 7 * 24 * 3_600_000
    bond_slash_permille: int = 500

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: object) -> ApiConfig:
        values: dict[str, object] = {
            "database_url": settings.database_url,
            "network": settings.network,
            "approval_endorsements": settings.approval_endorsements,
            "max_body_bytes": settings.api_max_body_bytes,
            "max_upload_bytes": settings.api_max_upload_bytes,
            "upload_session_ttl_s": settings.api_upload_session_ttl_s,
            "rate_limit_per_minute": settings.api_rate_limit_per_minute,
            "challenge_ttl_s": settings.api_challenge_ttl_s,
            "token_ttl_s": settings.api_token_ttl_s,
            "lease_ttl_s": settings.api_lease_ttl_s,
            "lease_grace_s": settings.api_lease_grace_s,
            "gpu_challenge_required": settings.api_gpu_challenge_required,
            "gpu_challenge_n": settings.api_gpu_challenge_n,
            "gpu_challenge_rows": settings.api_gpu_challenge_rows,
            "gpu_challenge_interval_s": settings.api_gpu_challenge_interval_s,
            "gpu_challenge_overhead_s": settings.api_gpu_challenge_overhead_s,
            "gpu_challenge_retry_s": settings.api_gpu_challenge_retry_s,
            "max_attempts": settings.api_job_max_attempts,
            "settlement_window_s": settings.api_settlement_window_s,
            "cluster_wait_s": settings.api_cluster_wait_s,
            "cluster_backoff_s": settings.api_cluster_backoff_s,
            "auction_reveal_s": settings.api_auction_reveal_s,
            "auto_migrate": settings.api_auto_migrate,
            "chain_watch": settings.api_chain_watch,
            "chain_watch_interval_s": settings.api_chain_watch_interval_s,
            "chain_watch_lease_ttl_s": settings.api_chain_watch_lease_ttl_s,
            "chain_watch_confirmations": settings.api_chain_watch_confirmations,
            "claim_requires_escrow": True,
            "cancel_oracle_urls": tuple(
                u.strip().rstrip("/")
                for u in (settings.api_cancel_oracle_urls or settings.oracle_url).split(",")
                if u.strip()
            ),
            "ntx_decimals": settings.ntx_decimals,
            "ntx_ticker": settings.ntx_ticker,
            "bond_unbonding_delay_ms": settings.bond_unbonding_delay_ms,
            "bond_slash_permille": settings.bond_slash_permille,
            "oracle_threshold": settings.settlement_threshold,
            "result_release_quorum": settings.api_result_release_quorum
            or settings.settlement_threshold,
            "oracle_keys": tuple(
                k.strip().lower() for k in settings.api_oracle_keys.split(",") if k.strip()
            ),
        }
        values.update(overrides)
        config = cls(**values)  # type: ignore[arg-type]
        config.validate()
        return config

    def validate(self) -> None:
        positive = {
            "approval_endorsements": self.approval_endorsements,
            "max_body_bytes": self.max_body_bytes,
            "max_upload_bytes": self.max_upload_bytes,
            "upload_session_ttl_s": self.upload_session_ttl_s,
            "rate_limit_per_minute": self.rate_limit_per_minute,
            "challenge_ttl_s": self.challenge_ttl_s,
            "token_ttl_s": self.token_ttl_s,
            "lease_ttl_s": self.lease_ttl_s,
            "gpu_challenge_rows": self.gpu_challenge_rows,
            "gpu_challenge_interval_s": self.gpu_challenge_interval_s,
            "max_attempts": self.max_attempts,
            "settlement_window_s": self.settlement_window_s,
            "cluster_wait_s": self.cluster_wait_s,
            "cluster_backoff_s": self.cluster_backoff_s,
            "auction_reveal_s": self.auction_reveal_s,
            "chain_watch_confirmations": self.chain_watch_confirmations,
            "oracle_threshold": self.oracle_threshold,
            "result_release_quorum": self.result_release_quorum,
        }
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if not 2 <= self.gpu_challenge_n <= 16384 or self.gpu_challenge_rows > 16:
            raise ValueError("gpu_challenge_n must be in [2, 16384] and gpu_challenge_rows <= 16")
        if self.gpu_challenge_rows > self.gpu_challenge_n:
            raise ValueError("gpu_challenge_rows cannot exceed gpu_challenge_n")
        if self.lease_grace_s < 0 or self.gpu_challenge_overhead_s < 0:
            raise ValueError("lease_grace_s and gpu_challenge_overhead_s cannot be negative")
        if self.gpu_challenge_retry_s < 0:
            raise ValueError("gpu_challenge_retry_s cannot be negative")
        if self.chain_watch_interval_s <= 0 or self.chain_watch_lease_ttl_s <= 0:
            raise ValueError("chain_watch_interval_s and chain_watch_lease_ttl_s must be positive")

    @property
    def mainnet(self) -> bool:
        return self.network == "mainnet"
