"""The oracle's Prometheus metrics, on a registry of its own (never the global default).

`OracleMetrics(registry)` registers the intake metrics; the settlement engine registers its
batch metrics on the same `metrics.registry`, and `GET /metrics` renders that registry.
Metric names are prefixed `proofnet_oracle_`; intake and settlement names never overlap.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST


class OracleMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.received = Counter(
            "proofnet_oracle_attestations_received",
            "Authenticated attestations accepted for verification (repeats not counted)",
            registry=r,
        )
        self.refused = Counter(
            "proofnet_oracle_attestations_refused",
            "Attestations refused at intake before storing (bad signature, domain, encoding)",
            ["reason"],
            registry=r,
        )
        self.verified = Counter(
            "proofnet_oracle_attestations_verified",
            "Attestations that passed every check",
            registry=r,
        )
        self.rejected = Counter(
            "proofnet_oracle_attestations_rejected",
            "Stored attestations rejected by verification, by reason",
            ["reason"],
            registry=r,
        )
        self.retried = Counter(
            "proofnet_oracle_verification_retries",
            "Verifications postponed because the chain or the API could not be asked",
            registry=r,
        )
        self.pending = Gauge(
            "proofnet_oracle_attestations_pending",
            "Attestations received and not yet verified or rejected",
            registry=r,
        )
        self.latency = Histogram(
            "proofnet_oracle_verification_seconds",
            "Time to run the verification pipeline on one attestation",
            buckets=(
                0.001,
                0.0025,
                0.005,
                0.01,
                0.025,
                0.05,
                0.1,
                0.25,
                0.5,
                1,
                2.5,
                5,
                10,
                30,
                60,
                300,
            ),
            registry=r,
        )
        self.backend_errors = Counter(
            "proofnet_oracle_verification_backend_errors",
            "Chain backend and API feed failures met while verifying",
            ["backend", "operation"],
            registry=r,
        )

    def track_pending(self, count: Callable[[], float]) -> None:
        """Compute the pending gauge at scrape time (e.g. a COUNT over the store)."""
        self.pending.set_function(count)

    def chain_error(self, operation: str) -> None:
        self.backend_errors.labels("chain", operation).inc()

    def feed_error(self, operation: str) -> None:
        self.backend_errors.labels("api", operation).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
