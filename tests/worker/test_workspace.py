"""The git mirror cache and the job workspace: absolute paths wherever git runs, one cache
shared safely by concurrent jobs, git's whole error without credentials, and whose fault a
failure is (this machine's, or the job's)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from agent_fixtures import REPO_URL, FixtureRepo, model_repo  # noqa: F401

from proofnet.egress import EgressPolicy
from proofnet.processes import free_port
from tests.net_servers import Redirect, names, serve, tls_for
from worker.faults import HostFault
from worker.workspace import RepoCache, WorkspaceError, WorkspaceUnavailable


def test_a_relative_cache_and_workspace_work_from_any_directory(
    tmp_path: Path,
    model_repo: FixtureRepo,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The defect this stops: git ran `-C <job dir> fetch <relative mirror>`, which git read
    # relative to the job dir ("... and the repository exists.").
    monkeypatch.chdir(tmp_path)
    cache = RepoCache(Path("state/cache"), rewrites=model_repo.rewrites)
    assert cache.root == tmp_path / "state" / "cache"
    first = cache.checkout(REPO_URL, model_repo.commit, Path("jobs/one"))
    assert first == tmp_path / "jobs" / "one"
    assert "from pot.examples.numpy_mlp" in (first / "mlp.py").read_text()
    # Started elsewhere later: the cache is still the one it was made with.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    again = cache.checkout(REPO_URL, model_repo.commit, tmp_path / "jobs" / "two")
    assert (again / "mlp.py").read_text() == (first / "mlp.py").read_text()
    assert not (elsewhere / "state").exists()


def test_one_cache_serves_concurrent_checkouts_of_a_new_repository(
    tmp_path: Path,
    model_repo: FixtureRepo,  # noqa: F811
) -> None:
    # Several jobs (threads here, processes on a machine: the lock is a file lock) start on
    # the same repository while its mirror does not exist yet.
    cache = RepoCache(tmp_path / "cache", rewrites=model_repo.rewrites)
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def job(n: int) -> None:
        try:
            start.wait()
            cache.checkout(REPO_URL, model_repo.commit, tmp_path / f"job{n}")
        except BaseException as e:  # collected: the assertion below shows them all
            errors.append(e)

    threads = [threading.Thread(target=job, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    texts = {(tmp_path / f"job{n}" / "mlp.py").read_text() for n in range(4)}
    assert len(texts) == 1
    assert [p.name for p in (tmp_path / "cache").glob("*.git")] == [
        cache.mirror_path(REPO_URL).name
    ]


def test_git_errors_say_everything_git_said(tmp_path: Path) -> None:
    # git's last line alone ("and the repository exists.") named no cause at all.
    missing = tmp_path / "no-such-repo"
    cache = RepoCache(tmp_path / "cache", rewrites={"https://git.example.test/": f"{missing}/"})
    with pytest.raises(WorkspaceError) as raised:
        cache.checkout("https://git.example.test/x.git", "a" * 40, tmp_path / "job")
    message = str(raised.value)
    assert "does not appear to be a git repository" in message
    assert "and the repository exists" in message
    assert "git exit 128" in message
    # The job named a repository that is not there: its fault, not this machine's.
    assert not isinstance(raised.value, HostFault)


def test_credentials_in_a_repository_url_never_reach_the_message(tmp_path: Path) -> None:
    closed = free_port()
    url = f"http://provider:s3cret-token@127.0.0.1:{closed}/private.git"
    cache = RepoCache(tmp_path / "cache", timeout_s=60)
    with pytest.raises(WorkspaceError) as raised:
        cache.checkout(url, "b" * 40, tmp_path / "job")
    message = str(raised.value)
    assert "s3cret-token" not in message and "provider:" not in message
    assert f"http://***@127.0.0.1:{closed}/private.git" in message


def test_an_unusable_cache_is_this_machines_fault(tmp_path: Path, model_repo: FixtureRepo) -> None:  # noqa: F811
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache should be\n")
    cache = RepoCache(blocked, rewrites=model_repo.rewrites)
    with pytest.raises(WorkspaceUnavailable, match="git mirror cache") as raised:
        cache.checkout(REPO_URL, model_repo.commit, tmp_path / "job")
    assert isinstance(raised.value, HostFault)
    # Honest twin: the same machine, repaired, checks the job out.
    blocked.unlink()
    assert (cache.checkout(REPO_URL, model_repo.commit, tmp_path / "job") / "mlp.py").exists()


def test_missing_git_is_this_machines_fault(tmp_path: Path, model_repo: FixtureRepo) -> None:  # noqa: F811
    cache = RepoCache(tmp_path / "cache", rewrites=model_repo.rewrites, git="/nonexistent/git")
    with pytest.raises(WorkspaceUnavailable, match="install git"):
        cache.checkout(REPO_URL, model_repo.commit, tmp_path / "job")


def test_a_commit_the_repository_lacks_is_the_jobs_fault(
    tmp_path: Path,
    model_repo: FixtureRepo,  # noqa: F811
) -> None:
    cache = RepoCache(tmp_path / "cache", rewrites=model_repo.rewrites)
    with pytest.raises(WorkspaceError, match="not in") as raised:
        cache.checkout(REPO_URL, "0" * 40, tmp_path / "job")
    assert not isinstance(raised.value, HostFault)


# --- a job's own repository URL (no rewrite of the provider's matches it) -------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:{port}/model.git",
        "https://loopback.example.test:{port}/model.git",  # resolves to loopback
        "https://[::ffff:127.0.0.1]:{port}/model.git",
        "https://169.254.169.254/model.git",
        "https://internal.example.test/model.git",  # resolves to 10.0.0.5
        "http://repo.example.test:{port}/model.git",  # plain http
        "git://repo.example.test:{port}/model.git",
        "ssh://git@repo.example.test:{port}/model.git",
    ],
)
def test_a_jobs_repository_url_never_reaches_the_providers_own_network(
    tmp_path: Path, url: str
) -> None:
    resolver = names(
        {
            "loopback.example.test": ["127.0.0.1"],
            "internal.example.test": ["10.0.0.5"],
            "repo.example.test": ["127.0.0.1"],
        }
    )
    with serve({}, tls=tls_for("repo.example.test")) as server:
        cache = RepoCache(tmp_path / "cache", resolver=resolver, timeout_s=60)
        with pytest.raises(WorkspaceError, match="refus") as raised:
            cache.checkout(url.format(port=server.port), "a" * 40, tmp_path / "job")
    assert not isinstance(raised.value, HostFault)  # the job's fault: it counts
    assert server.handshakes == [] and server.seen == []


def test_git_connects_to_the_checked_address_under_the_repositorys_name(tmp_path: Path) -> None:
    """git is pinned: the name exists only in the test's resolver, yet git reaches the
    server the name was checked to, with that name as its TLS server name (git then
    refuses the test CA's certificate, which is where this test stops)."""
    resolver = names({"repo.example.test": ["127.0.0.1"]})
    with serve({}, tls=tls_for("repo.example.test")) as server:
        cache = RepoCache(
            tmp_path / "cache",
            resolver=resolver,
            egress=EgressPolicy.allowing(["127.0.0.1/32"]),
            timeout_s=60,
        )
        with pytest.raises(WorkspaceError, match="SSL|certificate"):
            cache.checkout(
                f"https://repo.example.test:{server.port}/model.git", "a" * 40, tmp_path / "job"
            )
    assert resolver.lookups == [("repo.example.test", server.port)]
    assert "repo.example.test" in server.handshakes


def test_git_follows_no_redirect_from_the_checked_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checked host answers git with a redirect to a loopback victim (same port, TLS
    trusted): git stops there, and the victim never sees a connection."""
    tls = tls_for("repo.example.test", "victim.example.test")
    monkeypatch.setenv("GIT_SSL_CAINFO", str(tls.ca_file))  # git trusts the test CA
    resolver = names({"repo.example.test": ["127.0.0.1"]})
    with (
        serve({}, tls=tls) as public,
        serve({}, tls=tls, host="127.0.0.2", port=public.port) as victim,
    ):
        target = f"https://127.0.0.2:{victim.port}/model.git/info/refs?service=git-upload-pack"
        public.routes["/model.git/info/refs"] = Redirect(target)
        cache = RepoCache(
            tmp_path / "cache",
            resolver=resolver,
            egress=EgressPolicy.allowing(["127.0.0.1/32"]),
            timeout_s=60,
        )
        with pytest.raises(WorkspaceError, match="redirect|302"):
            cache.checkout(
                f"https://repo.example.test:{public.port}/model.git", "a" * 40, tmp_path / "job"
            )
    assert [s.path.split("?")[0] for s in public.seen][:1] == ["/model.git/info/refs"]
    assert victim.seen == [] and victim.handshakes == []
