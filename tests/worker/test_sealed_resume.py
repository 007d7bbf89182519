"""A worker resuming a sealed job: it waits for the submitter's resume grant, opens the
sealed checkpoint with it and checks it against the prefix's leaf before training
(`worker.sealed_resume`, `Agent._open_sealed_resume`). The attacks: no grant (it
releases the job after its wait), a grant of other keys (fails: nothing opens), a forged
checkpoint under a valid grant (fails: the leaf check); the honest twin opens and checks."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from nacl.public import PrivateKey
from nacl.signing import SigningKey

from pot.examples.numpy_mlp import MLPTrainer
from pot.harness import run_segment
from pot.manifest import PREFIX_NAME, Manifest
from pot.recorder import ProofOfTraining
from pot.schedule import Schedule
from pot.tensors import write_tensors
from pot.trainer import TrainContext
from proofnet.messages.envelope import (
    content_key,
    new_secret,
    seal_file,
    worker_recipient,
    wrap_key,
)
from proofnet.messages.resume_grant import regrant
from proofnet.messages.sealing import generate_sealing_key
from worker.agent import Agent, _Failed, _Released

SCHEDULE = Schedule(total_steps=200, steps_per_checkpoint=50, dataset_size=512, batch_size=32)
AT = 2
NAMES = ["pot/000002.weights", "pot/000002.optim", "pot/000002.rng.json"]


def _pot(job_dir: Path) -> Path:
    ctx = TrainContext(
        job_dir=job_dir, job_seed=7, data_seed=11, schedule=SCHEDULE, config={"hidden": 8}
    )
    trainer = MLPTrainer(ctx)
    recorder = ProofOfTraining(job_dir / "pot", steps_per_checkpoint=50, data_seed=11)
    sampler = SCHEDULE.sampler(11)
    recorder.start(trainer.state())
    for segment in range(1, AT + 1):
        run_segment(
            trainer,
            sampler,
            SCHEDULE.segment_steps(segment),
            lambda _s, idx, loss: recorder.record_step(idx, loss),
        )
        recorder.commit(trainer.state())
    recorder.leaves  # noqa: B018 - waits until the files are written
    return job_dir / "pot"


class _Api:
    """The API as the resuming worker sees it: the grant appears after `after` asks."""

    def __init__(self, grants: dict[str, Any] | None, after: int = 0) -> None:
        self.grants, self.after, self.asked = grants, after, 0

    def resume_grant(self, token: str) -> dict[str, Any] | None:
        self.asked += 1
        return self.grants if self.asked > self.after else None


def _world(tmp_path: Path, *, forge: bool = False) -> dict[str, Any]:
    pot_dir = _pot(tmp_path / "lost")
    submitter = generate_sealing_key(tmp_path / "sealing.key")
    to = bytes(PrivateKey(submitter).public_key).hex()
    if forge:
        write_tensors(pot_dir / "000002.weights", {"W1": np.zeros((4, 4))})
    resume_dir = tmp_path / "resume"
    resume_dir.mkdir()
    (resume_dir / PREFIX_NAME).write_bytes((pot_dir / PREFIX_NAME).read_bytes())
    secret = new_secret()
    sealed = {}
    for name in NAMES:
        src = pot_dir / Path(name).name
        dest = resume_dir / (Path(name).name + ".sealed")
        seal_file(
            src,
            dest,
            name=name,
            key=content_key(secret, name),
            recipients=[to],
            sha256=hashlib.sha256(src.read_bytes()).hexdigest(),
        )
        sealed[name] = dest
    prefix = Manifest.load(pot_dir, name=PREFIX_NAME)
    root = Manifest(
        steps_per_checkpoint=prefix.steps_per_checkpoint,
        data_seed=prefix.data_seed,
        leaves=prefix.leaves[: AT + 1],
    ).root
    return {"submitter": submitter, "sealed": sealed, "dir": resume_dir, "root": root}


def _agent(api: _Api, key: SigningKey, wait_s: float = 60.0) -> Any:
    return SimpleNamespace(
        api=api,
        key=SimpleNamespace(signing_key=key),
        config=SimpleNamespace(resume_grant_wait_s=wait_s, resume_grant_poll_s=0.0),
        stopping=False,
        _pause=lambda _s: None,
        _check_lease=lambda _k: None,
    )


def _claimed(world: dict[str, Any]) -> Any:
    files = [SimpleNamespace(name="pot/prefix.json")] + [SimpleNamespace(name=n) for n in NAMES]
    resume = SimpleNamespace(files=files, prefix_root=world["root"], at=AT, sealed=True)
    return SimpleNamespace(resume=resume, lease_token="t")


def _grants(world: dict[str, Any], worker: SigningKey) -> dict[str, Any]:
    me = bytes(worker.verify_key).hex()
    out = {}
    for name, path in world["sealed"].items():
        with path.open("rb") as f:
            out[name] = regrant(f, world["submitter"], me).to_json()
    return out


def _open(agent: Any, world: dict[str, Any]) -> None:
    keeper, shipper = SimpleNamespace(message=""), SimpleNamespace(note=lambda _m: None)
    Agent._open_sealed_resume(
        agent, _claimed(world), dict(world["sealed"]), world["dir"], keeper, shipper
    )


def test_the_worker_waits_for_the_grant_then_opens_and_checks_the_checkpoint(
    tmp_path: Path,
) -> None:
    world = _world(tmp_path)
    me = SigningKey.generate()
    api = _Api(_grants(world, me), after=2)
    _open(_agent(api, me), world)
    assert api.asked == 3
    for name in NAMES:
        assert (world["dir"] / Path(name).name).exists()
        assert not world["sealed"][name].exists()  # the ciphertexts are gone


def test_without_a_grant_the_worker_releases_the_job(tmp_path: Path) -> None:
    world = _world(tmp_path)
    with pytest.raises(_Released, match="did not grant"):
        _open(_agent(_Api(None), SigningKey.generate(), wait_s=0.0), world)


def test_a_grant_of_other_keys_opens_nothing(tmp_path: Path) -> None:
    world = _world(tmp_path)
    me = SigningKey.generate()
    to = worker_recipient(bytes(me.verify_key).hex())
    foreign = {name: wrap_key(new_secret(), to).to_json() for name in NAMES}
    with pytest.raises(_Failed, match="does not open"):
        _open(_agent(_Api(foreign), me), world)


def test_a_grant_for_another_worker_opens_nothing_here(tmp_path: Path) -> None:
    world = _world(tmp_path)
    me, other = SigningKey.generate(), SigningKey.generate()
    with pytest.raises(_Failed, match="does not open"):
        _open(_agent(_Api(_grants(world, other)), me), world)


def test_a_forged_checkpoint_under_a_valid_grant_is_refused_by_the_leaf_check(
    tmp_path: Path,
) -> None:
    world = _world(tmp_path, forge=True)
    me = SigningKey.generate()
    with pytest.raises(_Failed, match="forged checkpoint"):
        _open(_agent(_Api(_grants(world, me)), me), world)
