"""Job spec: strict validation, canonical encoding, and a job id that commits to every field."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from pydantic import ValidationError

from proofnet.messages.jobspec import (
    JOB_ID_DOMAIN,
    FixedPrice,
    JobSpec,
    JobSpecError,
    RateCardPrice,
    command_hash,
)

DIGEST = "sha256:" + "ab" * 32


def spec_dict(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": {"repo_url": "https://github.com/example/mlp", "commit": "0123456789" * 4},
        "framework": "pytorch",
        "image": "ghcr.io/example/train:1.2@" + DIGEST,
        "commands": [["python", "train.py", "--epochs", "3"]],
        "resources": {
            "gpus": 1,
            "gpu_memory_mb": 16000,
            "cpus": 4,
            "ram_mb": 32000,
            "disk_mb": 50000,
            "max_duration_s": 3600,
        },
        "data": [{"uri": "https://data.example/shard-0.tar", "sha256": "cd" * 32}],
        "results": [{"path": "out/*.json", "kind": "json"}, {"path": "model.pt", "kind": "model"}],
        "pricing": {"kind": "fixed", "amount": 25_000_000},
        "seed": 42,
    }
    base.update(overrides)
    return base


def test_defaults_and_derived_values() -> None:
    spec = JobSpec.from_dict(spec_dict())
    assert spec.version == 1
    assert spec.egress is False
    assert (spec.proof.steps_per_checkpoint, spec.proof.spot_checks) == (100, 3)
    assert spec.image_digest == DIGEST
    assert spec.max_amount == 25_000_000
    assert isinstance(spec.pricing, FixedPrice)
    assert spec.commands == (("python", "train.py", "--epochs", "3"),)
    assert spec.command_hash == command_hash([["python", "train.py", "--epochs", "3"]])


def test_canonical_encoding_and_job_id() -> None:
    spec = JobSpec.from_dict(spec_dict())
    raw = spec.canonical_bytes()
    assert b" " not in raw.replace(b"--epochs", b"")
    decoded = json.loads(raw)
    assert list(decoded) == sorted(decoded)
    assert json.dumps(decoded, sort_keys=True, separators=(",", ":")).encode() == raw
    assert spec.job_id == hashlib.sha256(JOB_ID_DOMAIN + raw).hexdigest()
    assert JobSpec.from_canonical(raw) == spec
    # The same spec written in any key order / whitespace has the same id.
    pretty = json.dumps(spec_dict(), indent=2)
    assert JobSpec.from_json(pretty).job_id == spec.job_id


@pytest.mark.parametrize(
    "change",
    [
        {"seed": 43},
        {"egress": True},
        {"framework": "numpy"},
        {"image": "ghcr.io/example/train@" + "sha256:" + "ac" * 32},
        {"commands": [["python", "train.py", "--epochs", "4"]]},
        {"pricing": {"kind": "fixed", "amount": 25_000_001}},
        {"proof": {"steps_per_checkpoint": 50}},
        {"data": []},
    ],
)
def test_job_id_commits_to_every_field(change: dict[str, Any]) -> None:
    assert JobSpec.from_dict(spec_dict(**change)).job_id != JobSpec.from_dict(spec_dict()).job_id


def test_rate_card_pricing() -> None:
    spec = JobSpec.from_dict(
        spec_dict(pricing={"kind": "rate_card", "rate_card": DIGEST, "max_amount": 9})
    )
    assert isinstance(spec.pricing, RateCardPrice)
    assert spec.max_amount == 9


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"image": "ghcr.io/example/train:latest"}, "pinned by digest"),
        ({"image": "train@sha256:" + "AB" * 32}, "pinned by digest"),
        ({"model": {"repo_url": "https://x/y", "commit": "abc"}}, "40 lowercase hex"),
        ({"model": {"repo_url": "ftp://x/y", "commit": "0" * 40}}, "repo_url"),
        ({"framework": "jax"}, "framework"),
        ({"commands": []}, "nothing would run"),
        ({"commands": [[]]}, "non-empty argv"),
        ({"commands": "python train.py"}, "commands"),
        ({"seed": -1}, "seed"),
        ({"seed": 2**64}, "seed"),
        ({"seed": 1.0}, "valid integer"),
        ({"seed": "42"}, "valid integer"),
        ({"egress": 1}, "valid boolean"),
        ({"version": 2}, "unknown version 2"),
        ({"version": True}, "valid integer"),
        ({"pricing": {"kind": "fixed", "amount": 0}}, "greater than or equal to 1"),
        ({"pricing": {"kind": "fixed", "amount": 1.5}}, "valid integer"),
        ({"pricing": {"kind": "barter", "amount": 1}}, "pricing"),
        ({"data": [{"uri": "shard.tar", "sha256": "cd" * 32}]}, "scheme"),
        ({"data": [{"uri": "s3://b/k", "sha256": "cd" * 31}]}, "64 lowercase hex"),
        ({"results": [{"path": "../secret", "kind": "json"}]}, "relative glob"),
        ({"results": [{"path": "/etc/passwd", "kind": "json"}]}, "relative glob"),
        ({"results": [{"path": "a.bin", "kind": "binary"}]}, "kind"),
        ({"colour": "blue"}, "Extra inputs are not permitted"),
    ],
)
def test_invalid_specs_get_clear_errors(change: dict[str, Any], fragment: str) -> None:
    with pytest.raises(JobSpecError) as info:
        JobSpec.from_dict(spec_dict(**change))
    assert fragment in str(info.value)


def test_resources_validation() -> None:
    res = dict(spec_dict()["resources"], gpus=0)
    with pytest.raises(JobSpecError, match="gpu_memory_mb must be 0"):
        JobSpec.from_dict(spec_dict(resources=res))
    res = dict(spec_dict()["resources"], cpus=0)
    with pytest.raises(JobSpecError, match="cpus"):
        JobSpec.from_dict(spec_dict(resources=res))


def test_from_json_refuses_floats_and_from_canonical_refuses_non_canonical() -> None:
    text = json.dumps(spec_dict()).replace('"seed": 42', '"seed": 42.0')
    with pytest.raises(JobSpecError, match="valid integer"):
        JobSpec.from_json(text)
    spec = JobSpec.from_dict(spec_dict())
    with pytest.raises(JobSpecError, match="canonical"):
        JobSpec.from_canonical(json.dumps(spec.model_dump(), indent=1).encode())


def test_frozen() -> None:
    spec = JobSpec.from_dict(spec_dict())
    with pytest.raises(ValidationError):
        spec.seed = 7  # type: ignore[misc]
    assert hash(spec) == hash(JobSpec.from_dict(spec_dict()))


# --- the trainer and the schedule the proof must commit --------------------------------------

TRAINED = {
    "trainer": "train:Trainer",
    "config": {"lr": "0.05", "layers": [64, 32], "augment": {"flip": True}},
    "schedule": {"epochs": 3, "dataset_size": 60_000, "batch_size": 64},
    "steps_per_checkpoint": 500,
}


def test_a_trainer_spec_derives_its_schedule_and_job_environment(tmp_path: Any) -> None:
    spec = JobSpec.from_dict(spec_dict(commands=[], proof=TRAINED))
    schedule = spec.schedule
    assert schedule is not None
    assert (schedule.total_steps, schedule.segments) == (3 * 937, 6)
    env = spec.job_env(tmp_path, b"\x01" * 16)
    assert env.trainer == "train:Trainer" and env.schedule == schedule
    assert env.config == {"lr": "0.05", "layers": (64, 32), "augment": {"flip": True}}
    environ = env.to_environ()
    assert environ["PROOFNET_POT_STEPS"] == "2811"
    assert (
        environ["PROOFNET_POT_CONFIG"] == '{"augment":{"flip":true},"layers":[64,32],"lr":"0.05"}'
    )
    # The configuration is part of the spec: immutable, hashed, in the job id.
    with pytest.raises(TypeError):
        spec.proof.config["lr"] = "1"  # type: ignore[index]
    other = {**TRAINED, "config": {**TRAINED["config"], "lr": "0.06"}}
    assert JobSpec.from_dict(spec_dict(commands=[], proof=other)).job_id != spec.job_id
    assert JobSpec.from_canonical(spec.canonical_bytes()) == spec
    assert hash(spec) == hash(JobSpec.from_dict(spec_dict(commands=[], proof=TRAINED)))


def test_specs_without_a_harness_keep_their_encoding_and_job_id() -> None:
    """Job ids are commitments: adding the harness fields changed no existing id."""
    raw = JobSpec.from_dict(spec_dict()).canonical_bytes()
    proof = json.loads(raw)["proof"]
    assert proof == {"spot_checks": 3, "steps_per_checkpoint": 100, "tolerance_ppm": 0}
    by_steps = {**TRAINED, "schedule": {"steps": 10, "dataset_size": 64, "batch_size": 8}}
    encoded = json.loads(JobSpec.from_dict(spec_dict(proof=by_steps)).canonical_bytes())
    assert encoded["proof"]["schedule"] == {"batch_size": 8, "dataset_size": 64, "steps": 10}


@pytest.mark.parametrize(
    ("proof", "fragment"),
    [
        ({"trainer": "train:Trainer"}, "a trainer needs a schedule"),
        ({"config": {"lr": "1"}}, "it needs a trainer"),
        ({**TRAINED, "trainer": "train.py"}, "module:Class"),
        ({**TRAINED, "config": {"lr": 0.05}}, "floats are not allowed"),
        ({**TRAINED, "config": {"blob": "x" * 20_000}}, "exceeds 16384 bytes"),
        ({**TRAINED, "schedule": {"dataset_size": 10, "batch_size": 2}}, "exactly one"),
        (
            {**TRAINED, "schedule": {"steps": 5, "epochs": 1, "dataset_size": 9, "batch_size": 2}},
            "exactly one",
        ),
        ({**TRAINED, "schedule": {"epochs": 1, "dataset_size": 9, "batch_size": 10}}, "exceeds"),
        (
            {**TRAINED, "steps_per_checkpoint": 1}
            | {"schedule": {"steps": 20_000, "dataset_size": 64, "batch_size": 8}},
            "raise steps_per_checkpoint",
        ),
        ({**TRAINED, "spot_checks": 0}, "spot_checks"),
    ],
)
def test_trainer_and_schedule_errors_name_the_field(proof: dict[str, Any], fragment: str) -> None:
    with pytest.raises(JobSpecError, match=fragment):
        JobSpec.from_dict(spec_dict(commands=[], proof=proof))


def test_a_cluster_job_records_its_own_proof() -> None:
    topology = {
        "kind": "multi_node",
        "nodes": 2,
        "nproc_per_node": 1,
        "node_amount": 5,
        "checkpoint": "model.bin",
    }
    # Its commands train; a trainer only names what verifiers replay its nodes with.
    with pytest.raises(JobSpecError, match="multi_node"):
        JobSpec.from_dict(
            spec_dict(
                commands=[],
                proof=TRAINED,
                topology=topology,
                pricing={"kind": "fixed", "amount": 10},
            )
        )
    replayable = JobSpec.from_dict(
        spec_dict(proof=TRAINED, topology=topology, pricing={"kind": "fixed", "amount": 10})
    )
    assert replayable.proof.trainer is not None
    schedule_only = {k: v for k, v in TRAINED.items() if k not in ("trainer", "config")}
    spec = JobSpec.from_dict(
        spec_dict(proof=schedule_only, topology=topology, pricing={"kind": "fixed", "amount": 10})
    )
    assert spec.schedule is not None
