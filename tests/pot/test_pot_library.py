"""Proof of training: a numpy job commits a root; honest replays match; fakes are caught."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from proofnet.messages.merkle import verify_inclusion
from worker.pot import (
    BatchSampler,
    Manifest,
    ProofError,
    ProofOfTraining,
    TrainingState,
    derive_data_seed,
    replay_segment,
    run_training,
    select_spot_checks,
    spot_check,
)
from worker.pot.env import JobEnv, JobEnvError
from worker.pot.examples.numpy_mlp import MLPConfig, MLPTrainer, main, make_dataset
from worker.pot.manifest import indices_path, rng_path, weights_path
from worker.pot.seeds import detection_probability
from worker.pot.tensors import (
    TensorFormatError,
    decimal_string,
    read_tensors,
    tensors_hash,
    write_tensors,
)

SEED = 1234
NONCE = bytes(range(16))
K = 50
STEPS = 520  # 10 full segments and a final partial one of 20 steps
CFG = MLPConfig(examples=512, hidden=32, batch_size=32)


def new_trainer() -> MLPTrainer:
    x, y = make_dataset(SEED, CFG)
    return MLPTrainer(x, y, CFG, init_seed=SEED)


def sampler() -> BatchSampler:
    return BatchSampler(derive_data_seed(SEED, NONCE), CFG.examples, CFG.batch_size)


def train_honest(job_dir: Path) -> Manifest:
    pot = ProofOfTraining.for_job(job_dir, job_seed=SEED, nonce=NONCE, steps_per_checkpoint=K)
    return run_training(new_trainer(), pot, sampler().indices, STEPS)


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    job_dir = tmp_path_factory.mktemp("honest")
    return job_dir / "pot", train_honest(job_dir)


def copy_proof(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


# --- the honest run ---------------------------------------------------------------------


def test_numpy_job_yields_a_root(honest: tuple[Path, Manifest]) -> None:
    pot_dir, manifest = honest
    assert manifest.segments == 11
    assert [leaf.step for leaf in manifest.leaves] == [*range(0, 501, 50), 520]
    assert len(manifest.root) == 64
    loaded = Manifest.load(pot_dir, expected_root=manifest.root)
    assert loaded == manifest
    # Every leaf is provably in the root, and every file matches its leaf.
    for i, leaf in enumerate(manifest.leaves):
        assert verify_inclusion(leaf.encode(), manifest.proof(i), bytes.fromhex(manifest.root))
        _, digest = read_tensors(weights_path(pot_dir, i))
        assert digest == leaf.weights
    # Training made progress, and losses are committed as decimal strings.
    losses = [float(leaf.loss) for leaf in manifest.leaves[1:] if leaf.loss]
    assert losses[-1] < losses[0]


def test_same_inputs_same_root(honest: tuple[Path, Manifest], tmp_path: Path) -> None:
    assert train_honest(tmp_path).root == honest[1].root


def test_other_nonce_other_data_order_other_root(
    honest: tuple[Path, Manifest], tmp_path: Path
) -> None:
    pot = ProofOfTraining.for_job(tmp_path, job_seed=SEED, nonce=bytes(16), steps_per_checkpoint=K)
    other = BatchSampler(pot.data_seed, CFG.examples, CFG.batch_size)
    assert run_training(new_trainer(), pot, other.indices, STEPS).root != honest[1].root


@pytest.mark.parametrize("segment", [1, 2, 7, 11])
def test_honest_replay_matches_bitwise(honest: tuple[Path, Manifest], segment: int) -> None:
    pot_dir, manifest = honest
    result = replay_segment(
        pot_dir,
        segment,
        new_trainer(),
        expected_root=manifest.root,
        expected_indices=sampler().indices,
    )
    assert result.bitwise_match
    assert result.distance == 0.0
    assert result.passes(0)
    assert result.norm_consistent()
    assert result.loss == manifest.leaves[segment].loss
    assert (result.start_step, result.end_step) == (
        manifest.leaves[segment - 1].step,
        manifest.leaves[segment].step,
    )


def test_spot_check_of_honest_run_passes(honest: tuple[Path, Manifest]) -> None:
    pot_dir, manifest = honest
    report = spot_check(
        pot_dir,
        new_trainer(),
        expected_root=manifest.root,
        seed=b"oracle-challenge" * 2,
        random_count=3,
    )
    assert len(report.segments) == 5
    assert report.passed and not report.failures()


# --- dishonest workers ---------------------------------------------------------------------


def test_perturbed_checkpoint_is_detected(honest: tuple[Path, Manifest], tmp_path: Path) -> None:
    """The worker commits weights that training did not produce (e.g. from a cheaper run)."""
    pot = ProofOfTraining.for_job(tmp_path, job_seed=SEED, nonce=NONCE, steps_per_checkpoint=K)
    trainer, batches = new_trainer(), sampler()
    pot.start(trainer.state())
    for step in range(1, STEPS + 1):
        idx = batches.indices(step)
        loss = trainer.train_step(step, idx)
        if pot.record_step(idx, loss):
            if step == 150:
                trainer.params["W1"] += np.float64(1e-3)
            pot.commit(trainer.state())
    manifest = pot.finish(trainer.state())
    assert manifest.root != honest[1].root

    faked = replay_segment(pot.pot_dir, 3, new_trainer(), expected_root=manifest.root)
    assert not faked.bitwise_match
    assert faked.distance > 1e-6
    assert not faked.passes(0)
    assert not faked.passes(tolerance_ppm=1)
    # Neighbouring segments were trained honestly from what was committed: they pass.
    for segment in (2, 4):
        assert replay_segment(pot.pot_dir, segment, new_trainer(), manifest=manifest).passes(0)
    report = spot_check(
        pot.pot_dir,
        new_trainer(),
        expected_root=manifest.root,
        seed=b"s" * 16,
        random_count=0,
        segments=[2, 3, 4],
    )
    assert not report.passed
    assert [r.segment for r in report.failures()] == [3]


def test_skipped_steps_are_detected(tmp_path: Path) -> None:
    """A lazy worker records every step's indices but only trains on half of them."""
    pot = ProofOfTraining.for_job(tmp_path, job_seed=SEED, nonce=NONCE, steps_per_checkpoint=K)
    trainer, batches = new_trainer(), sampler()
    pot.start(trainer.state())
    loss = 0.0
    for step in range(1, STEPS + 1):
        idx = batches.indices(step)
        lazy = 51 <= step <= 100 and step % 2 == 0
        if not lazy:
            loss = trainer.train_step(step, idx)
        if pot.record_step(idx, loss):
            pot.commit(trainer.state())
    manifest = pot.finish(trainer.state())
    result = replay_segment(pot.pot_dir, 2, new_trainer(), expected_root=manifest.root)
    assert not result.bitwise_match and not result.passes(0)
    assert result.distance > 1e-4
    assert replay_segment(pot.pot_dir, 1, new_trainer(), manifest=manifest).passes(0)


