"""Objects on storage providers' S3 endpoints: putting a committed object with its proof
sidecar, and reading a challenged chunk back with S3 ranged GETs.

Reads are plain S3 REST `GetObject` requests with a `Range` header, path-style
(`{endpoint}/{bucket}/{key}`), unsigned: whoever checks a provider (an oracle) needs no
credentials of the provider's, and the provider's endpoint is someone else's URL, so the
caller hands in an httpx client that refuses private addresses (`proofnet.pinned_http`).
Writes go through boto3 (the `storage` or `s3` extra) with whatever credentials the
provider's endpoint requires. Vendor errors are translated here into `ObjectStoreError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from proofnet.egress import EgressRefused
from proofnet.messages.storage import (
    PROOFS_SUFFIX,
    Commitment,
    RetrievalAnswer,
    RetrievalChallenge,
    StorageError,
    chunk_range,
    commit,
    path_of_slot,
    proof_sidecar,
    slot_range,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client  # type: ignore[import-not-found]


class ObjectStoreError(Exception):
    """The endpoint did not serve (or accept) what was asked; the message says why."""


@dataclass(frozen=True)
class S3Location:
    endpoint: str  # http(s)://host[:port]
    bucket: str

    def url(self, key: str) -> str:
        return f"{self.endpoint.rstrip('/')}/{quote(self.bucket)}/{quote(key, safe='/')}"


def s3_client(
    endpoint: str, *, access_key: str | None = None, secret_key: str | None = None
) -> S3Client:
    """A boto3 S3 client for `endpoint`, path-style; unsigned when no credentials are given."""
    try:
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config
    except ImportError as exc:  # pragma: no cover - the extra is installed with dev
        raise ObjectStoreError(
            "writing to S3 endpoints needs boto3: pip install 'proofnet[storage]'"
        ) from exc
    config = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2})
    if access_key is None:
        config = config.merge(Config(signature_version=UNSIGNED))
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=access_key or "anonymous",
        aws_secret_access_key=secret_key or "anonymous",
        config=config,
    )


def _vendor(exc: Exception, what: str) -> ObjectStoreError:
    return ObjectStoreError(f"{what}: {type(exc).__name__}: {str(exc)[:300]}")


def ensure_bucket(client: Any, bucket: str) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client.head_bucket(Bucket=bucket)
        return
    except ClientError:
        pass  # absent (or not ours to see): try to create it
    except BotoCoreError as exc:
        raise _vendor(exc, f"the endpoint does not answer for bucket {bucket}") from exc
    try:
        client.create_bucket(Bucket=bucket)
    except (BotoCoreError, ClientError) as exc:
        raise _vendor(exc, f"cannot create bucket {bucket}") from exc


def allow_public_reads(client: Any, bucket: str) -> None:
    """Let anyone GET the bucket's objects (not list or write them): oracles read challenged
    chunks without the provider's credentials. What a job keeps there sealed stays sealed."""
    from botocore.exceptions import BotoCoreError, ClientError

    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ProofnetChallengeReads",
                "Effect": "Allow",
                "Principal": "*",
                "Action": ["s3:GetObject"],
                "Resource": [f"arn:aws:s3:::{bucket}/*"],
            }
        ],
    }
    try:
        client.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
    except (BotoCoreError, ClientError) as exc:
        raise _vendor(exc, f"cannot make bucket {bucket} publicly readable") from exc


def put_committed(
    client: Any, bucket: str, key: str, data: bytes, *, chunk_size: int | None = None
) -> Commitment:
    """Put `data` at `key` and its proof sidecar beside it; the commitment they hold."""
    from botocore.exceptions import BotoCoreError, ClientError

    commitment = commit(data) if chunk_size is None else commit(data, chunk_size)
    sidecar = proof_sidecar(data, commitment)
    try:
        client.put_object(Bucket=bucket, Key=key, Body=data)
        client.put_object(Bucket=bucket, Key=key + PROOFS_SUFFIX, Body=sidecar)
    except (BotoCoreError, ClientError) as exc:
        raise _vendor(exc, f"cannot put {key} in bucket {bucket}") from exc
    return commitment


