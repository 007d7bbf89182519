"""`proofnet bench handoff` at a small size: the report's shape and sanity (not timings)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.handoff import MiB, hidden_for

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_handoff_bench_reports_a_verified_transfer_against_the_stage_compute() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "proofnet.cli", "bench", "handoff", "--size-mb", "1"]
        + ["--steps", "10", "--examples", "128", "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(report) == {
        "checkpoint_bytes",
        "checkpoint_mib",
        "requested_mib",
        "hidden",
        "stage",
        "handoff",
        "overhead_pct",
        "memory",
        "sealing",
        "cpu_count",
    }
    # The checkpoint is the size asked for (weights + momentum of the sized model).
    assert report["hidden"] == hidden_for(1.0)
    assert abs(report["checkpoint_bytes"] - MiB) < 0.01 * MiB
    stage, handoff = report["stage"], report["handoff"]
    assert stage["steps"] == 10 and stage["examples"] == 128 and stage["compute_s"] > 0
    parts = ("upload_s", "complete_s", "claim_s", "download_verify_s")
    assert all(handoff[p] >= 0 for p in parts)
    assert abs(handoff["total_s"] - sum(handoff[p] for p in parts)) < 0.01
    assert handoff["upload_mib_per_s"] > 0 and handoff["download_mib_per_s"] > 0
    expected = 100 * handoff["total_s"] / stage["compute_s"]
    assert abs(report["overhead_pct"] - expected) <= 0.05 * expected + 0.1
    # Peak memory is reported for both sides, before and after each transfer.
    memory = report["memory"]
    for side in ("api", "worker"):
        before = memory[f"{side}_peak_rss_mib_before"]
        assert before > 0
        assert memory[f"{side}_peak_rss_mib_after_download"] >= before
    assert report["sealing"]["seal_mib_per_s"] > 0 and report["sealing"]["open_mib_per_s"] > 0


@pytest.mark.slow
def test_a_synthetic_handoff_streams_a_file_of_the_asked_size() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "proofnet.cli", "bench", "handoff", "--size-mb", "3"]
        + ["--synthetic", "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["checkpoint_bytes"] == 3 * MiB
    assert report["stage"]["compute_s"] is None and report["overhead_pct"] is None
    assert report["handoff"]["download_mib_per_s"] > 0
