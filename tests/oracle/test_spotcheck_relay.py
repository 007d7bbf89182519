"""Spot checks of relay stages: the oracle replays a stage with the stage's own data.

A stage trains on its planned shards of `spec.data`; the oracle fetches those shards
(SHA-256 checked) and runs the network's harness over the repository's trainer with the
stage's unit environment. A real stage run (pot.examples.numpy_relay) passes; the same proof
recorded over another shard than the plan gives the stage does not replay; data that no
longer hash to the spec's pin leave the check undecided (retried), never failed.
"""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from nacl.signing import SigningKey
from oracle_fixtures import FakeFeed, trainer_repo

from oracle.inputs.feed import JobInfo
from oracle.inputs.feed_units import unit_result_name
from oracle.verification.spotcheck import (
    LocalSpotChecker,
    RepoCache,
    SpotCheckRequest,
    SpotCheckUnavailable,
)
from oracle.verification.verify import Reason
from pot import env, harness
from pot.examples.numpy_relay import StageTrainer, make_shards
from pot.seeds import derive_data_seed
from pot.trainer import TrainContext
from proofnet.messages.attestation import Attestation
from proofnet.messages.jobspec import JobSpec
from proofnet.shard_fetch import DataFetchPolicy

SPEC_URL = "https://example.org/relay.git"
RELAY_PY = "from pot.examples.numpy_relay import StageTrainer  # noqa: F401\n"
ORACLE_KEY = SigningKey(b"\x07" * 32)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return trainer_repo(
        tmp_path_factory.mktemp("relay-replay-repo"), {"relay.py": RELAY_PY}, "relay trainer"
    )


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("relay-replay-data")
    return make_shards(root, shards=3, examples=128, features=32, classes=4, seed=5)


