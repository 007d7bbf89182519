"""Checkpoints uploaded while the job trains (`worker.checkpoint_upload`), with the real pot
recorder: each committed checkpoint's files go up, then the prefix naming exactly those; a
checkpoint whose files are not (yet) the ones its leaf commits is held back, never shipped
under a prefix that names it; a resumed run ships from the checkpoint it resumed at; a
sealed job's files are sealed before they leave."""

from __future__ import annotations

import json
from pathlib import Path

from pot.examples.numpy_mlp import MLPTrainer
from pot.harness import run_segment
from pot.manifest import PREFIX_NAME, Manifest
from pot.recorder import ProofOfTraining
from pot.schedule import Schedule
from pot.trainer import TrainContext
from worker.checkpoint_upload import CheckpointUploader
from worker.results import CollectedResult

SCHEDULE = Schedule(total_steps=40, steps_per_checkpoint=10, dataset_size=128, batch_size=16)


class Training:
    """A real run of the numpy MLP, committed segment by segment."""

    def __init__(self, job_dir: Path) -> None:
        ctx = TrainContext("train", job_dir, 5, 9, SCHEDULE, {"hidden": 8})
        self.trainer = MLPTrainer(ctx)
        self.recorder = ProofOfTraining(job_dir / "pot", steps_per_checkpoint=10, data_seed=9)
        self.recorder.start(self.trainer.state())
        self.recorder.leaves  # noqa: B018 - the initial checkpoint is written in the background
        self.segment = 0

    def commit(self) -> None:
        self.segment += 1
        run_segment(
            self.trainer,
            SCHEDULE.sampler(9),
            SCHEDULE.segment_steps(self.segment),
            lambda _s, idx, loss: self.recorder.record_step(idx, loss),
        )
        self.recorder.commit(self.trainer.state())
        self.recorder.leaves  # noqa: B018 - waits for the writes


class Api:
    """What the API would hold: name -> bytes, in upload order."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.order: list[str] = []

    def upload(self, files: list[CollectedResult]) -> None:
        for f in files:
            self.files[f.name] = f.path.read_bytes()
            self.order.append(f.name)

    def prefix(self) -> Manifest:
        return Manifest.from_bytes(self.files["pot/" + PREFIX_NAME])


def uploader(job_dir: Path, api: Api, **kwargs: object) -> CheckpointUploader:
    return CheckpointUploader(
        job_dir,
        api.upload,
        snapshot_dir=job_dir.parent / "snap",
        **kwargs,  # type: ignore[arg-type]
    )


def test_each_committed_checkpoint_goes_up_before_the_prefix_that_names_it(
    tmp_path: Path,
) -> None:
    job = tmp_path / "job"
    training, api = Training(job), Api()
    shipper = uploader(job, api)
    assert shipper.pass_once() == 1  # the initial state: a spot check of segment 1 needs it
    assert len(api.prefix().leaves) == 1
    training.commit()
    assert shipper.pass_once() == 1  # checkpoint 1
    assert api.order[-1] == "pot/prefix.json" and len(api.prefix().leaves) == 2
    assert {"pot/000000.weights", "pot/000001.weights", "pot/000001.rng.json"} <= set(api.files)
    assert shipper.pass_once() == 0  # nothing new: nothing sent again
    sent = len(api.order)
    training.commit()
    training.commit()
    assert shipper.pass_once() == 2
    assert len(api.prefix().leaves) == 4 and api.prefix().leaves == training.recorder.leaves
    # Only the new checkpoints' files and the prefix went up.
    assert sorted(api.order[sent:]) == sorted(
        [f"pot/00000{i}.{ext}" for i in (2, 3) for ext in ("weights", "optim", "rng.json")]
        + ["pot/prefix.json"]
    )
    for name, data in api.files.items():
        if name.endswith(".weights"):
            assert data == (job / name).read_bytes()


def test_a_checkpoint_not_yet_the_committed_one_is_held_back(tmp_path: Path) -> None:
    """Its weights file does not hash to the leaf (still being written, or altered): the
    prefix shipped stops before it, and it goes up once it is right."""
    job = tmp_path / "job"
    training, api = Training(job), Api()
    shipper = uploader(job, api)
    training.commit()
    training.commit()
    weights = job / "pot" / "000002.weights"
    good = weights.read_bytes()
    weights.write_bytes(good[:-8])
    assert shipper.pass_once() == 2  # 0 and 1 only
    assert len(api.prefix().leaves) == 2 and "pot/000002.weights" not in api.files
    weights.write_bytes(good)
    assert shipper.pass_once() == 1
    assert len(api.prefix().leaves) == 3 and api.files["pot/000002.weights"] == good


def test_a_resumed_run_ships_from_the_checkpoint_it_resumed_at(tmp_path: Path) -> None:
    job = tmp_path / "job"
    training, api = Training(job), Api()
    training.commit()
    training.commit()
    for name in ("000000.weights", "000000.optim", "000000.rng.json"):
        (job / "pot" / name).unlink()  # a resumed run holds checkpoint 1 on, not 0
    for name in ("000001.weights",):
        (job / "pot" / name).unlink()
    shipper = uploader(job, api, start=2)
    assert shipper.pass_once() == 1
    assert len(api.prefix().leaves) == 3 and "pot/000002.optim" in api.files


def test_a_sealed_jobs_checkpoints_are_sealed_before_they_leave(tmp_path: Path) -> None:
    job = tmp_path / "job"
    training, api = Training(job), Api()
    sealed_dir = tmp_path / "sealed"
    sealed_dir.mkdir()

    def seal(files: list[CollectedResult]) -> list[CollectedResult]:
        out = []
        for f in files:
            dest = sealed_dir / Path(f.name).name
            dest.write_bytes(b"SEALED" + json.dumps(f.sha256).encode())
            out.append(CollectedResult(f.name, dest, f.sha256, dest.stat().st_size, "model", "x"))
        return out

    shipper = uploader(job, api, seal=seal)
    training.commit()
    assert shipper.pass_once() == 2
    assert all(data.startswith(b"SEALED") for data in api.files.values())
