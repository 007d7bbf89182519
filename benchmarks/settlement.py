"""Settlement latency: from an attestation entering the verified queue to its payout being
confirmed on a devnet (p50/p95), with the real builders and scripts.

Attestations arrive at a steady rate while the scheduler runs as in production (interval
job, batch size, max wait, confirmation depth). `proofnet bench oracle` reports this next
to the intake's throughput.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LatencyReport:
    attestations: int
    batches: int
    p50_s: float
    p95_s: float
    max_s: float
    mean_batch_size: float
    block_time_s: float
    confirmation_depth: int
    batch_size: int
    max_wait_s: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def run_settlement_bench(
    count: int = 32,
    *,
    arrival_interval_s: float = 0.25,
    batch_size: int = 8,
    max_wait_s: float = 2.0,
    confirmation_depth: int = 2,
    block_time_s: float = 0.5,
    workdir: Path | None = None,
    timeout_s: float = 300.0,
) -> LatencyReport:
    from sqlmodel import Session, select

    from chain.devnet.testing import running_devnet
    from oracle.models import metadata
    from oracle.settlement import scenario as sc
    from oracle.settlement.batcher import ProposerLeaseGuard, SettlementScheduler
    from oracle.settlement.builder_port import CardanoSettlementBuilder
    from oracle.settlement.chain_view import BlockfrostChainView
    from oracle.settlement.engine import BatchPolicy, SettlementEngine
    from oracle.settlement.intents import IntentLog
    from oracle.settlement.models import IntentItem, SettlementIntent
    from oracle.settlement.queue import AttestationQueue
    from oracle.settlement.watcher import WatchConfig
    from oracle.storage.db import make_engine

    if count < 1:
        raise ValueError("count must be at least 1")
    work = workdir or Path(tempfile.mkdtemp(prefix="proofnet-settle-bench-"))
    with (
        running_devnet(work, block_time=block_time_s) as devnet,
    ):
        api = sc.Devnet(devnet.url)
        scenario = sc.setup(api, oracles=1, threshold=1, tag="bench")
        escrows: list[tuple[sc.OutRef, bytes]] = []
        while len(escrows) < count:
            escrows += sc.lock(scenario, min(15, count - len(escrows)), nonce_base=len(escrows))
        signed = [
            sc.attestation(scenario, ref, job, 100, sc.seeded_key(f"bench-w{i}"))
            for i, (ref, job) in enumerate(escrows)
        ]
        db = make_engine(f"sqlite:///{work / 'oracle.db'}")
        metadata.create_all(db)
        builder = CardanoSettlementBuilder(
            api.context(), scenario.deployment, scenario.oracle_keys[0]
        )
        engine = SettlementEngine(
            IntentLog(db, AttestationQueue()),
            BlockfrostChainView(api.url),
            builder,
            policy=BatchPolicy(batch_size, max_wait_s),
            watch=WatchConfig(confirmation_depth),
            proposer="bench",
        )
        scheduler = SettlementScheduler(engine, ProposerLeaseGuard(db, "bench"), 0.25)
        arrived: dict[int, float] = {}
        scheduler.start()
        try:
            for att in signed:
                arrived[sc.store_verified(db, att)] = time.time()
                time.sleep(arrival_interval_s)
            deadline = time.monotonic() + timeout_s
            while True:
                with Session(db) as session:
                    rows = session.exec(
                        select(IntentItem.attestation_id, SettlementIntent.confirmed_at)
                        .join(SettlementIntent, SettlementIntent.id == IntentItem.intent_id)  # type: ignore[arg-type]
                        .where(SettlementIntent.state == "confirmed")
                    ).all()
                    batches = len(
                        session.exec(
                            select(SettlementIntent.id).where(SettlementIntent.state == "confirmed")
                        ).all()
                    )
                done = {a: c for a, c in rows if c is not None}
                if len(done) == len(arrived):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(done)} of {len(arrived)} settled in {timeout_s}s")
                time.sleep(0.2)
        finally:
            scheduler.stop()
            db.dispose()
    latencies = [done[a] - t for a, t in arrived.items()]
    return LatencyReport(
        attestations=len(latencies),
        batches=batches,
        p50_s=round(percentile(latencies, 50), 3),
        p95_s=round(percentile(latencies, 95), 3),
        max_s=round(max(latencies), 3),
        mean_batch_size=round(len(latencies) / max(batches, 1), 2),
        block_time_s=block_time_s,
        confirmation_depth=confirmation_depth,
        batch_size=batch_size,
        max_wait_s=max_wait_s,
    )


def main() -> None:
    import json

    print(json.dumps(run_settlement_bench().as_dict(), indent=2))


if __name__ == "__main__":
    main()
