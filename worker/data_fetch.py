"""A job's data shards onto the provider's host, by the provider's rules.

The rules and the fetch are `proofnet.shard_fetch` (shared with the oracle's stage
replays): https only (http where the provider allows it), public addresses resolved once
and pinned, file:// only under the provider's local data directories, at most
`min(disk_mb, max_mb)` bytes and `timeout_s` seconds, and a mismatch reported without the
digest of what was read. Here its errors become the workspace's: a refused or bad shard
is the job's fault (`WorkspaceError`, counted against the job), a local store that fails
is this machine's (`WorkspaceUnavailable`, a `HostFault`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from proofnet.messages.shards import DataShard
from proofnet.shard_fetch import (
    MB,
    DataFetchPolicy,
    ShardRefused,
    ShardStoreFailed,
    fetch_shards,
)
from worker.workspace import WorkspaceError, WorkspaceUnavailable

__all__ = ["MB", "DataFetchPolicy", "fetch_data"]


def fetch_data(
    shards: Sequence[DataShard],
    data_dir: Path,
    *,
    disk_mb: int,
    policy: DataFetchPolicy | None = None,
    cache_dir: Path | None = None,
) -> list[Path]:
    """Fetch each shard into `data_dir/<file name>`, verified against its SHA-256, within
    the provider's policy and `min(disk_mb, policy.max_mb)` bytes in all."""
    try:
        return fetch_shards(shards, data_dir, disk_mb=disk_mb, policy=policy, cache_dir=cache_dir)
    except ShardStoreFailed as e:
        raise WorkspaceUnavailable(str(e)) from e
    except ShardRefused as e:
        raise WorkspaceError(str(e)) from e
