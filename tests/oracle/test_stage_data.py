"""A spot check's fetches on the oracle's host, played as a hostile submitter: a stage's
shard or the job's repository naming the oracle's own files or network is refused before
any byte moves, as on a provider's host (`proofnet.shard_fetch`, `proofnet.pinned_git`).
Real local servers; DNS by a resolver the test controls."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from oracle.verification.spotcheck import RepoCache, SpotCheckUnavailable
from oracle.verification.stage_data import StageDataError, fetch_shards
from proofnet.egress import EgressPolicy
from proofnet.messages.shards import DataShard
from proofnet.shard_fetch import DataFetchPolicy
from tests.net_servers import names, serve, tls_for

KEY = b"oracle signing key\n"


def test_a_shard_cannot_read_the_oracles_files(tmp_path: Path) -> None:
    key_file = tmp_path / "oracle.skey"
    key_file.write_bytes(KEY)
    shard = DataShard(uri=f"file://{key_file}", sha256=hashlib.sha256(KEY).hexdigest())
    with pytest.raises(StageDataError, match="file:// data is refused"):
        fetch_shards([shard], tmp_path / "work" / "data", disk_mb=10)
    assert not (tmp_path / "work" / "data" / "oracle.skey").exists()


@pytest.mark.parametrize("host", ["127.0.0.1", "loopback.example.test"])
def test_a_shard_cannot_reach_the_oracles_loopback(tmp_path: Path, host: str) -> None:
    policy = DataFetchPolicy(
        allow_http=True, resolver=names({"loopback.example.test": ["127.0.0.1"]})
    )
    with serve({"/admin": KEY}) as server:
        uri = f"http://{host}:{server.port}/admin"
        shard = DataShard(uri=uri, sha256=hashlib.sha256(KEY).hexdigest())
        with pytest.raises(StageDataError, match="refus"):
            fetch_shards([shard], tmp_path / "data", disk_mb=10, policy=policy)
    assert server.seen == []


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:{port}/model.git",
        "https://loopback.example.test:{port}/model.git",
        "git://repo.example.test:{port}/model.git",
    ],
)
def test_a_jobs_repository_cannot_make_the_oracle_reach_its_network(
    tmp_path: Path, url: str
) -> None:
    resolver = names({"loopback.example.test": ["127.0.0.1"], "repo.example.test": ["127.0.0.1"]})
    with serve({}, tls=tls_for("repo.example.test")) as server:
        repos = RepoCache(tmp_path / "repos", resolver=resolver, timeout_s=60)
        with pytest.raises(SpotCheckUnavailable, match="refused"):
            repos.export(url.format(port=server.port), "a" * 40, tmp_path / "tree")
    assert server.handshakes == [] and server.seen == []


def test_the_oracles_git_is_pinned_to_the_checked_address(tmp_path: Path) -> None:
    """The honest twin: an allowed host is reached at the address it was checked to, under
    its name (git then refuses the test CA, which ends the test)."""
    resolver = names({"repo.example.test": ["127.0.0.1"]})
    with serve({}, tls=tls_for("repo.example.test")) as server:
        repos = RepoCache(
            tmp_path / "repos",
            resolver=resolver,
            egress=EgressPolicy.allowing(["127.0.0.1/32"]),
            timeout_s=60,
        )
        with pytest.raises(SpotCheckUnavailable, match="clone"):
            repos.export(
                f"https://repo.example.test:{server.port}/model.git", "a" * 40, tmp_path / "t"
            )
    assert "repo.example.test" in server.handshakes
