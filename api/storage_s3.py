"""The blob store on an S3-compatible object store (AWS S3, MinIO, Ceph RGW, R2, ...).

boto3 is imported only when a store is built, so the API runs without it on a local store.

Blobs are objects `<prefix>blobs/<sha256>`, so the key is the content's hash like the local
store's file name. A blob's name is only known once all its bytes were hashed, so:

- a small blob (up to `buffer_bytes`) is hashed in memory and written with one PUT that
  also carries its SHA-256 as the object checksum: the server refuses bytes that arrive
  damaged;
- a larger one streams to a temporary object `<prefix>tmp/<uuid>` by multipart upload while
  being hashed, and is then copied server-side to its final key; the temporary object is
  deleted whatever happens.

A digest the caller declared is checked before anything lands under `blobs/`, so no reader
ever sees an object whose name is not its content's hash.

Resumable uploads collect on local disk first (`staging_dir`, api.uploads) and then stream
here through `put_file` as one multipart upload: S3 cannot hash an object for us, and a
part must be 5 MiB, so the API host stages and hashes, and S3 receives a complete file.
"""

from __future__ import annotations

import base64
import hashlib
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from api.storage import BlobMissing, BlobRef, BlobStore, DigestMismatch, StorageError, _check_digest

# S3 multipart parts must be at least 5 MiB (except the last).
_PART_BYTES = 8 << 20
_READ_CHUNK = 1 << 20
_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}


