"""A job's data shards onto our host: only what the host's operator allows, bounded.

A shard's URI is the job's choice and the fetch runs on a host of ours (a provider's
worker, outside the job's sandbox; an oracle replaying a stage), so every rule here is the
host operator's, never the job's:

- `https://` only; `http://` only where the operator allows it (`allow_http`);
- the host is resolved once and the connection pinned to that address, which must be
  public (`proofnet.egress`: no loopback, private, link-local, CGNAT, metadata ranges),
  or in a network the operator lets back in; each redirect is checked the same way;
- `file://` only under a directory the operator lists (`local_dirs`, e.g. its dataset
  mirror or a demo's data); every other scheme is refused;
- at most `min(spec disk_mb, max_mb)` bytes in all (an endless source is cut off there)
  and `timeout_s` seconds in all;
- a shard whose bytes differ from its pinned SHA-256 is deleted and reported as "does not
  match its pinned SHA-256", never with the digest of what was read (which would turn the
  host into an oracle for its own files).

I/O: the connections and files of one fetch. A refusal or a bad shard is `ShardRefused`
(the job's fault, or its data host's); a local write that fails for another reason than a
full disk is `ShardStoreFailed` (this machine's). Each role translates them into its own
errors (`worker.data_fetch`, `oracle.verification.stage_data`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import ipaddress
import os
import re
import shutil
import ssl
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

import httpx

from proofnet.egress import EgressPolicy, EgressRefused, Resolver, system_resolver
from proofnet.messages.shards import DataShard
from proofnet.pinned_http import pinned_client
from proofnet.redaction import redact_credentials


class ShardRefused(Exception):
    """A shard is refused (scheme, address, size, time, hash) or its source failed."""


class ShardStoreFailed(Exception):
    """This machine cannot store a shard (not the job's fault)."""


_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")
_CHUNK = 1 << 20
MB = 1 << 20


@dataclass(frozen=True)
class DataFetchPolicy:
    """The host operator's rules for fetching job data (from its settings)."""

    allow_http: bool = False
    # The most any one job's data may take, whatever its spec declares.
    max_mb: int = 50 * 1024
    timeout_s: float = 1800.0
    max_redirects: int = 5
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    # Directories whose files a job may name as file:// shards (the operator's choice).
    local_dirs: tuple[Path, ...] = ()
    resolver: Resolver = system_resolver
    # TLS trust: True (the system's CAs) or a context (tests, an operator's private CA).
    verify: ssl.SSLContext | bool = True

    def limit_bytes(self, disk_mb: int) -> int:
        return min(disk_mb, self.max_mb) * MB


def _shown(uri: str) -> str:
    return redact_credentials(uri)[:120]


def shard_name(uri: str) -> str:
    name = PurePosixPath(unquote(urlsplit(uri).path)).name
    if not _SAFE_NAME.fullmatch(name):
        raise ShardRefused(
            f"data uri {_shown(uri)!r} must end in a plain file name ([A-Za-z0-9._-])"
        )
    return name


class _Budget:
    """Bytes and seconds left for one job's data."""

    def __init__(self, limit_bytes: int, timeout_s: float) -> None:
        self.limit = limit_bytes
        self.left = limit_bytes
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s

    def take(self, n: int, uri: str) -> None:
        self.left -= n
        if self.left < 0:
            raise ShardRefused(
                f"the job's data passed its limit of {self.limit // MB} MB (the smaller of "
                f"its disk_mb and this host's limit) while reading {_shown(uri)}"
            )
        self.check_time(uri)

    def check_time(self, uri: str) -> None:
        if time.monotonic() >= self.deadline:
            raise ShardRefused(
                f"the job's data took longer than this host's limit of "
                f"{self.timeout_s:g}s (at {_shown(uri)})"
            )

    def seconds_left(self) -> float:
        return max(0.001, self.deadline - time.monotonic())


def _write_failure(dest: Path, e: OSError) -> ShardRefused | ShardStoreFailed:
    # The worker checks before a job that its disk has the space the job declares; a full
    # disk after that is data larger than the job said (its fault). Any other write error
    # is this machine's.
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return ShardRefused(f"the job's data filled the disk writing {dest.name}: {e}")
    return ShardStoreFailed(f"cannot write data into {dest}: {e}")


def _copy_verified(
    chunks: Iterator[bytes], dest: Path, sha256: str, uri: str, budget: _Budget
) -> None:
    """Write `chunks` to `dest` if they hash to `sha256`; nothing is left behind otherwise."""
    digest = hashlib.sha256()
    try:
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
    except OSError as e:
        raise ShardStoreFailed(f"cannot write data into {dest.parent}: {e}") from e
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                budget.take(len(chunk), uri)
                digest.update(chunk)
                try:
                    out.write(chunk)
                except OSError as e:
                    raise _write_failure(dest, e) from e
        if digest.hexdigest() != sha256:
            # Never the digest of what was read: it says what the source holds.
            raise ShardRefused(f"data {_shown(uri)}: hash mismatch (not its pinned SHA-256)")
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _local_file(uri: str, policy: DataFetchPolicy) -> Path:
    """The file a file:// shard names, if it lies under a directory the operator allows."""
    parts = urlsplit(uri)
    if parts.netloc not in ("", "localhost"):
        raise ShardRefused(f"data uri {_shown(uri)!r}: file:// names no remote host")
    if not policy.local_dirs:
        raise ShardRefused(
            f"data uri {_shown(uri)!r}: file:// data is refused (this host allows no "
            "local data directories)"
        )
    path = Path(os.path.realpath(unquote(parts.path)))
    for root in policy.local_dirs:
        if path.is_relative_to(os.path.realpath(root)):
            return path
    raise ShardRefused(
        f"data uri {_shown(uri)!r}: file:// data is refused outside this host's local "
        "data directories"
    )


def _check_uri(uri: str, policy: DataFetchPolicy) -> None:
    """What can be refused before any lookup: the scheme, a file outside the allowed
    directories, a literal address. (Before the cache too: a refused URI is refused even
    when bytes with its hash were fetched before.)"""
    parts = urlsplit(uri)
    if parts.scheme == "file":
        _local_file(uri, policy)
        return
    allowed = ("https", "http") if policy.allow_http else ("https",)
    if parts.scheme not in allowed:
        raise ShardRefused(
            f"data uri scheme {parts.scheme!r} is refused: this host fetches job data over "
            f"{' and '.join(allowed)} only"
        )
    host = parts.hostname or ""
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        return
    reason = policy.egress.refusal(str(literal))
    if reason is not None:
        raise ShardRefused(f"data {_shown(uri)}: refusing to connect: {reason}")


def _fetch_one(
    shard: DataShard,
    dest: Path,
    policy: DataFetchPolicy,
    budget: _Budget,
    client: httpx.Client,
) -> None:
    if urlsplit(shard.uri).scheme == "file":
        source = _local_file(shard.uri, policy)
        try:
            with source.open("rb") as f:
                chunks = iter(lambda: f.read(_CHUNK), b"")
                _copy_verified(chunks, dest, shard.sha256, shard.uri, budget)
        except OSError as e:
            raise ShardRefused(f"cannot read data {_shown(shard.uri)}: {e.strerror}") from e
        return
    try:
        with client.stream(
            "GET",
            shard.uri,
            # Raw bytes, as pinned: no decompression (a small body cannot become a huge one).
            headers={"Accept-Encoding": "identity"},
            timeout=httpx.Timeout(min(60.0, budget.seconds_left())),
        ) as r:
            if r.status_code != 200:
                raise ShardRefused(f"data {_shown(shard.uri)}: HTTP {r.status_code}")
            declared = r.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > budget.left:
                raise ShardRefused(
                    f"data {_shown(shard.uri)} is {int(declared) // MB} MB, past the job's "
                    f"data limit of {budget.limit // MB} MB"
                )
            _copy_verified(r.iter_raw(_CHUNK), dest, shard.sha256, shard.uri, budget)
    except EgressRefused as e:
        raise ShardRefused(f"data {_shown(shard.uri)}: {e}") from e
    except httpx.TimeoutException as e:
        budget.check_time(shard.uri)  # the whole fetch's limit, if that is what ran out
        raise ShardRefused(f"data {_shown(shard.uri)}: the source stopped answering") from e
    except httpx.HTTPError as e:
        raise ShardRefused(
            f"cannot download data {_shown(shard.uri)}: {type(e).__name__}: "
            f"{redact_credentials(str(e))[:200]}"
        ) from e


def fetch_shards(
    shards: Sequence[DataShard],
    data_dir: Path,
    *,
    disk_mb: int,
    policy: DataFetchPolicy | None = None,
    cache_dir: Path | None = None,
) -> list[Path]:
    """Fetch each shard into `data_dir/<file name>`, verified against its SHA-256, within
    the policy and `min(disk_mb, policy.max_mb)` bytes in all."""
    policy = policy or DataFetchPolicy()
    if data_dir.is_symlink() or (data_dir.exists() and not data_dir.is_dir()):
        # Only the job's repository can have put something there.
        raise ShardRefused(f"the job's repository has a {data_dir.name} that is not a directory")
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ShardStoreFailed(f"cannot create the data dir {data_dir}: {e}") from e
    budget = _Budget(policy.limit_bytes(disk_mb), policy.timeout_s)
    names: set[str] = set()
    for shard in shards:  # every name and URI checked before any byte is fetched
        _check_uri(shard.uri, policy)
        name = shard_name(shard.uri)
        if name in names:
            raise ShardRefused(f"two data shards would both be data/{name}")
        names.add(name)
    client = pinned_client(
        policy.egress,
        resolver=policy.resolver,
        allow_http=policy.allow_http,
        verify=policy.verify,
        max_redirects=policy.max_redirects,
    )
    out: list[Path] = []
    with client:
        for shard in shards:
            dest = data_dir / shard_name(shard.uri)
            cached = cache_dir / shard.sha256 if cache_dir is not None else None
            if cached is not None and cached.is_file():
                budget.take(cached.stat().st_size, shard.uri)
                shutil.copyfile(cached, dest)
            else:
                _fetch_one(shard, dest, policy, budget, client)
                if cached is not None:
                    cached.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(dest, cached)
            out.append(dest)
    return out
