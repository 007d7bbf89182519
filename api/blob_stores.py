"""Which blob store the settings select: the local directory or an S3-compatible bucket.

Apart from `api.storage` (the interface and the local store) and `api.storage_s3` (the S3
store, built on that interface), so neither imports the other's choice."""

from __future__ import annotations

from pathlib import Path

from api.storage import BlobStore, LocalBlobStore


def blob_store_for(data_dir: Path, settings: object | None = None) -> BlobStore:
    """The store the settings select: `result_store = "s3"` for an S3-compatible bucket
    (`result_store_s3_*` fields), else (the default) a directory `blobs/` under the data dir.
    """
    kind = str(getattr(settings, "result_store", "local") or "local")
    if kind == "local":
        return LocalBlobStore(Path(data_dir) / "blobs")
    if kind != "s3":
        raise ValueError(f"result_store must be 'local' or 's3', not {kind!r}")
    from api.storage_s3 import S3BlobStore  # boto3 is imported only when S3 is chosen

    def field(name: str) -> str:
        return str(getattr(settings, f"result_store_s3_{name}", "") or "")

    if not field("bucket"):
        raise ValueError("result_store is 's3' but result_store_s3_bucket is empty")
    return S3BlobStore(
        field("bucket"),
        staging_dir=Path(data_dir) / "uploads",
        endpoint_url=field("endpoint_url") or None,
        region=field("region") or None,
        access_key=field("access_key") or None,
        secret_key=field("secret_key") or None,
        prefix=field("prefix"),
    )