class S3BlobStore(BlobStore):
    def __init__(
        self,
        bucket: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        prefix: str = "",
        buffer_bytes: int = _PART_BYTES,
        client: Any = None,
        staging_dir: Path | None = None,
    ) -> None:
        """`staging_dir`: where uploads wait on local disk before they stream here; it must
        outlive the process for an upload to resume after a restart (`blob_store_for` puts
        it under the data dir). Without one, a private temporary directory."""
        if not bucket:
            raise ValueError("an S3 result store needs a bucket name")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        if buffer_bytes < 5 << 20:
            raise ValueError("buffer_bytes must be at least 5 MiB (the S3 minimum part size)")
        self.bucket = bucket
        self.prefix = prefix
        self.buffer_bytes = buffer_bytes
        self.staging_dir = (
            Path(staging_dir)
            if staging_dir is not None
            else Path(tempfile.mkdtemp(prefix="proofnet-s3-staging-"))
        )
        if client is None:
            import boto3
            from botocore.config import Config

            client = boto3.client(
                "s3",
                endpoint_url=endpoint_url or None,
                region_name=region or None,
                aws_access_key_id=access_key or None,
                aws_secret_access_key=secret_key or None,
                # Path-style works with every S3-compatible server, virtual hosts do not.
                config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 5}),
            )
        self.client = client

    def _key(self, sha256: str) -> str:
        return f"{self.prefix}blobs/{_check_digest(sha256)}"

    def _error(self, action: str, e: Exception) -> StorageError:
        return StorageError(f"cannot {action} in s3://{self.bucket}/{self.prefix}: {e}")

    # --- writing ------------------------------------------------------------------------

    def put(self, chunks: Iterable[bytes], *, expected_sha256: str | None = None) -> BlobRef:
        from botocore.exceptions import BotoCoreError, ClientError

        if expected_sha256 is not None:
            _check_digest(expected_sha256)
        it = iter(chunks)
        digest = hashlib.sha256()
        head = bytearray()
        for chunk in it:
            digest.update(chunk)
            head += chunk
            if len(head) > self.buffer_bytes:
                break
        else:
            data = bytes(head)
            sha256 = self._check(digest.hexdigest(), expected_sha256)
            try:
                if not self.exists(sha256):
                    self.client.put_object(
                        Bucket=self.bucket,
                        Key=self._key(sha256),
                        Body=data,
                        ChecksumSHA256=base64.b64encode(bytes.fromhex(sha256)).decode(),
                    )
            except (BotoCoreError, ClientError) as e:
                raise self._error("write a blob", e) from e
            return BlobRef(sha256=sha256, size=len(data))
        return self._put_multipart(bytes(head), it, digest, expected_sha256)

    @staticmethod
    def _check(sha256: str, expected: str | None) -> str:
        if expected is not None and sha256 != expected:
            raise DigestMismatch(f"content hashes to {sha256}, not the declared {expected}")
        return sha256

    def _put_multipart(
        self,
        head: bytes,
        rest: Iterator[bytes],
        digest: Any,
        expected_sha256: str | None,
    ) -> BlobRef:
        from botocore.exceptions import BotoCoreError, ClientError

        tmp_key = f"{self.prefix}tmp/{uuid.uuid4().hex}"
        upload_id: str | None = None
        parts: list[dict[str, Any]] = []
        size = 0
        try:
            upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=tmp_key)[
                "UploadId"
            ]
            pending = bytearray(head)

            def send(data: bytes) -> None:
                number = len(parts) + 1
                answer = self.client.upload_part(
                    Bucket=self.bucket,
                    Key=tmp_key,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=data,
                )
                parts.append({"ETag": answer["ETag"], "PartNumber": number})

            size = len(pending)
            for chunk in rest:
                digest.update(chunk)
                size += len(chunk)
                pending += chunk
                while len(pending) >= _PART_BYTES:
                    send(bytes(pending[:_PART_BYTES]))
                    del pending[:_PART_BYTES]
            if pending or not parts:
                send(bytes(pending))
            sha256 = self._check(digest.hexdigest(), expected_sha256)
            self.client.complete_multipart_upload(
                Bucket=self.bucket,
                Key=tmp_key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
            )
            upload_id = None
            if not self.exists(sha256):
                self.client.copy_object(
                    Bucket=self.bucket,
                    Key=self._key(sha256),
                    CopySource={"Bucket": self.bucket, "Key": tmp_key},
                )
        except (BotoCoreError, ClientError) as e:
            raise self._error("write a blob", e) from e
        finally:
            self._cleanup(tmp_key, upload_id)
        return BlobRef(sha256=sha256, size=size)

    def _cleanup(self, tmp_key: str, upload_id: str | None) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        # Best effort: a leftover temporary object is garbage, never a wrong blob.
        try:
            if upload_id is not None:
                self.client.abort_multipart_upload(
                    Bucket=self.bucket, Key=tmp_key, UploadId=upload_id
                )
            else:
                self.client.delete_object(Bucket=self.bucket, Key=tmp_key)
        except (BotoCoreError, ClientError):
            pass

    # --- reading ------------------------------------------------------------------------

    def _head(self, sha256: str) -> dict[str, Any] | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer: dict[str, Any] = self.client.head_object(
                Bucket=self.bucket, Key=self._key(sha256)
            )
            return answer
        except ClientError as e:
            if str(e.response.get("Error", {}).get("Code")) in _NOT_FOUND:
                return None
            raise self._error("read a blob", e) from e
        except BotoCoreError as e:
            raise self._error("read a blob", e) from e

    def open_chunks(self, sha256: str, *, start: int = 0) -> Iterator[bytes]:
        from botocore.exceptions import BotoCoreError, ClientError

        extra = {"Range": f"bytes={start}-"} if start > 0 else {}
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self._key(sha256), **extra)
        except ClientError as e:
            if str(e.response.get("Error", {}).get("Code")) in _NOT_FOUND:
                raise BlobMissing(f"no blob {sha256}") from e
            raise self._error("read a blob", e) from e
        except BotoCoreError as e:
            raise self._error("read a blob", e) from e
        body = answer["Body"]

        def read() -> Iterator[bytes]:
            try:
                yield from body.iter_chunks(_READ_CHUNK)
            finally:
                body.close()

        return read()

    def exists(self, sha256: str) -> bool:
        return self._head(sha256) is not None

    def size(self, sha256: str) -> int:
        head = self._head(sha256)
        if head is None:
            raise BlobMissing(f"no blob {sha256}")
        return int(head["ContentLength"])
