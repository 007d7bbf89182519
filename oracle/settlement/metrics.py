"""Batch metrics, registered on the oracle's Prometheus registry (a private one when none
is given, so tests and several engines in one process never collide)."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .models import SettlementIntent


class SettlementMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.batch_size = Histogram(
            "proofnet_oracle_batch_size",
            "Attestations per settlement batch",
            buckets=(1, 2, 4, 8, 12, 16, 24, 32, 48, 64),
            registry=r,
        )
        self.settlement_latency = Histogram(
            "proofnet_oracle_settlement_latency_seconds",
            "From batch creation to confirmed payout",
            buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
            registry=r,
        )
        self.pending = Gauge(
            "proofnet_oracle_settlement_pending",
            "Verified attestations waiting for a batch",
            registry=r,
        )
        self.open_intents = Gauge(
            "proofnet_oracle_settlement_open_intents",
            "Batches proposed but not final",
            registry=r,
        )
        self.chain_errors = Counter(
            "proofnet_oracle_chain_backend_errors",
            "Chain backend failures seen by the settlement engine",
            ["operation"],
            registry=r,
        )
        self.batches = Counter(
            "proofnet_oracle_batches",
            "Settlement batches by outcome",
            ["outcome"],
            registry=r,
        )

    def proposed(self, size: int) -> None:
        self.batch_size.observe(size)
        self.batches.labels("proposed").inc()

    def confirmed(self, intent: SettlementIntent) -> None:
        self.batches.labels("confirmed").inc()
        self.settlement_latency.observe(max(0.0, time.time() - intent.created_at))

    def rollback(self) -> None:
        self.batches.labels("rolled_back").inc()

    def superseded(self) -> None:
        self.batches.labels("superseded").inc()

    def chain_error(self, operation: str) -> None:
        self.chain_errors.labels(operation).inc()