def test_lying_about_update_norm_is_visible(honest: tuple[Path, Manifest], tmp_path: Path) -> None:
    """A worker shrinking a segment's committed norm (to dodge top-2) is caught when checked."""
    pot_dir, manifest = honest
    leaves = list(manifest.leaves)
    leaves[4] = type(leaves[4])(**{**leaves[4].to_json(), "update_norm": "0.001"})
    forged = Manifest(manifest.steps_per_checkpoint, manifest.data_seed, tuple(leaves))
    result = replay_segment(pot_dir, 4, new_trainer(), manifest=forged)
    assert result.passes(0)  # the weights are honest...
    assert not result.norm_consistent()  # ...but the committed norm is not


def test_tampered_files_are_refused(honest: tuple[Path, Manifest], tmp_path: Path) -> None:
    pot_dir = copy_proof(honest[0], tmp_path / "pot")
    root = honest[1].root
    with pytest.raises(ProofError, match="attested root"):
        replay_segment(pot_dir, 1, new_trainer(), expected_root="00" * 32)

    arrays, _ = read_tensors(weights_path(pot_dir, 2))
    arrays["b1"] = arrays["b1"] + 1.0
    write_tensors(weights_path(pot_dir, 2), arrays)
    with pytest.raises(ProofError, match="weights file does not match"):
        replay_segment(pot_dir, 3, new_trainer(), expected_root=root)

    rng = json.loads(rng_path(pot_dir, 4).read_bytes())
    rng["noise"]["state"]["state"] += 1
    rng_path(pot_dir, 4).write_text(json.dumps(rng))
    with pytest.raises(ProofError, match="optimizer/RNG"):
        replay_segment(pot_dir, 5, new_trainer(), expected_root=root)

    data = bytearray(indices_path(pot_dir, 6).read_bytes())
    data[-1] ^= 1
    indices_path(pot_dir, 6).write_bytes(bytes(data))
    with pytest.raises(ProofError, match="data-index file"):
        replay_segment(pot_dir, 6, new_trainer(), expected_root=root)

    weights_path(pot_dir, 8).unlink()
    with pytest.raises(ProofError, match="checkpoint 8"):
        replay_segment(pot_dir, 8, new_trainer(), expected_root=root)
    with pytest.raises(ProofError, match="does not exist"):
        replay_segment(pot_dir, 12, new_trainer(), expected_root=root)

    manifest_file = pot_dir / "manifest.json"
    doc = json.loads(manifest_file.read_bytes())
    doc["leaves"][1]["loss"] = "0.1"
    manifest_file.write_text(json.dumps(doc, sort_keys=True, separators=(",", ":")))
    with pytest.raises(ProofError, match="root does not match"):
        Manifest.load(pot_dir)


