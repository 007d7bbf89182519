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
        ctx = TrainContext(job_dir, 5, 9, SCHEDULE, {"hidden": 8})
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


def test_each_checkpoint_it_proves_goes_up_with_its_signed_claim_after_the_prefix(
    tmp_path: Path,
) -> None:
    """The lost provider's pay does not wait for it to come back: each checkpoint `k` that
    ends a segment this run proves gets its claim (`pot/claim-<k>.cose`, signed over the
    root of the prefix to `k`), uploaded after the prefix naming it; checkpoint 0 ends no
    segment and has none."""
    job = tmp_path / "job"
    training, api = Training(job), Api()
    signed: list[tuple[int, str]] = []

    def sign(at: int, root: str) -> bytes:
        signed.append((at, root))
        return f"claim {at} {root}".encode()

    shipper = uploader(job, api, sign_claim=sign)
    shipper.pass_once()
    assert signed == [] and not [n for n in api.order if "claim" in n]
    training.commit()
    training.commit()
    shipper.pass_once()
    prefix = api.prefix()
    roots = {
        at: Manifest(
            steps_per_checkpoint=prefix.steps_per_checkpoint,
            data_seed=prefix.data_seed,
            leaves=prefix.leaves[: at + 1],
        ).root
        for at in (1, 2)
    }
    assert signed == [(1, roots[1]), (2, roots[2])]
    assert api.files["pot/claim-2.cose"] == f"claim 2 {roots[2]}".encode()
    assert api.order.index("pot/claim-1.cose") > api.order.index("pot/" + PREFIX_NAME)


def test_a_resumed_run_claims_only_the_segments_after_its_resume_point(tmp_path: Path) -> None:
    job = tmp_path / "job"
    training, api = Training(job), Api()
    for _ in range(3):
        training.commit()
    signed: list[int] = []

    def sign(at: int, _root: str) -> bytes:
        signed.append(at)
        return b"claim"

    uploader(job, api, start=2, sign_claim=sign).pass_once()
    assert signed == [3]  # segment 3; 1..2 are the lost attempt's


def test_a_sealed_job_signs_its_claims_too_and_they_go_up_in_the_clear(tmp_path: Path) -> None:
    """A sealed job's lost provider is paid like any other: its checkpoints are sealed, its
    claims (hashes only, what the oracles read to pay it) are not."""
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

    signed: list[int] = []

    def sign(at: int, root: str) -> bytes:
        signed.append(at)
        return f"claim {at} {root}".encode()

    shipper = uploader(job, api, seal=seal, sign_claim=sign)
    training.commit()
    training.commit()
    shipper.pass_once()
    assert signed == [1, 2]
    assert api.files["pot/claim-2.cose"].startswith(b"claim 2 ")
    assert api.files["pot/000002.weights"].startswith(b"SEALED")
