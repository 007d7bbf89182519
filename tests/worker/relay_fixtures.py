"""Fixtures for topology-job tests: a model repository with the relay and DDP training code,
data shards, job specs for a relay pipeline and a multi-node cluster, and the unit a claim
hands out for them."""

from __future__ import annotations

import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from demos.job import commit_repo
from pot.examples.numpy_relay import make_shards

RELAY_REPO_URL = "https://git.example.test/relay.git"
IMAGE = "proofnet/test-numpy@sha256:" + "e" * 64
CHECKPOINT = "model.bin"

RELAY_PY = '''"""Relay units: StageTrainer trains a stage (the harness), main evaluates and
averages (pot.examples.numpy_relay)."""
import sys

from pot.examples.numpy_relay import StageTrainer, main

__all__ = ["StageTrainer"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''
DDP_PY = '''"""A multi-node job's training under torchrun (pot.examples.torch_ddp)."""
import sys

from pot.examples.torch_ddp import main

sys.exit(main(sys.argv[1:]))
'''
# A data-parallel trainer verifiers replay a cluster node's segments with.
DP_TORCH_PY = '''"""A replayable multi-node job: trained by pot.examples.torch_dp under torchrun."""
from pot.examples.torch_dp import TorchDataParallelMLP

__all__ = ["TorchDataParallelMLP"]
'''
# Lets a test hold one unit mid-run: blocks while `<dir>/hold-<unit index>` exists.
HOLD_PY = '''"""Block while <dir>/hold-$PROOFNET_UNIT_INDEX exists (a test paces one unit)."""
import os
import sys
import time

marker = os.path.join(sys.argv[1], "hold-" + os.environ["PROOFNET_UNIT_INDEX"])
if os.path.exists(marker):
    print("holding unit", os.environ["PROOFNET_UNIT_INDEX"], flush=True)
while os.path.exists(marker):
    time.sleep(0.1)
