"""A cluster node attests the root of its node proof, and a sealed job leaves the node's
commitments (cluster.json, step records) readable by the oracles, as it does the manifest."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pot"))
from cluster_fixtures import train_cluster  # noqa: E402

from worker.results import ResultsError, pot_root, seals  # noqa: E402


def test_a_node_attests_its_node_proofs_root(tmp_path: Path) -> None:
    cluster = train_cluster(tmp_path, 2)
    for rank, proof in cluster.proofs.items():
        assert pot_root(tmp_path / f"node{rank}") == proof.root
    # A node proof that does not name the manifest beside it is no proof.
    manifest = cluster.pot_dir(1) / "manifest.json"
    manifest.write_bytes(manifest.read_bytes().replace(b'"version":1', b'"version":1 '))
    with pytest.raises(ResultsError):
        pot_root(tmp_path / "node1")


def test_a_sealed_node_keeps_its_commitments_readable() -> None:
    assert not seals("pot/manifest.json")
    assert not seals("pot/cluster.json")
    assert not seals("pot/000003.contrib")
    assert seals("pot/000003.weights")
    assert seals("results/model.contrib")
