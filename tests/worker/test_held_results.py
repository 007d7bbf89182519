"""Results held for the submitter's own destinations until the verdict (worker.held_results):
they survive the job's workspace and a worker restart, and go only when dropped."""

from __future__ import annotations

import hashlib
from pathlib import Path

from proofnet.messages.destinations import ApiDestination, WebhookDestination
from worker.held_results import HeldResults
from worker.results import CollectedResult


def _result(job_dir: Path, name: str, data: bytes) -> CollectedResult:
    path = job_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return CollectedResult(name, path, hashlib.sha256(data).hexdigest(), len(data), "json", name)


def test_held_results_outlive_the_workspace_and_a_restart(tmp_path: Path) -> None:
    job_dir = tmp_path / "jobs" / "j1-a1"
    metrics = _result(job_dir, "out/metrics.json", b'{"loss": "0.1"}')
    destinations = (
        ApiDestination(kind="api"),
        WebhookDestination(kind="webhook", url="https://hooks.example/r"),
    )
    HeldResults(tmp_path / "held").hold("j1", destinations, [metrics], sealed=True)
    for f in job_dir.rglob("*"):  # the workspace goes after the job
        if f.is_file():
            f.unlink()

    (held,) = HeldResults(tmp_path / "held").pending()  # a new process reads it back
    assert held.job_id == "j1" and held.sealed and held.destinations == destinations
    (kept,) = held.results
    assert (kept.name, kept.sha256, kept.size) == (metrics.name, metrics.sha256, metrics.size)
    assert hashlib.sha256(kept.path.read_bytes()).hexdigest() == metrics.sha256

    again = HeldResults(tmp_path / "held").tried(held)
    assert again.tries == 1 and HeldResults(tmp_path / "held").pending()[0].tries == 1
    HeldResults(tmp_path / "held").drop("j1")
    assert HeldResults(tmp_path / "held").pending() == []


def test_an_unreadable_entry_is_dropped_not_delivered(tmp_path: Path) -> None:
    broken = tmp_path / "held" / "j2"
    broken.mkdir(parents=True)
    (broken / "held.json").write_text("{not json")
    assert HeldResults(tmp_path / "held").pending() == []
    assert not broken.exists()