print("unit", os.environ["PROOFNET_UNIT_INDEX"], "goes on", flush=True)
'''


@dataclass(frozen=True)
class RelayRepo:
    path: Path
    commit: str
    rewrites: dict[str, str]

    @property
    def rewrite_arg(self) -> str:
        ((prefix, replacement),) = self.rewrites.items()
        return f"{prefix}={replacement}"


@pytest.fixture(scope="session")
def relay_repo(tmp_path_factory: pytest.TempPathFactory) -> RelayRepo:
    root = tmp_path_factory.mktemp("relay-git")
    files = {"relay.py": RELAY_PY, "ddp.py": DDP_PY, "hold.py": HOLD_PY, "dp_torch.py": DP_TORCH_PY}
    repo = commit_repo(root, "relay.git", files, "relay training code")
    return RelayRepo(
        path=repo.path,
        commit=repo.commit,
        rewrites={"https://git.example.test/": f"file://{root}/"},
    )


@dataclass(frozen=True)
class Shards:
    train: tuple[Path, ...]
    held_out: tuple[Path, ...]

    @property
    def root(self) -> Path:
        """The directory every shard lies under (a worker's allowed local data dir)."""
        return Path(os.path.commonpath([*self.train, *self.held_out]))

    @staticmethod
    def entry(path: Path) -> dict[str, str]:
        return {"uri": f"file://{path}", "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


@pytest.fixture(scope="session")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Shards:
    root = tmp_path_factory.mktemp("relay-data")
    # One call: the same teacher labels every shard; the last is held out (never trained on).
    *paths, held = make_shards(
        root / "train", shards=4, examples=512, features=32, classes=4, seed=11
    )
    (root / "held").mkdir()
    # A distinct name keeps the data/ dir of a unit unambiguous.
    renamed = held.rename(root / "held" / "held-out.bin")
    return Shards(train=tuple(paths), held_out=(renamed,))


def _resources(max_duration_s: int) -> dict[str, int]:
    return {
        "gpus": 0,
        "gpu_memory_mb": 0,
        "cpus": 1,
        "ram_mb": 4096,
        "disk_mb": 1000,
        "max_duration_s": max_duration_s,
    }


def relay_spec(
    repo: RelayRepo,
    data: Shards,
    *,
    hold_dir: Path | None = None,
    steps: int = 60,
    threshold: str = "5",
    stage_amount: int = 300_000,
    eval_amount: int = 50_000,
    every: int = 2,
) -> dict[str, Any]:
    """Three stages in a chain, each on its own shard, evaluated after stage 1 and at the end
    (units: stages 0-2, then evaluations of stages 1 and 2 as units 3 and 4)."""
    # A stage runs these, then the harness trains proof.trainer on the stage's shard.
    commands = [] if hold_dir is None else [["python3", "hold.py", str(hold_dir)]]
    n_evals = len([i for i in range(3) if (i + 1) % every == 0 or i == 2])
    return {
        "model": {"repo_url": RELAY_REPO_URL, "commit": repo.commit},
        "framework": "numpy",
        "image": IMAGE,
        "commands": commands,
        "resources": _resources(300),
        "data": [Shards.entry(p) for p in data.train],
        "results": [
            {"path": "results/metrics.json", "kind": "json"},
            {"path": "pot/**", "kind": "model"},
        ],
        "pricing": {"kind": "fixed", "amount": 3 * stage_amount + n_evals * eval_amount},
        "seed": secrets.randbelow(2**63),
        "proof": {
            "trainer": "relay:StageTrainer",
            "config": {"hidden": 32, "classes": 4},
            "schedule": {"steps": steps, "dataset_size": 512, "batch_size": 64},
            "steps_per_checkpoint": 20,
            "spot_checks": 1,
            "tolerance_ppm": 0,
        },
        "topology": {
            "kind": "relay",
            "stages": [
                {"shards": [0]},
                {"shards": [1], "after": [0]},
                {"shards": [2], "after": [1]},
            ],
            "checkpoint": CHECKPOINT,
            "stage_amount": stage_amount,
            "evaluation": {
                "every": every,
                "metric": "loss",
                "goal": "min",
                "threshold": threshold,
                "command": ["python3", "relay.py", "evaluate"],
                "data": [Shards.entry(p) for p in data.held_out],
                "amount": eval_amount,
            },
        },
    }


def multinode_spec(
    repo: RelayRepo,
    *,
    nodes: int = 2,
    steps: int = 30,
    node_amount: int = 400_000,
    hold_dir: Path | None = None,
) -> dict[str, Any]:
    """`nodes` nodes running ddp.py under torchrun; with `hold_dir`, each node's training
    process first holds while `<hold_dir>/hold-<rank>` exists (the cluster has formed)."""
    train = ["python3", "ddp.py", "--steps", str(steps)]
    if hold_dir is not None:
        train = ["bash", "-c", f"python3 hold.py {hold_dir} && exec {' '.join(train)}"]
    return {
        "model": {"repo_url": RELAY_REPO_URL, "commit": repo.commit},
        "framework": "pytorch",
        "image": IMAGE,
        "commands": [["python3", "-c", "print('node ready')"], train],
        "resources": _resources(300),
        "results": [
            {"path": "results/metrics.json", "kind": "json"},
            {"path": "pot/**", "kind": "model"},
        ],
        "pricing": {"kind": "fixed", "amount": nodes * node_amount},
        "seed": secrets.randbelow(2**63),
        "proof": {"steps_per_checkpoint": 10, "spot_checks": 1, "tolerance_ppm": 0},
        "topology": {
            "kind": "multi_node",
            "nodes": nodes,
            "nproc_per_node": 1,
            "node_amount": node_amount,
            "checkpoint": CHECKPOINT,
        },
    }


def claim_unit(
    index: int,
    kind: str,
    *,
    amount: int,
    shards: list[int] | None = None,
    inputs: list[dict[str, Any]] | None = None,
    evaluates: int | None = None,
    rank: int | None = None,
    cluster: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`ClaimPublic.unit` as the API sends it."""
    return {
        "index": index,
        "kind": kind,
        "inputs": inputs or [],
        "shards": shards or [],
        "amount": amount,
        "evaluates": evaluates,
        "rank": rank,
        "cluster": cluster,
    }
