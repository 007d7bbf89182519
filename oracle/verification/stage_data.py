"""A relay stage's data shards, fetched for its replay and checked against the spec's pins.

The shard URIs are the job's, and the oracle fetches them on its own host, so the same
rules hold as on a provider's (`proofnet.shard_fetch`): https only (http where the
operator allows it), public addresses resolved once and pinned, file:// only under the
operator's local data directories, at most the spec's `disk_mb`, and a mismatch reported
without the digest of what was read. Any failure is `StageDataError`: the replay cannot
run now, which is not the provider's doing. It goes away with local replays, when spot
checks become verification units run by verifier workers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from proofnet.messages.shards import DataShard
from proofnet.shard_fetch import DataFetchPolicy, ShardRefused, ShardStoreFailed
from proofnet.shard_fetch import fetch_shards as _fetch


class StageDataError(Exception):
    """A shard could not be fetched, is refused, or its bytes are not the pinned ones."""


def fetch_shards(
    shards: Sequence[DataShard],
    dest_dir: Path,
    *,
    disk_mb: int,
    policy: DataFetchPolicy | None = None,
    cache_dir: Path | None = None,
) -> list[Path]:
    """Each shard into `dest_dir/<file name>`, verified against its SHA-256, in order."""
    try:
        return _fetch(shards, dest_dir, disk_mb=disk_mb, policy=policy, cache_dir=cache_dir)
    except (ShardRefused, ShardStoreFailed) as exc:
        raise StageDataError(str(exc)) from exc