def _spec(commit: str, shards: list[Path]) -> JobSpec:
    def entry(p: Path) -> dict[str, str]:
        return {"uri": f"file://{p}", "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}

    return JobSpec.from_dict(
        {
            "model": {"repo_url": SPEC_URL, "commit": commit},
            "framework": "numpy",
            "image": "proofnet/test@sha256:" + "e" * 64,
            "commands": [],
            "resources": {
                "gpus": 0,
                "gpu_memory_mb": 0,
                "cpus": 1,
                "ram_mb": 1024,
                "disk_mb": 100,
                "max_duration_s": 60,
            },
            "data": [entry(p) for p in shards],
            "results": [{"path": "pot/**", "kind": "model"}],
            "pricing": {"kind": "fixed", "amount": 300},
            "seed": secrets.randbelow(2**63),
            "proof": {
                "trainer": "relay:StageTrainer",
                "config": {"hidden": 16, "classes": 4},
                "schedule": {"steps": 20, "dataset_size": 128, "batch_size": 64},
                "steps_per_checkpoint": 5,
                "spot_checks": 2,
                "tolerance_ppm": 0,
            },
            "topology": {
                "kind": "relay",
                "stages": [
                    {"shards": [0]},
                    {"shards": [1], "after": [0]},
                    {"shards": [2], "after": [1]},
                ],
                "checkpoint": "model.bin",
                "stage_amount": 100,
            },
        }
    )


def _run_stage(
    work: Path, spec: JobSpec, index: int, nonce: str, data: Path
) -> tuple[dict[str, bytes], str]:
    """Stage `index` trained for real on `data` (from the model's initialisation) by the
    harness; its proof files by feed name, and its proof-of-training root."""
    unit = env.UnitEnv(kind="stage", index=index, shards=(data,), checkpoint_out=work / "ckpt")
    schedule = spec.schedule
    assert schedule is not None
    ctx = TrainContext(
        job_dir=work,
        job_seed=spec.seed,
        data_seed=derive_data_seed(spec.seed, bytes.fromhex(nonce)),
        schedule=schedule,
        config=dict(spec.proof.config or {}),
        unit=unit,
    )
    manifest = harness.train(StageTrainer(ctx), ctx, work / "pot")
    files = {
        unit_result_name(index, f"pot/{p.name}"): p.read_bytes()
        for p in sorted((work / "pot").iterdir())
    }
    return files, manifest.root


def _check(
    tmp_path: Path, repo: tuple[str, str], spec: JobSpec, data_for_stage: Path
) -> tuple[Any, LocalSpotChecker]:
    nonce = secrets.token_hex(16)
    files, root = _run_stage(tmp_path / "stage", spec, 1, nonce, data_for_stage)
    feed = FakeFeed(artifacts={(spec.job_id, name): blob for name, blob in files.items()})
    checker = LocalSpotChecker(
        feed,  # type: ignore[arg-type]
        RepoCache(tmp_path / "repos", url_map={SPEC_URL: repo[0]}),
        sign=lambda message: ORACLE_KEY.sign(message).signature,
        timeout_s=120,
        data_cache=tmp_path / "data-cache",
        # The spec's shards are local files: the directories this oracle lets jobs read.
        data_policy=DataFetchPolicy(
            local_dirs=tuple({Path(s.uri.removeprefix("file://")).parent for s in spec.data})
        ),
    )
    # What the check reads of the attestation: its unit (stage 1 builds on stage 0), proof
    # root, claim nonce and the digest the oracle's draw signs.
    att = SimpleNamespace(
        unit=SimpleNamespace(index=1, kind="stage", inputs=("f" * 64,)),
        pot_root=root,
        nonce=nonce,
        leaf_hash=lambda: bytes.fromhex(root),
    )
    job = JobInfo(job_id=spec.job_id, spec=spec, status="running", escrow=None, lease=None)
    return checker.check(cast(Attestation, att), job), checker


def test_a_stage_replays_on_its_own_shards(
    tmp_path: Path, repo: tuple[str, str], shards: list[Path]
) -> None:
    spec = _spec(repo[1], shards)
    verdict, _ = _check(tmp_path, repo, spec, shards[1])
    assert verdict.passed, verdict
    assert verdict.report is not None and verdict.report["results"]
    assert all(r["bitwise_match"] for r in verdict.report["results"])
    # The shard was fetched once into the cache, by its hash.
    assert (tmp_path / "data-cache" / spec.data[1].sha256).read_bytes() == shards[1].read_bytes()


def test_a_stage_trained_on_other_data_fails(
    tmp_path: Path, repo: tuple[str, str], shards: list[Path]
) -> None:
    spec = _spec(repo[1], shards)
    verdict, _ = _check(tmp_path, repo, spec, shards[0])  # the plan gives stage 1 shard 1
    assert not verdict.passed and verdict.reason == Reason.SPOT_CHECK_FAILED
    assert "do not replay" in verdict.message


def test_data_that_no_longer_match_the_pin_leave_the_check_undecided(
    tmp_path: Path, repo: tuple[str, str], shards: list[Path]
) -> None:
    copies = []
    for p in shards:
        copy = tmp_path / "moved" / p.name
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(p.read_bytes())
        copies.append(copy)
    spec = _spec(repo[1], copies)
    changed = bytearray(copies[1].read_bytes())
    changed[-1] ^= 1
    copies[1].write_bytes(bytes(changed))  # the data host changed it after the spec pinned it
    with pytest.raises(SpotCheckUnavailable, match="stage 1's data"):
        _check(tmp_path, repo, spec, shards[1])


def test_a_stage_request_round_trips_as_json() -> None:
    request = SpotCheckRequest(
        job_id="a" * 64,
        repo_url="file:///r",
        commit="b" * 40,
        pot_root="c" * 64,
        job_seed=7,
        nonce="d" * 32,
        trainer="relay:StageTrainer",
        config={"hidden": 16},
        schedule={
            "total_steps": 20,
            "steps_per_checkpoint": 5,
            "dataset_size": 128,
            "batch_size": 64,
        },
        segments=(1, 3),
        tolerance_ppm=0,
        unit_index=2,
        shards=("data/shard-2.bin",),
    )
    assert SpotCheckRequest.from_json(request.to_json()) == request
    # A single-unit request (no unit fields) reads too.
    old = request.to_json().replace(', "shards": ["data/shard-2.bin"]', "")
    old = old.replace(', "unit_index": 2', "")
    assert SpotCheckRequest.from_json(old).unit_index is None
