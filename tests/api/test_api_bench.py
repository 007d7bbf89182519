"""`proofnet bench api` end to end, small: a real PostgreSQL database, uvicorn workers, and a
load generator in a second process."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from benchmarks.api import run_api_bench

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_bench_runs_and_reports_every_endpoint(postgres_url: str) -> None:
    report = run_api_bench(
        postgres_url=postgres_url,
        users=300,
        providers=50,
        jobs=1500,
        clients=50,
        workers=2,
        concurrency=8,
        requests=1600,
        duration_s=5.0,
    )
    assert report["errors"] == {}, report["errors"]
    for name in ("job_status", "balance"):
        figures = report["endpoints"][name]
        assert figures["requests"] > 50, report
        assert 0 < figures["p50_ms"] <= figures["p95_ms"] <= figures["p99_ms"], figures
    overall = report["overall"]
    assert overall["requests"] == sum(e["requests"] for e in report["endpoints"].values())
    assert report["target_met"] == (overall["requests_per_s"] >= 1500 and overall["p99_ms"] < 50)
    # The benchmark's own database is gone afterwards. Only its own: a run killed earlier
    # on the same server, or another running now, may hold another scratch database.
    assert report["scratch_database"].startswith("proofnet_bench_")
    admin = create_engine(make_url(postgres_url), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            left = conn.execute(
                text("SELECT count(*) FROM pg_database WHERE datname = :name"),
                {"name": report["scratch_database"]},
            ).scalar_one()
    finally:
        admin.dispose()
    assert left == 0
