"""The snooping job of `proofnet bench cheat --end-to-end` (benchmarks/cheat_e2e_snoop.py),
without its loop: the trainer's probe is live (it reaches what exists and listens, and only
that), it departs exactly when it reaches something, and a missing engine or image stops
the phase before anything starts (the loop itself: tests/benchmarks/test_cheat_e2e.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cheat_e2e_snoop import SnoopUnavailable, repository, run_snoop, snoop_trainer


def _probe(tmp_path: Path, files: list[str], endpoints: list[tuple[str, int]]) -> list[str]:
    (tmp_path / "mlp.py").write_text(snoop_trainer(files, endpoints))
    done = subprocess.run(
        [sys.executable, "mlp.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


def test_the_probe_reaches_what_exists_and_listens_and_nothing_else(tmp_path: Path) -> None:
    key = tmp_path / "worker.skey"
    key.write_text("secret")
    with socket.socket() as listening, socket.socket() as closed:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        closed.bind(("127.0.0.1", 0))  # bound, never listening: refused
        open_port, shut_port = listening.getsockname()[1], closed.getsockname()[1]
        reached = _probe(
            tmp_path,
            [str(key), str(tmp_path / "missing.skey")],
            [("127.0.0.1", open_port), ("127.0.0.1", shut_port)],
        )
    assert reached == [str(key), f"127.0.0.1:{open_port}"]


def test_the_trainer_departs_exactly_when_it_reaches_something(tmp_path: Path) -> None:
    """What makes a matching replay mean "reached nothing": the same steps with and without
    something in reach train to different parameters."""
    import importlib.util

    import numpy as np

    from pot.trainer import TrainContext

    key = tmp_path / "worker.skey"
    key.write_text("secret")

    def trained(name: str, files: list[str]) -> dict[str, np.ndarray]:
        module = tmp_path / f"{name}.py"
        module.write_text(snoop_trainer(files, []))
        spec = importlib.util.spec_from_file_location(name, module)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        from benchmarks.cheat import CONFIG, JOB_SEED, _schedule

        ctx = TrainContext(
            job_dir=tmp_path / name,
            job_seed=JOB_SEED,
            data_seed=JOB_SEED + 1,
            schedule=_schedule(),
            config=dict(CONFIG),
        )
        trainer = mod.MLPTrainer(ctx)
        for step in (1, 2):
            trainer.train_step(step, np.arange(8))
        return {k: np.array(v) for k, v in trainer.params.items()}

    blind = trained("blind", [str(tmp_path / "absent.skey")])
    again = trained("again", [])
    seeing = trained("seeing", [str(key)])
    assert all(np.array_equal(blind[k], again[k]) for k in blind)
    assert not all(np.array_equal(blind[k], seeing[k]) for k in blind)


@pytest.mark.parametrize(
    ("image", "name"),
    [
        ("proofnet/test-numpy:local", "proofnet/test-numpy"),
        ("registry.local:5000/team/job:v2", "registry.local:5000/team/job"),
        ("job@sha256:" + "ab" * 32, "job"),
        ("plain", "plain"),
    ],
)
def test_the_pinned_reference_keeps_the_repository_and_drops_tag_and_digest(
    image: str, name: str
) -> None:
    assert repository(image) == name


def test_a_missing_image_stops_the_phase_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(SnoopUnavailable, match="proofnet/no-such-image:none"):
        run_snoop("proofnet/no-such-image:none", data_dir=tmp_path / "loop")
    assert not (tmp_path / "loop").exists()


def test_a_probe_that_cannot_run_shows_nothing_live(tmp_path: Path) -> None:
    """Containment is claimed only for code shown live on the host: a probe that fails
    reaches nothing, and says why, so the row cannot read as contained."""
    from rich.console import Console

    from benchmarks.cheat_e2e_snoop import SnoopLoop

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mlp.py").write_text("raise SystemExit('the trainer cannot be imported')\n")
    loop = SnoopLoop(tmp_path / "loop", Console(quiet=True), "proofnet/test-numpy:local")
    try:
        assert loop.reached_on_host(repo) == []
        assert "the trainer cannot be imported" in loop.probe_error
    finally:
        loop.http.close()