def test_data_order_must_follow_the_derived_seed(honest: tuple[Path, Manifest]) -> None:
    """A worker choosing its own batches is caught by the verifier's sampler."""
    pot_dir, manifest = honest
    wrong = BatchSampler(derive_data_seed(SEED, bytes(16)), CFG.examples, CFG.batch_size)
    with pytest.raises(ProofError, match="data seed"):
        replay_segment(pot_dir, 1, new_trainer(), manifest=manifest, expected_indices=wrong.indices)


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
    steps_per_epoch = CFG.examples // CFG.batch_size
    epoch0 = np.concatenate([a.indices(s) for s in range(1, steps_per_epoch + 1)])
    assert sorted(epoch0.tolist()) == list(range(CFG.examples))
    # Random access (verifier) equals sequential access (worker).
    assert np.array_equal(b.indices(steps_per_epoch + 3), a.indices(steps_per_epoch + 3))
    assert np.array_equal(b.indices(2), a.indices(2))
    assert not np.array_equal(a.indices(1), a.indices(steps_per_epoch + 1))
    with pytest.raises(ValueError):
        a.indices(0)


def test_spot_check_selection() -> None:
    norms = ["0.5", "3.25", "0.1", "2", "0.75", "1", "0.2", "0.3"]
    seed = b"\x01" * 32
    chosen = select_spot_checks(norms, seed=seed, random_count=3)
    assert chosen == select_spot_checks(norms, seed=seed, random_count=3)
    assert len(chosen) == 5 == len(set(chosen))
    assert {2, 4} <= set(chosen)  # the two largest updates, 1-based segment numbers
    assert all(1 <= s <= len(norms) for s in chosen)
    assert select_spot_checks(norms, seed=seed, random_count=0) == (2, 4)
    assert select_spot_checks(norms, seed=seed, random_count=100) == tuple(range(1, 9))
    # Different challenges pick different random segments (over a few tries).
    picks = {select_spot_checks(norms, seed=bytes([i]) * 16, random_count=2) for i in range(10)}
    assert len(picks) > 1
    # A non-finite norm is suspicious and always checked; ties go to the earlier segment.
    assert 3 in select_spot_checks(["1", "1", "NaN", "1"], seed=seed, random_count=0)
    assert select_spot_checks(["1", "1", "1"], seed=seed, random_count=0, top=1) == (1,)
    with pytest.raises(ValueError):
        select_spot_checks(norms, seed=b"short", random_count=1)


def test_random_picks_are_uniform_enough() -> None:
    norms = ["1"] * 12
    counts = np.zeros(12)
    for i in range(600):
        for s in select_spot_checks(norms, seed=i.to_bytes(16, "big"), random_count=1, top=0):
            counts[s - 1] += 1
    assert counts.min() > 20 and counts.max() < 85  # expected 50 each


def test_detection_probability_formula() -> None:
    assert detection_probability(0.5, 3) == pytest.approx(0.875)


# --- recorder contract ------------------------------------------------------------------------


def test_recorder_refuses_misuse(tmp_path: Path) -> None:
    trainer = new_trainer()
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
    trainer = new_trainer()
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


def test_example_runs_as_a_job_command(tmp_path: Path) -> None:
    env = JobEnv(job_dir=tmp_path, job_seed=3, nonce=NONCE, steps_per_checkpoint=20)
    args = ["--examples", "256", "--hidden", "16"]
    proc = subprocess.run(
        [sys.executable, "-m", "worker.pot.examples.numpy_mlp", "train", "--steps", "60", *args],
        env={**env.to_environ(), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    out = json.loads(proc.stdout)
    manifest = Manifest.load(tmp_path / "pot", expected_root=out["pot_root"])
    assert manifest.segments == 3
    metrics = json.loads((tmp_path / "results" / "metrics.json").read_text())
    assert metrics["steps"] == 60 and metrics["final_loss"] == manifest.leaves[-1].loss
    assert (tmp_path / "results" / "model.weights").exists()

    flags = ["--job-dir", str(tmp_path), "--seed", "3", "--nonce", NONCE.hex(), "--k", "20"]
    assert main(["replay", "--segment", "2", "--root", out["pot_root"], *flags, *args]) == 0
    # Wrong seed: the data order no longer follows, and the verifier says so.
    wrong = ["--job-dir", str(tmp_path), "--seed", "4", "--nonce", NONCE.hex(), "--k", "20"]
    assert main(["replay", "--segment", "2", *wrong, *args]) == 3
    # Different hyperparameters: replay runs, but does not reproduce the checkpoint.
    assert (
        main(
            [
                "replay",
                "--segment",
                "2",
                *flags,
                "--examples",
                "256",
                "--hidden",
                "16",
                "--lr",
                "0.07",
            ]
        )
        == 1
    )


def test_unserialisable_state_is_refused_at_commit_time(tmp_path: Path) -> None:
    pot = ProofOfTraining(tmp_path, steps_per_checkpoint=1, data_seed=1)
    with pytest.raises(TensorFormatError, match="complex"):
        pot.start(TrainingState(params={"w": np.zeros(2, dtype=np.complex64)}))
    with pytest.raises(TensorFormatError, match="numpy array"):
        pot.start(TrainingState(params={"w": [1.0, 2.0]}))  # type: ignore[dict-item]
