"""A job's workspace: its code at the pinned commit, and its input data, verified.

The code comes from a cache of bare mirrors keyed by repository URL: a commit already fetched
is never downloaded again. The cache is one directory per user, shared by every job and
process on the machine: a mirror is written (created, fetched into) only under an exclusive
file lock and read (copied into a job) under a shared one. The job dir is a fresh clone
checked out (detached) at exactly the pinned commit, and the worker refuses it unless `HEAD`
is that commit. URLs can be rewritten by prefix (git's `insteadOf`), so a provider can serve
repositories from a local mirror and tests can point a job's https:// URL at a local fixture
repository. Input data is `worker.data_fetch`'s.

A job's repository URL that no rewrite of the provider's matches is the job's choice, and
git fetches it from the provider's host: it must be https://, its host is resolved once
(`proofnet.egress`: public addresses only) and git is pinned to that address
(`http.curloptResolve`), with redirects and every other protocol refused.

Every path handed to git is absolute: git runs with `-C <job dir>`, where a relative mirror
path would name a directory inside the job. A failure is `WorkspaceError` when the job's
repository, commit or data is at fault, and `WorkspaceUnavailable` (a `HostFault`) when this
machine is: the cache or work dir is unusable, git is missing, a local copy fails. git's
whole stderr (bounded, credentials redacted) is in the message.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from proofnet.egress import EgressPolicy, EgressRefused, Resolver, system_resolver
from proofnet.pinned_git import PROXY_VARIABLES, pinned_git_options
from proofnet.redaction import bounded, redact_credentials
from worker.faults import HostFault

_COMMIT = re.compile(r"[0-9a-f]{40}")


class WorkspaceError(Exception):
    """The code or data of a job cannot be made ready; the message says which and why."""


class WorkspaceUnavailable(WorkspaceError, HostFault):
    """This machine cannot prepare any job's workspace (cache, work dir, disk, git)."""


# How much of git's stderr a message keeps (its start and its end).
GIT_STDERR_LIMIT = 4000


def _git_env(*, pinned: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    if pinned:
        for name in PROXY_VARIABLES:
            env.pop(name, None)
    # Never wait on a credential prompt, and ignore the host's git config for reproducibility.
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ASKPASS": "true",
            "LC_ALL": "C",
        }
    )
    return env


@contextlib.contextmanager
def _locked(path: Path, *, shared: bool = False) -> Iterator[None]:
    """A lock (across processes) on `path`: exclusive to write one mirror, shared to read it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a")
    except OSError as e:
        raise WorkspaceUnavailable(f"the git mirror cache {path.parent} is unusable: {e}") from e
    with handle:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _absolute(path: Path) -> Path:
    # abspath, not resolve(): no I/O, and a symlinked cache stays where the provider put it.
    return Path(os.path.abspath(os.path.expanduser(path)))


def git_failure(what: str, returncode: int, stderr: str, stdout: str = "") -> str:
    """The message for a failed git command: what it tried, and all git said (bounded,
    without credentials): git's last line alone often names the wrong cause."""
    said = (stderr or stdout).strip()
    detail = bounded(redact_credentials(said), GIT_STDERR_LIMIT) if said else "no output"
    return f"cannot {redact_credentials(what)} (git exit {returncode}): {detail}"