def put_object(
    http: httpx.Client,
    where: S3Location,
    key: str,
    data: bytes,
    *,
    access_key: str | None = None,
    secret_key: str | None = None,
) -> None:
    """S3 `PutObject` sent through `http` (a pinned client: the endpoint is someone else's
    URL), signed with SigV4 by botocore when credentials are given, unsigned otherwise."""
    import hashlib

    url = where.url(key)
    headers = {
        "x-amz-content-sha256": hashlib.sha256(data).hexdigest(),
        "Content-Length": str(len(data)),
    }
    if access_key is not None:
        try:
            from botocore.auth import SigV4Auth
            from botocore.awsrequest import AWSRequest
            from botocore.credentials import Credentials
        except ImportError as exc:  # pragma: no cover - the extra is installed with dev
            raise ObjectStoreError("signed S3 writes need botocore: pip install boto3") from exc
        request = AWSRequest(method="PUT", url=url, data=data, headers=headers)
        SigV4Auth(Credentials(access_key, secret_key or ""), "s3", "us-east-1").add_auth(request)
        headers = dict(request.headers.items())
    try:
        response = http.put(url, content=data, headers=headers)
    except EgressRefused as exc:
        raise ObjectStoreError(f"cannot write to {where.endpoint}: {exc}") from exc
    except httpx.HTTPError as exc:
        raise _vendor(exc, f"cannot reach {where.endpoint}") from exc
    if response.status_code != 200:
        raise ObjectStoreError(f"PUT {key}: HTTP {response.status_code}: {response.text[:200]}")


def put_committed_pinned(
    http: httpx.Client,
    where: S3Location,
    key: str,
    data: bytes,
    *,
    chunk_size: int,
    access_key: str | None = None,
    secret_key: str | None = None,
) -> Commitment:
    """`put_committed` through a pinned client (`put_object`)."""
    commitment = commit(data, chunk_size)
    sidecar = proof_sidecar(data, commitment)
    for name, body in ((key, data), (key + PROOFS_SUFFIX, sidecar)):
        put_object(http, where, name, body, access_key=access_key, secret_key=secret_key)
    return commitment


def read_range(http: httpx.Client, where: S3Location, key: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of `key`, exactly, or ObjectStoreError."""
    if end <= start:
        raise ObjectStoreError(f"empty range [{start}, {end})")
    try:
        response = http.get(where.url(key), headers={"Range": f"bytes={start}-{end - 1}"})
    except EgressRefused as exc:
        raise ObjectStoreError(f"cannot read {where.endpoint}: {exc}") from exc
    except httpx.HTTPError as exc:
        raise _vendor(exc, f"cannot reach {where.endpoint}") from exc
    if response.status_code in (401, 403):
        raise ObjectStoreError(
            f"GET {key}: HTTP {response.status_code}: anonymous reads are refused, and oracles "
            "read challenged chunks without credentials (make the bucket's objects publicly "
            "readable)"
        )
    if response.status_code not in (200, 206):
        raise ObjectStoreError(f"GET {key} bytes {start}-{end - 1}: HTTP {response.status_code}")
    body = response.content
    if response.status_code == 200:
        body = body[start:end]  # a server that ignores Range sent the whole object
    if len(body) != end - start:
        raise ObjectStoreError(f"GET {key} bytes {start}-{end - 1}: got {len(body)} bytes")
    return body


def answer_challenge(
    http: httpx.Client, where: S3Location, challenge: RetrievalChallenge
) -> RetrievalAnswer:
    """What the provider's endpoint serves for `challenge`: the chunk and slot `index` of
    the proof sidecar, read with two ranged GETs. Not checked here (`verify_answer` does)."""
    c = challenge.commitment
    start, end = chunk_range(c, challenge.index)
    chunk = read_range(http, where, challenge.object_key, start, end)
    a, b = slot_range(c, challenge.index)
    slot = read_range(http, where, challenge.object_key + PROOFS_SUFFIX, a, b)
    try:
        path = path_of_slot(slot, c)
    except StorageError as exc:
        raise ObjectStoreError(f"the proof sidecar is malformed: {exc}") from exc
    return RetrievalAnswer.of(challenge.challenge_id, challenge.index, chunk, path)


def read_committed(
    http: httpx.Client, where: S3Location, key: str, commitment: Commitment
) -> bytes:
    """The whole object, refused unless it is the committed one (re-replication copies
    only a verified copy)."""
    data = read_range(http, where, key, 0, commitment.size)
    if commit(data, commitment.chunk_size).content_root != commitment.content_root:
        raise ObjectStoreError(f"{key} on {where.endpoint} is not the committed object")
    return data
