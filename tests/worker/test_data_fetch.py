"""Job data onto the provider's host, played as a hostile submitter.

Each attack names a shard URI that would make the provider's host read its own files,
reach its loopback, LAN or cloud metadata service, fill its disk, or tell the submitter
what a file holds; each is refused before any byte is written, and its honest twin (a
public https source, a directory the provider allows) is fetched. Real local servers and
sockets; DNS by a resolver the test controls (`tests/net_servers.py`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from proofnet.egress import EgressPolicy
from proofnet.messages.jobspec import DataShard
from tests.net_servers import Endless, LocalServer, Redirect, names, serve, tls_for
from worker.data_fetch import MB, DataFetchPolicy, fetch_data
from worker.faults import HostFault
from worker.workspace import WorkspaceError

SECRET = b"worker signing key: 5820deadbeef\n"
BODY = b"a,b\n1,2\n"
# The local servers stand in for public hosts: exactly 127.0.0.1 is let back in, no more.
LOCAL_AS_PUBLIC = EgressPolicy.allowing(["127.0.0.1/32"])
RESOLVER = names(
    {
        "data.example.test": ["127.0.0.1"],
        "loopback.example.test": ["127.0.0.1"],
        "internal.example.test": ["10.0.0.5"],
    }
)


def shard(uri: str, content: bytes = BODY) -> DataShard:
    return DataShard(uri=uri, sha256=hashlib.sha256(content).hexdigest())


def data_dir_is_empty(job: Path) -> bool:
    return not (job / "data").exists() or not list((job / "data").iterdir())


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "provider" / "worker.skey"
    path.parent.mkdir()
    path.write_bytes(SECRET)
    return path


# --- local files ----------------------------------------------------------------------------


def test_a_file_uri_cannot_read_the_providers_files(tmp_path: Path, secret_file: Path) -> None:
    """The attack that stole a worker key: a shard naming the key file, pinned to its hash."""
    with pytest.raises(WorkspaceError, match="file:// data is refused") as raised:
        fetch_data([shard(f"file://{secret_file}", SECRET)], tmp_path / "job" / "data", disk_mb=10)
    assert not isinstance(raised.value, HostFault)
    assert data_dir_is_empty(tmp_path / "job")


def test_file_uris_are_read_only_under_the_providers_local_dirs(
    tmp_path: Path, secret_file: Path
) -> None:
    allowed = tmp_path / "datasets"
    allowed.mkdir()
    (allowed / "train.csv").write_bytes(BODY)
    os.symlink(secret_file, allowed / "escape.csv")
    policy = DataFetchPolicy(local_dirs=(allowed,))
    [path] = fetch_data(
        [shard(f"file://{allowed}/train.csv")], tmp_path / "ok" / "data", disk_mb=10, policy=policy
    )
    assert path.read_bytes() == BODY
    for uri in (
        f"file://{allowed}/../provider/worker.skey",  # a path out of the allowed dir
        f"file://{allowed}/escape.csv",  # a link out of it
        f"file://{secret_file}",
    ):
        with pytest.raises(WorkspaceError, match="outside this host's local data"):
            fetch_data([shard(uri, SECRET)], tmp_path / "job" / "data", disk_mb=10, policy=policy)
    assert data_dir_is_empty(tmp_path / "job")


@pytest.mark.parametrize("planted", ["file", "symlink"])
def test_a_repository_cannot_pass_its_own_data_path_off_as_a_machine_fault(
    tmp_path: Path, planted: str
) -> None:
    # A job's repository that commits `data` as a file (or a link elsewhere) must fail as
    # the job, or it would bounce between providers forever without counting.
    src = tmp_path / "shards" / "shard.csv"
    src.parent.mkdir()
    src.write_bytes(BODY)
    job = tmp_path / "job"
    job.mkdir()
    if planted == "file":
        (job / "data").write_text("not a directory\n")
    else:
        target = tmp_path / "provider-files"
        target.mkdir()
        os.symlink(target, job / "data")
    policy = DataFetchPolicy(local_dirs=(src.parent,))
    with pytest.raises(WorkspaceError, match="not a directory") as raised:
        fetch_data([shard(f"file://{src}")], job / "data", disk_mb=10, policy=policy)
    assert not isinstance(raised.value, HostFault)
    assert not (tmp_path / "provider-files" / "shard.csv").exists()


# --- the network ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "localhost",
        "loopback.example.test",  # a public-looking name that resolves to loopback
        "[::ffff:127.0.0.1]",
    ],
)
def test_data_urls_never_reach_the_providers_loopback(tmp_path: Path, host: str) -> None:
    resolver = names({"loopback.example.test": ["127.0.0.1"], "localhost": ["127.0.0.1"]})
    policy = DataFetchPolicy(allow_http=True, resolver=resolver)
    with serve({"/train.csv": BODY}) as server, pytest.raises(WorkspaceError, match="refus"):
        fetch_data(
            [shard(f"http://{host}:{server.port}/train.csv")],
            tmp_path / "job" / "data",
            disk_mb=10,
            policy=policy,
        )
    assert server.seen == []
    assert data_dir_is_empty(tmp_path / "job")


@pytest.mark.parametrize(
    "uri",
    [
        "http://169.254.169.254/latest/meta-data/iam/credentials.json",
        "http://[fd00:ec2::254]/latest/meta-data/credentials.json",
        "http://100.100.100.200/latest/meta-data/credentials.json",
        "http://internal.example.test/secret.csv",
        "http://10.0.0.5/secret.csv",
    ],
)
def test_data_urls_never_reach_metadata_or_private_addresses(tmp_path: Path, uri: str) -> None:
    policy = DataFetchPolicy(allow_http=True, resolver=RESOLVER)
    with pytest.raises(WorkspaceError, match="refus"):
        fetch_data([shard(uri)], tmp_path / "job" / "data", disk_mb=10, policy=policy)


@pytest.mark.parametrize("uri", ["ftp://example.org/a.csv", "gopher://example.org/a.csv"])
def test_other_schemes_are_refused(tmp_path: Path, uri: str) -> None:
    with pytest.raises(WorkspaceError, match="refused"):
        fetch_data([shard(uri)], tmp_path / "job" / "data", disk_mb=10)


def test_plain_http_needs_the_providers_consent(tmp_path: Path) -> None:
    with serve({"/train.csv": BODY}) as server:
        uri = server.url("data.example.test", "/train.csv")
        strict = DataFetchPolicy(egress=LOCAL_AS_PUBLIC, resolver=RESOLVER)
        with pytest.raises(WorkspaceError, match="over https only"):
            fetch_data([shard(uri)], tmp_path / "a" / "data", disk_mb=10, policy=strict)
        assert server.seen == []
        lax = DataFetchPolicy(allow_http=True, egress=LOCAL_AS_PUBLIC, resolver=RESOLVER)
        [path] = fetch_data([shard(uri)], tmp_path / "b" / "data", disk_mb=10, policy=lax)
    assert path.read_bytes() == BODY


def test_https_data_is_fetched_from_the_pinned_address(tmp_path: Path) -> None:
    """The honest twin: a public https source, its name resolved once and pinned."""
    tls = tls_for("data.example.test")
    with serve({"/train.csv": BODY}, tls=tls) as server:
        policy = DataFetchPolicy(egress=LOCAL_AS_PUBLIC, resolver=RESOLVER, verify=tls.ca_context())
        [path] = fetch_data(
            [shard(server.url("data.example.test", "/train.csv"))],
            tmp_path / "job" / "data",
            disk_mb=10,
            policy=policy,
            cache_dir=tmp_path / "cache",
        )
    assert path.read_bytes() == BODY and path.name == "train.csv"
    assert [(s.host, s.sni) for s in server.seen] == [
        (f"data.example.test:{server.port}", "data.example.test")
    ]


def test_a_redirect_to_loopback_is_not_followed(tmp_path: Path) -> None:
    """The first hop is allowed; it redirects to another loopback address, where a victim
    listens on the same port: the victim never sees a request."""
    policy = DataFetchPolicy(allow_http=True, egress=LOCAL_AS_PUBLIC, resolver=RESOLVER)
    with (
        serve({}) as public,
        serve({"/secret.csv": SECRET}, host="127.0.0.2", port=public.port) as victim,
    ):
        public.routes["/train.csv"] = Redirect(f"http://127.0.0.2:{victim.port}/secret.csv")
        with pytest.raises(WorkspaceError, match="refusing to connect: 127.0.0.2"):
            fetch_data(
                [shard(public.url("data.example.test", "/train.csv"), SECRET)],
                tmp_path / "job" / "data",
                disk_mb=10,
                policy=policy,
            )
    assert [s.path for s in public.seen] == ["/train.csv"]
    assert victim.seen == []
    assert data_dir_is_empty(tmp_path / "job")


def test_a_redirect_from_https_down_to_http_is_refused(tmp_path: Path) -> None:
    tls = tls_for("data.example.test")
    with serve({"/train.csv": BODY}) as plain:
        routes = {"/train.csv": Redirect(plain.url("data.example.test", "/train.csv"))}
        with serve(routes, tls=tls) as server:
            policy = DataFetchPolicy(
                egress=LOCAL_AS_PUBLIC, resolver=RESOLVER, verify=tls.ca_context()
            )
            with pytest.raises(WorkspaceError, match="only https"):
                fetch_data(
                    [shard(server.url("data.example.test", "/train.csv"))],
                    tmp_path / "job" / "data",
                    disk_mb=10,
                    policy=policy,
                )
    assert plain.seen == []


# --- size, time, and what a failure says ------------------------------------------------------


def _fetch_from(server: LocalServer, tmp_path: Path, disk_mb: int, **policy: object) -> None:
    fetch_data(
        [shard(server.url("data.example.test", "/train.csv"), b"anything")],
        tmp_path / "job" / "data",
        disk_mb=disk_mb,
        policy=DataFetchPolicy(
            allow_http=True, egress=LOCAL_AS_PUBLIC, resolver=RESOLVER, **policy
        ),
    )


def test_an_endless_source_is_cut_off_at_the_specs_disk_mb(tmp_path: Path) -> None:
    with (
        serve({"/train.csv": Endless()}) as server,
        pytest.raises(WorkspaceError, match="limit of 2 MB"),
    ):
        _fetch_from(server, tmp_path, disk_mb=2)
    assert data_dir_is_empty(tmp_path / "job")  # the partial file is gone


def test_the_providers_size_limit_caps_a_larger_disk_mb(tmp_path: Path) -> None:
    with (
        serve({"/train.csv": Endless()}) as server,
        pytest.raises(WorkspaceError, match="limit of 1 MB"),
    ):
        _fetch_from(server, tmp_path, disk_mb=100_000, max_mb=1)
    assert data_dir_is_empty(tmp_path / "job")


def test_a_declared_length_past_the_limit_is_refused_before_reading(tmp_path: Path) -> None:
    with (
        serve({"/train.csv": b"x" * (2 * MB)}) as server,
        pytest.raises(WorkspaceError, match="past the job's data limit of 1 MB"),
    ):
        _fetch_from(server, tmp_path, disk_mb=1)
    assert data_dir_is_empty(tmp_path / "job")


def test_the_providers_time_limit_cuts_a_fetch_off(tmp_path: Path) -> None:
    # A zero limit is spent by the first chunk: no clock in the test, only the rule.
    with (
        serve({"/train.csv": Endless()}) as server,
        pytest.raises(WorkspaceError, match="longer than this host's limit"),
    ):
        _fetch_from(server, tmp_path, disk_mb=100, timeout_s=0.0)
    assert data_dir_is_empty(tmp_path / "job")


def test_a_wrong_hash_never_reveals_what_was_read(tmp_path: Path) -> None:
    """The second half of the key theft: a mismatch that reported the real SHA-256 told the
    submitter the file's hash, to pin in the next job."""
    allowed = tmp_path / "datasets"
    allowed.mkdir()
    (allowed / "train.csv").write_bytes(SECRET)
    real = hashlib.sha256(SECRET).hexdigest()
    with pytest.raises(WorkspaceError, match="hash mismatch") as raised:
        fetch_data(
            [DataShard(uri=f"file://{allowed}/train.csv", sha256="0" * 64)],
            tmp_path / "job" / "data",
            disk_mb=10,
            policy=DataFetchPolicy(local_dirs=(allowed,)),
        )
    assert real not in str(raised.value)
    assert data_dir_is_empty(tmp_path / "job")


def test_credentials_in_a_data_url_are_never_shown(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError) as raised:
        fetch_data(
            [shard("http://user:s3cret@10.0.0.5/train.csv")],
            tmp_path / "job" / "data",
            disk_mb=10,
            policy=DataFetchPolicy(allow_http=True),
        )
    assert "s3cret" not in str(raised.value)


def test_a_refused_uri_is_refused_even_when_its_hash_is_cached(tmp_path: Path) -> None:
    allowed = tmp_path / "datasets"
    allowed.mkdir()
    (allowed / "train.csv").write_bytes(BODY)
    policy = DataFetchPolicy(local_dirs=(allowed,), allow_http=True)
    cache = tmp_path / "cache"
    fetch_data(
        [shard(f"file://{allowed}/train.csv")],
        tmp_path / "a" / "data",
        disk_mb=10,
        policy=policy,
        cache_dir=cache,
    )
    for uri in ("file:///etc/train.csv", "http://127.0.0.1/train.csv", "ftp://x.org/train.csv"):
        with pytest.raises(WorkspaceError, match="refus"):
            fetch_data(
                [shard(uri)], tmp_path / "b" / "data", disk_mb=10, policy=policy, cache_dir=cache
            )
    assert data_dir_is_empty(tmp_path / "b")