class RepoCache:
    """Bare mirrors under `root`, one per (rewritten) repository URL."""

    def __init__(
        self,
        root: Path,
        *,
        rewrites: Mapping[str, str] | None = None,
        git: str = "git",
        timeout_s: float = 900.0,
        egress: EgressPolicy | None = None,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.root = _absolute(Path(root))
        self.egress = egress or EgressPolicy()
        self.resolver = resolver
        # Longest prefix first, as git's insteadOf does.
        self.rewrites = sorted((rewrites or {}).items(), key=lambda kv: -len(kv[0]))
        self.git = git
        self.timeout_s = timeout_s

    def resolve_url(self, url: str) -> str:
        for prefix, replacement in self.rewrites:
            if url.startswith(prefix):
                return replacement + url[len(prefix) :]
        return url

    def remote_options(self, url: str) -> tuple[str, ...]:
        """git options for fetching `url`: none where a rewrite of the provider's chose the
        source; otherwise (the job's choice) https only, pinned to the checked address of
        its host, no redirects. Refusals are the job's fault (WorkspaceError)."""
        if self.resolve_url(url) != url:
            return ()
        try:
            return pinned_git_options(url, self.egress, self.resolver)
        except EgressRefused as e:
            raise WorkspaceError(
                f"repository {redact_credentials(url)[:120]!r} is refused: {e}"
            ) from e

    def _run(
        self,
        args: Sequence[str],
        what: str,
        *,
        fault: type[WorkspaceError] = WorkspaceUnavailable,
        options: Sequence[str] = (),
    ) -> str:
        """Run git; a failure raises `fault`: WorkspaceUnavailable for what only touches
        this machine, WorkspaceError where the job's repository is what answered.
        `options` (a pinned remote's) come before the command."""
        cmd = [self.git, "-c", "protocol.ext.allow=never", *options, *args]
        try:
            done = subprocess.run(
                cmd,
                env=_git_env(pinned=bool(options)),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except FileNotFoundError as e:
            raise WorkspaceUnavailable(
                f"git ({self.git}) is not installed on this machine (needed to "
                f"{redact_credentials(what)}); install git"
            ) from e
        except OSError as e:
            raise WorkspaceUnavailable(f"cannot run git to {redact_credentials(what)}: {e}") from e
        except subprocess.TimeoutExpired as e:
            raise fault(
                f"git timed out after {self.timeout_s:g}s trying to {redact_credentials(what)}"
            ) from e
        if done.returncode != 0:
            raise fault(git_failure(what, done.returncode, done.stderr, done.stdout))
        return done.stdout.strip()

    def mirror_path(self, url: str) -> Path:
        key = hashlib.sha256(self.resolve_url(url).encode()).hexdigest()[:32]
        return self.root / f"{key}.git"

    def _has_commit(self, mirror: Path, commit: str) -> bool:
        try:
            self._run(["--git-dir", str(mirror), "cat-file", "-e", f"{commit}^{{commit}}"], "look")
        except WorkspaceError:
            return False
        return True

    def ensure_commit(self, url: str, commit: str) -> Path:
        """The mirror of `url`, holding `commit` (fetched if it was not there yet)."""
        if not _COMMIT.fullmatch(commit):
            raise WorkspaceError(f"commit must be 40 lowercase hex digits, got {commit[:60]!r}")
        source = self.resolve_url(url)
        mirror = self.mirror_path(url)
        with _locked(mirror.with_suffix(".lock")):
            if not (mirror / "HEAD").exists():
                self._run(
                    ["init", "--quiet", "--bare", str(mirror)],
                    f"create a mirror of {url} in the git mirror cache {self.root}",
                )
            if not self._has_commit(mirror, commit):
                options = self.remote_options(url)
                try:
                    # Servers that allow it (GitHub, local repos) send just this commit.
                    self._run(
                        [
                            "--git-dir",
                            str(mirror),
                            "fetch",
                            "--quiet",
                            "--no-tags",
                            "--",
                            source,
                            commit,
                        ],
                        f"fetch {commit} from {url}",
                        fault=WorkspaceError,
                        options=options,
                    )
                except WorkspaceUnavailable:
                    raise
                except WorkspaceError:
                    self._run(
                        [
                            "--git-dir",
                            str(mirror),
                            "fetch",
                            "--quiet",
                            "--no-tags",
                            "--",
                            source,
                            "+refs/heads/*:refs/heads/*",
                            "+refs/tags/*:refs/tags/*",
                        ],
                        f"fetch {url}",
                        fault=WorkspaceError,
                        options=options,
                    )
                if not self._has_commit(mirror, commit):
                    raise WorkspaceError(f"commit {commit} is not in {redact_credentials(url)}")
            # A ref keeps the commit from garbage collection and makes it fetchable by id.
            self._run(
                ["--git-dir", str(mirror), "update-ref", f"refs/proofnet/{commit}", commit],
                "pin the commit in the mirror",
            )
        return mirror

    def checkout(self, url: str, commit: str, dest: Path) -> Path:
        """A fresh repository at `dest` with `commit` checked out (detached), verified."""
        mirror = self.ensure_commit(url, commit)
        dest = _absolute(Path(dest))
        try:
            if dest.exists() and any(dest.iterdir()):
                raise WorkspaceUnavailable(f"workspace {dest} is not empty")
            dest.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise WorkspaceUnavailable(f"cannot create the job workspace {dest}: {e}") from e
        self._run(["init", "--quiet", str(dest)], f"create the job workspace {dest}")
        # Shared: other jobs may copy from this mirror at once, none may fetch into it.
        with _locked(mirror.with_suffix(".lock"), shared=True):
            self._run(
                ["-C", str(dest), "fetch", "--quiet", "--no-tags", "--", str(mirror), commit],
                f"copy {commit} from the mirror {mirror} into the workspace {dest}",
            )
        self._run(
            [
                "-C",
                str(dest),
                "-c",
                "advice.detachedHead=false",
                "checkout",
                "--quiet",
                "--detach",
                "FETCH_HEAD",
            ],
            f"check out {commit}",
            # What the commit holds decides whether it can be checked out (paths git
            # refuses, a tree larger than the disk): the job's fault, never this machine's.
            fault=WorkspaceError,
        )
        head = self._run(["-C", str(dest), "rev-parse", "HEAD"], "read HEAD")
        if head != commit:
            raise WorkspaceUnavailable(
                f"checked out {head}, not the pinned {commit}; refusing to run"
            )
        return dest
