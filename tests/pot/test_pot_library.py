"""The library's parts: seeds, the batch sampler, the recorder's contract, file formats,
the job environment."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from pot_fixtures import NONCE, SCHEDULE, SEED, new_trainer

from pot import BatchSampler, ProofError, ProofOfTraining, TrainingState, derive_data_seed
from pot.env import JobEnv, JobEnvError
from pot.schedule import Schedule
from pot.seeds import detection_probability
from pot.tensors import (
    TensorFormatError,
    decimal_string,
    read_tensors,
    tensors_hash,
    write_tensors,
)

EXAMPLES, BATCH = SCHEDULE.dataset_size, SCHEDULE.batch_size


def sampler() -> BatchSampler:
    return BatchSampler(derive_data_seed(SEED, NONCE), EXAMPLES, BATCH)


# --- seeds and selection ---------------------------------------------------------------------


def test_seed_derivation_is_deterministic_and_domain_separated() -> None:
    expected = hashlib.sha256(
        b"proofnet/pot/data-seed/v1" + SEED.to_bytes(8, "big") + NONCE
    ).digest()[:8]
    assert derive_data_seed(SEED, NONCE) == int.from_bytes(expected, "big")
    assert derive_data_seed(SEED, NONCE) == derive_data_seed(SEED, NONCE)
    assert derive_data_seed(SEED, NONCE) != derive_data_seed(SEED + 1, NONCE)
    assert derive_data_seed(SEED, NONCE) != derive_data_seed(SEED, NONCE[::-1])
    assert 0 <= derive_data_seed(2**64 - 1, b"\xff" * 64) < 2**64
    for bad_seed, bad_nonce in ((-1, NONCE), (2**64, NONCE), (True, NONCE), (1, b"short")):
        with pytest.raises(ValueError):
            derive_data_seed(bad_seed, bad_nonce)


def test_batch_sampler_is_deterministic_epoch_permutations() -> None:
    a, b = sampler(), sampler()
    steps_per_epoch = EXAMPLES // BATCH
    epoch0 = np.concatenate([a.indices(s) for s in range(1, steps_per_epoch + 1)])
    assert sorted(epoch0.tolist()) == list(range(EXAMPLES))
    # Random access (verifier) equals sequential access (worker).
    assert np.array_equal(b.indices(steps_per_epoch + 3), a.indices(steps_per_epoch + 3))
    assert np.array_equal(b.indices(2), a.indices(2))
    assert not np.array_equal(a.indices(1), a.indices(steps_per_epoch + 1))
    with pytest.raises(ValueError):
        a.indices(0)


def test_detection_probability_formula() -> None:
    assert detection_probability(0.5, 3) == pytest.approx(0.875)


# --- recorder contract ------------------------------------------------------------------------


def test_recorder_refuses_misuse(tmp_path: Path) -> None:
    trainer = new_trainer(tmp_path)
    pot = ProofOfTraining(tmp_path / "a", steps_per_checkpoint=2, data_seed=1)
    with pytest.raises(ProofError, match="start"):
        pot.record_step(np.arange(3), 1.0)
    pot.start(trainer.state())
    with pytest.raises(ProofError, match="already"):
        pot.start(trainer.state())
    with pytest.raises(ProofError, match="no steps"):
        pot.commit(trainer.state())
    pot.record_step(np.arange(3), 1.0)
    assert pot.record_step(np.arange(3), 1.0) is True
    with pytest.raises(ProofError, match="not committed"):
        pot.record_step(np.arange(3), 1.0)
    pot.commit(trainer.state())
    pot.finish(trainer.state())
    with pytest.raises(ProofError, match="finished"):
        pot.record_step(np.arange(3), 1.0)
    with pytest.raises(ProofError, match="refusing to overwrite"):
        ProofOfTraining(tmp_path / "a", steps_per_checkpoint=2, data_seed=1)


def test_diverged_loss_is_still_provable(tmp_path: Path) -> None:
    trainer = new_trainer(tmp_path)
    pot = ProofOfTraining(tmp_path, steps_per_checkpoint=1, data_seed=1)
    pot.start(trainer.state())
    pot.record_step(np.arange(3), float("nan"))
    assert pot.commit(trainer.state()) == 1
    assert pot.finish(trainer.state()).leaves[-1].loss == "NaN"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.1, "0.1"),
        (1e-5, "0.00001"),
        (2.5e20, "250000000000000000000"),
        (-0.0, "0"),
        (3.0, "3"),
        (float("inf"), "Infinity"),
        (-float("inf"), "-Infinity"),
        (np.float32(0.1), "0.10000000149011612"),
    ],
)
def test_decimal_string(value: float, text: str) -> None:
    assert decimal_string(value) == text


# --- tensor files ----------------------------------------------------------------------------


def test_tensor_serialisation_is_canonical(tmp_path: Path) -> None:
    a = {
        "w": np.arange(6, dtype=np.float32).reshape(2, 3),
        "big_endian": np.arange(4, dtype=">f8"),
        "scalar": np.ones((), dtype=np.int32),
        "flag": np.array([True, False]),
        "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    }
    digest = write_tensors(tmp_path / "t", a)
    assert digest == tensors_hash(a) == hashlib.sha256((tmp_path / "t").read_bytes()).hexdigest()
    # Insertion order and memory layout do not matter; values, names, shapes, dtypes do.
    reordered = {k: np.array(a[k], order="C") for k in reversed(list(a))}
    reordered["big_endian"] = a["big_endian"].astype("<f8")
    assert tensors_hash(reordered) == digest
    assert tensors_hash({**a, "w": a["w"].reshape(3, 2)}) != digest
    assert tensors_hash({**a, "w": a["w"].astype(np.float64)}) != digest
    back, file_digest = read_tensors(tmp_path / "t")
    assert file_digest == digest
    assert all(np.array_equal(back[k], a[k]) and back[k].shape == a[k].shape for k in a)
    with pytest.raises(TensorFormatError):
        tensors_hash({"c": np.zeros(2, dtype=np.complex64)})
    (tmp_path / "short").write_bytes((tmp_path / "t").read_bytes()[:-1])
    with pytest.raises(TensorFormatError, match="truncated"):
        read_tensors(tmp_path / "short")


# --- the example as a job command ----------------------------------------------------------------


def test_job_env_round_trip_and_errors(tmp_path: Path) -> None:
    job = JobEnv(job_dir=tmp_path, job_seed=7, nonce=NONCE, steps_per_checkpoint=10)
    assert JobEnv.read(job.to_environ()) == job
    with pytest.raises(JobEnvError, match="PROOFNET_JOB_NONCE"):
        JobEnv.read({**job.to_environ(), "PROOFNET_JOB_NONCE": ""})
    with pytest.raises(JobEnvError, match="PROOFNET_JOB_SEED"):
        JobEnv.read({**job.to_environ(), "PROOFNET_JOB_SEED": "-3"})
    with pytest.raises(JobEnvError, match="PROOFNET_POT_K"):
        JobEnv.read({**job.to_environ(), "PROOFNET_POT_K": "0"})


def test_job_env_carries_the_schedule_trainer_and_config(tmp_path: Path) -> None:
    schedule = Schedule(total_steps=30, steps_per_checkpoint=10, dataset_size=64, batch_size=8)
    job = JobEnv(
        job_dir=tmp_path,
        job_seed=7,
        nonce=NONCE,
        steps_per_checkpoint=10,
        schedule=schedule,
        trainer="pkg.train:Trainer",
        config={"lr": "0.1", "layers": [1, 2]},
    )
    environ = job.to_environ()
    assert JobEnv.read(environ) == job
    assert environ["PROOFNET_POT_CONFIG"] == '{"layers":[1,2],"lr":"0.1"}'
    with pytest.raises(JobEnvError, match="needs all of"):
        JobEnv.read({k: v for k, v in environ.items() if k != "PROOFNET_POT_BATCH_SIZE"})
    with pytest.raises(JobEnvError, match="module:Class"):
        JobEnv.read({**environ, "PROOFNET_POT_TRAINER": "train.py"})
    with pytest.raises(JobEnvError, match="JSON object"):
        JobEnv.read({**environ, "PROOFNET_POT_CONFIG": "[1]"})
    with pytest.raises(JobEnvError, match="floats are not allowed"):
        JobEnv(tmp_path, 7, NONCE, 10, config={"lr": 0.1})
    with pytest.raises(JobEnvError, match="checkpoint interval"):
        JobEnv(tmp_path, 7, NONCE, 5, schedule=schedule)


def test_unserialisable_state_is_refused_at_commit_time(tmp_path: Path) -> None:
    pot = ProofOfTraining(tmp_path, steps_per_checkpoint=1, data_seed=1)
    with pytest.raises(TensorFormatError, match="complex"):
        pot.start(TrainingState(params={"w": np.zeros(2, dtype=np.complex64)}))
    with pytest.raises(TensorFormatError, match="numpy array"):
        pot.start(TrainingState(params={"w": [1.0, 2.0]}))  # type: ignore[dict-item]


def test_distance_is_over_weights_and_integer_states_must_match() -> None:
    """A large integer state (a seed generator's counter) must not dilute the distance of
    the weights, and a different integer state is no match at all."""
    from pot.tensors import relative_distance

    committed = {"w": np.ones(100, dtype=np.float32), "rng": np.array([2**40, 8])}
    nudged = {**committed, "w": committed["w"] + np.float32(1e-3)}
    assert relative_distance(nudged, committed) == pytest.approx(1e-3, rel=1e-3)
    assert relative_distance(committed, committed) == 0.0
    assert relative_distance({**committed, "rng": np.array([2**40, 9])}, committed) == float("inf")
