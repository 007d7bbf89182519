"""A relay stage's data shards, fetched for its replay and checked against the spec's pins.

TODO(trust boundaries): this mirrors the file/http(s) semantics of the worker's
`worker/data_fetch.py::fetch_data` without its egress rules (public https only, pinned,
bounded; TODO: use `proofnet.pinned_http` here too); the oracle may not
import the worker, so until that fetcher moves to shared ground this is the oracle's copy.
It goes away with local replays, when spot checks become verification units run by
verifier workers.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

import httpx

from proofnet.messages.shards import DataShard

_CHUNK = 1 << 20
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")


class StageDataError(Exception):
    """A shard could not be fetched, or its bytes are not the pinned ones."""


def _name(uri: str) -> str:
    name = PurePosixPath(unquote(urlsplit(uri).path)).name
    if not _SAFE_NAME.fullmatch(name):
        raise StageDataError(f"data uri {uri[:120]!r} must end in a plain file name")
    return name


def _copy_verified(chunks: Iterator[bytes], dest: Path, sha256: str, uri: str) -> None:
    digest = hashlib.sha256()
    tmp = dest.with_name(dest.name + ".part")
    with open(tmp, "wb") as f:
        for chunk in chunks:
            digest.update(chunk)
            f.write(chunk)
    if digest.hexdigest() != sha256:
        tmp.unlink(missing_ok=True)
        raise StageDataError(f"data {uri[:120]} does not hash to its pinned SHA-256")
    os.replace(tmp, dest)


def fetch_shards(
    shards: Sequence[DataShard],
    dest_dir: Path,
    *,
    cache_dir: Path | None = None,
    timeout_s: float = 600,
) -> list[Path]:
    """Each shard into `dest_dir/<file name>`, verified against its SHA-256, in order."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    for shard in shards:
        dest = dest_dir / _name(shard.uri)
        if dest in out:
            raise StageDataError(f"two data shards would both be {dest.name}")
        cached = cache_dir / shard.sha256 if cache_dir is not None else None
        if cached is not None and cached.is_file():
            shutil.copyfile(cached, dest)
            out.append(dest)
            continue
        parts = urlsplit(shard.uri)
        if parts.scheme == "file":
            try:
                with open(unquote(parts.path), "rb") as f:
                    _copy_verified(iter(lambda: f.read(_CHUNK), b""), dest, shard.sha256, shard.uri)
            except OSError as exc:
                raise StageDataError(f"cannot read data {shard.uri[:120]}: {exc}") from exc
        elif parts.scheme in ("http", "https"):
            try:
                with httpx.stream("GET", shard.uri, timeout=timeout_s, follow_redirects=True) as r:
                    if r.status_code != 200:
                        raise StageDataError(f"data {shard.uri[:120]}: HTTP {r.status_code}")
                    _copy_verified(r.iter_bytes(_CHUNK), dest, shard.sha256, shard.uri)
            except httpx.HTTPError as exc:
                raise StageDataError(f"cannot download data {shard.uri[:120]}: {exc}") from exc
        else:
            raise StageDataError(f"data uri scheme {parts.scheme!r} is not supported")
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(dest, cached)
        out.append(dest)
    return out
